"""Attacks a server process from outside, one fresh server per attack, and prints what held.

    python bench/bench_exposure.py [--seconds 5]

Measures the checkout it imports `service_incident` from (the header names it), so the same script
gives the before and after of a change: run it with PYTHONPATH pointing at the other checkout.
Every attack runs beside a neighbour, a WebSocket session asking for its state in a loop, whose
round trips give the p99 column. The attacks:

* stalled handshakes: 200 WebSocket handshakes with a 9 KB header line; the server's open
  descriptors before, just after, and once the head deadline (HTTP_TIMEOUT_S=2) is past;
* unbalanced brackets: `[` x 975 in a loop to /step, /reset, /mcp and over the WebSocket; the
  tracebacks and bytes of log the server wrote (and the bytes an hour at that rate);
* deep frames: an 800 KB balanced frame, 400,000 levels deep, over and over;
* forged forwarding headers: 17 x 16 resets from one address, each naming another X-Forwarded-For;
  17 addresses x 16 resets: whether a victim's HTTP episode (another address) survives;
* reconnect loop: one address opening WebSocket sessions as fast as it can against a server
  allowed 256 descriptors; the share of /health probes from another address answered.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import websockets
from websockets.sync.client import connect as sync_connect

import service_incident

UNBALANCED = "[" * 975
DEEP = "[" * 400_000 + "]" * 400_000
HANDSHAKE = (
    "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    f"X-Long: {'l' * 9000}\r\n\r\n"
).encode()


class Server:
    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.process = process
        self.port = port
        self.log = log

    @property
    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def request(self, method: str, path: str, body: str | None = None, **headers: str) -> tuple[int, bytes]:
        return request(self.port, method, path, body, headers)


def request(
    port: int,
    method: str,
    path: str,
    body: str | None = None,
    headers: dict[str, str] | None = None,
    source: str = "",
    timeout: float = 10,
) -> tuple[int, bytes]:
    bind = (source, 0) if source else None
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=bind)
    try:
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        connection.request(method, path, body=body, headers=all_headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@contextmanager
def server(max_descriptors: int | None = None, **env: str) -> Iterator[Server]:
    listener = socket.create_server(("127.0.0.1", 0), backlog=4096)
    port = listener.getsockname()[1]
    log = Path(tempfile.mkstemp(prefix="bench-exposure-", suffix=".log")[1])

    def limit() -> None:
        if max_descriptors is not None:
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (max_descriptors, hard))

    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "service_incident.server", "--fd", str(listener.fileno())],
            env={**os.environ, "HTTP_TIMEOUT_S": "2", "LOG_LEVEL": "info", **env},
            pass_fds=(listener.fileno(),),
            stdout=out,
            stderr=out,
            preexec_fn=limit,
            cwd=tempfile.gettempdir(),  # not the checkout: PYTHONPATH decides which code runs
        )
    listener.close()
    try:
        deadline = time.monotonic() + 60
        while True:
            with suppress(OSError):
                if request(port, "GET", "/health")[0] == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.1)
        yield Server(process, port, log)
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.unlink()


class Neighbour:
    """A WebSocket session asking for its state in a loop, in a thread of its own."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.waits: list[float] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        while not self._stop.is_set():
            try:
                async with websockets.connect(f"ws://127.0.0.1:{self.port}/ws", open_timeout=10) as ws:
                    await ws.send('{"type": "reset", "data": {"task_id": "easy", "seed": 1}}')
                    await ws.recv()
                    while not self._stop.is_set():
                        started = time.perf_counter()
                        await ws.send('{"type": "state"}')
                        await asyncio.wait_for(ws.recv(), 30)
                        self.waits.append(time.perf_counter() - started)
                        await asyncio.sleep(0.005)
            except (TimeoutError, OSError, websockets.WebSocketException):
                self.failures += 1
                await asyncio.sleep(0.1)

    def __enter__(self) -> Neighbour:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.waits and time.monotonic() < deadline:
            time.sleep(0.01)
        self.waits.clear()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=40)

    @property
    def p99_ms(self) -> str:
        if len(self.waits) < 2:
            return "no reply"
        return f"{statistics.quantiles(self.waits, n=100)[98] * 1000:.1f}"


