"""Test helpers: serve any ASGI app with uvicorn on a free 127.0.0.1 port in a background thread; a
clock the test moves by hand; waiting for a condition without sleeping through a timeout; the
warnings a server logs."""

from __future__ import annotations

import http.client
import logging
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

# The stock OpenEnv side (echo_env.py, serve.py), for the interop tests and the transport benchmark.
STOCK_DIR = Path(__file__).resolve().parent / "stock"
WAIT_S = 10.0  # how long `eventually` waits before it fails: far longer than anything it waits for


class ManualClock:
    """A monotonic clock that moves only when the test says so, for the server's idle deadlines."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def eventually(condition: Any, what: str) -> None:
    """Poll `condition()` until it is true (the server's reaper runs every 50 ms in tests)."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WAIT_S:g} s: {what}")
        time.sleep(0.01)


@contextmanager
def logged_warnings() -> Iterator[list[logging.LogRecord]]:
    """The warnings and errors the in-process test servers log meanwhile. Enter it once the server
    runs: starting one configures uvicorn's loggers afresh, dropping handlers added before."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "asyncio", "service_incident")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield records
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


@contextmanager
def serving(app: Any, **options: Any) -> Iterator[str]:
    """Yields the base URL (`http://127.0.0.1:PORT`) while the app is served; stops it after."""
    listener = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, **{"log_level": "warning", **options}))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        listener.close()


@contextmanager
def process_on_socket(
    command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None, ready_path: str | None = "/health"
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start `command` (`{fd}` in it replaced) on a fresh loopback socket it inherits; yield its base
    URL and process once `ready_path` answers 200 (at once if None). Stopped on exit."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=4096)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    fd = str(listener.fileno())
    process = subprocess.Popen(
        [part.replace("{fd}", fd) for part in command],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        pass_fds=(listener.fileno(),),
        stdout=subprocess.DEVNULL,
    )
    listener.close()
    try:
        deadline = time.monotonic() + 60
        while ready_path is not None:
            try:
                connection = http.client.HTTPConnection(url[7:], timeout=1)
                connection.request("GET", ready_path)
                if connection.getresponse().status == 200:
                    break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command[:3]} did not start")
            time.sleep(0.1)
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=10)