def in_process(target: Callable[..., None], *args: Any) -> Any:
    process = multiprocessing.get_context("fork").Process(target=target, args=args, daemon=True)
    process.start()
    return process


# --- the attacks ---------------------------------------------------------------------------------


def stalled_handshakes(seconds: float) -> list[tuple[str, str, str]]:
    with server() as srv, Neighbour(srv.port) as neighbour:
        before = srv.descriptors
        stalled = []
        for _ in range(200):
            raw = socket.create_connection(("127.0.0.1", srv.port))
            raw.sendall(HANDSHAKE)
            stalled.append(raw)
        time.sleep(0.5)
        during = srv.descriptors
        time.sleep(4)  # twice the head deadline
        after = srv.descriptors
        for raw in stalled:
            raw.close()
        p99 = neighbour.p99_ms
    return [("stalled handshakes: open descriptors (before / +0.5 s / +4.5 s)", f"{before} / {during} / {after}", p99)]


def _unbalanced_loop(port: int, seconds: float, counter: Any) -> None:
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        try:
            with sync_connect(f"ws://127.0.0.1:{port}/ws", open_timeout=5) as ws:
                while time.monotonic() < stop:
                    for path in ("/step", "/reset", "/mcp"):
                        with suppress(OSError, http.client.HTTPException):
                            request(port, "POST", path, UNBALANCED)
                            counter.value += 1
                    counter.value += 1
                    ws.send(UNBALANCED)
                    ws.recv(timeout=5)
        except (OSError, TimeoutError, websockets.WebSocketException):
            pass  # the server dropped the socket: connect again


def unbalanced_brackets(seconds: float) -> list[tuple[str, str, str]]:
    with server() as srv, Neighbour(srv.port) as neighbour:
        counter = multiprocessing.get_context("fork").Value("i", 0)
        start = srv.log.stat().st_size
        attacker = in_process(_unbalanced_loop, srv.port, seconds, counter)
        attacker.join()
        time.sleep(0.5)
        text = srv.log.read_bytes()[start:]
        p99 = neighbour.p99_ms
    tracebacks = text.count(b"Traceback (most recent call last)")
    per_hour = len(text) / seconds * 3600
    return [
        (f"unbalanced brackets: {counter.value} requests in {seconds:g} s: tracebacks", str(tracebacks), p99),
        ("unbalanced brackets: log bytes (per hour at this rate)", f"{len(text):,} ({per_hour / 1e6:,.1f} MB)", ""),
    ]


def _deep_frames(port: int, seconds: float, counter: Any) -> None:
    stop = time.monotonic() + seconds
    with sync_connect(f"ws://127.0.0.1:{port}/ws", max_size=None, open_timeout=10) as ws:
        while time.monotonic() < stop:
            ws.send(DEEP)
            ws.recv(timeout=30)
            counter.value += 1


def deep_frames(seconds: float) -> list[tuple[str, str, str]]:
    with server() as srv, Neighbour(srv.port) as neighbour:
        counter = multiprocessing.get_context("fork").Value("i", 0)
        in_process(_deep_frames, srv.port, seconds, counter).join()
        p99 = neighbour.p99_ms
    return [(f"deep frames: 800 KB, 400,000 levels, {counter.value} sent", "", p99)]


def _victim_survives(srv: Server, attack: Callable[[], None]) -> str:
    body = request(srv.port, "POST", "/reset", "{}", source="127.0.0.200")[1]
    episode = json.loads(body)["episode_id"]
    started = time.perf_counter()
    attack()
    elapsed = time.perf_counter() - started
    alive = request(srv.port, "GET", "/state", headers={"Episode-Id": episode}, source="127.0.0.200")[0] == 200
    return f"{'survives' if alive else 'evicted'} ({elapsed:.2f} s of resets)"


def forged_headers(seconds: float) -> list[tuple[str, str, str]]:
    rows = []
    with server() as srv, Neighbour(srv.port) as neighbour:

        def spoofed() -> None:
            for i in range(17 * 16):
                request(srv.port, "POST", "/reset", "{}", {"X-Forwarded-For": f"10.9.{i // 16}.{i % 16 + 1}"})

        rows.append(("17 x 16 resets, forged X-Forwarded-For: victim's episode", _victim_survives(srv, spoofed)))

        def addresses() -> None:
            for i in range(17):
                for _ in range(16):
                    request(srv.port, "POST", "/reset", "{}", source=f"127.0.0.{i + 2}")

        rows.append(("17 addresses x 16 resets: victim's episode", _victim_survives(srv, addresses)))
        local = request(srv.port, "POST", "/reset", "{}")[1]
        forwarded = request(srv.port, "GET", "/state", headers={"X-Forwarded-For": "203.0.113.5"})
        leaked = json.loads(local)["episode_id"].encode() in forwarded[1]
        rows.append(("forwarded request without an id: status, latest episode leaked", f"{forwarded[0]}, {leaked}"))
        rebinding = request(srv.port, "POST", "/reset", "{}", {"Host": "evil.example", "Origin": "http://evil.example"})
        rows.append(("Host and Origin evil.example (DNS rebinding): /reset", str(rebinding[0])))
        p99 = neighbour.p99_ms
    return [(what, result, p99 if i == 0 else "") for i, (what, result) in enumerate(rows)]


def _reconnect_loop(port: int, seconds: float) -> None:
    """Opens 200 WebSocket sessions a second, holding the last 400 of them: descriptors run out, not
    the CPU (a connection flood as fast as the machine goes is another attack)."""
    stop = time.monotonic() + seconds
    held: list[socket.socket] = []
    while time.monotonic() < stop:
        time.sleep(0.005)
        try:
            raw = socket.create_connection(("127.0.0.1", port), timeout=2)
            raw.sendall(HANDSHAKE.replace(b"X-Long: " + b"l" * 9000 + b"\r\n", b""))
            held.append(raw)
        except OSError:
            time.sleep(0.01)
        if len(held) > 400:
            held.pop(0).close()
    for raw in held:
        raw.close()


def reconnect_loop(seconds: float) -> list[tuple[str, str, str]]:
    with server(max_descriptors=256) as srv, Neighbour(srv.port) as neighbour:
        attacker = in_process(_reconnect_loop, srv.port, seconds)
        answered = probes = 0
        while attacker.is_alive():
            probes += 1
            with suppress(OSError, http.client.HTTPException):
                answered += request(srv.port, "GET", "/health", source="127.0.0.201", timeout=2)[0] == 200
            time.sleep(0.1)
        p99 = neighbour.p99_ms
    return [("reconnect loop, 256 descriptors: /health answered", f"{answered}/{probes}", p99)]


def baseline(seconds: float) -> list[tuple[str, str, str]]:
    with server() as srv, Neighbour(srv.port) as neighbour:
        time.sleep(seconds)
        p99 = neighbour.p99_ms
    return [("no attack", "", p99)]


ATTACKS = [baseline, stalled_handshakes, unbalanced_brackets, deep_frames, forged_headers, reconnect_loop]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="how long each loop attack runs (5)")
    parser.add_argument("--only", choices=[attack.__name__ for attack in ATTACKS], action="append")
    args = parser.parse_args()
    checkout = Path(service_incident.__file__).resolve().parent.parent
    print(f"checkout: {checkout}\n")
    print(f"| {'attack':<66} | {'result':<36} | neighbour p99 ms |")
    print(f"|{'-' * 68}|{'-' * 38}|------------------|")
    for attack in ATTACKS:
        if args.only and attack.__name__ not in args.only:
            continue
        for what, result, p99 in attack(args.seconds):
            print(f"| {what:<66} | {result:<36} | {p99:>16} |", flush=True)


if __name__ == "__main__":
    main()
