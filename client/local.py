"""Run the server as a child process on a free loopback port, for embedded use and tests.

The parent binds the socket and hands it to the child (`server --fd`), so there is no window in
which another process can take the port between choosing it and serving on it. The child's standard
input is a pipe from the parent that is never written: the kernel closes it when the parent exits,
however it exits (SIGKILL included), and the child stops then (`server --exit-with-stdin`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Self

_POLL_S = 0.05
# Loopback traffic must not go through a proxy configured in the environment.
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class LocalServer:
    """`with LocalServer() as server: ... server.base_url ...`

    `settings` are server settings by field name (`max_concurrent_envs=64`); they reach the child
    as the environment variables the server reads (`MAX_CONCURRENT_ENVS=64`).
    """

    def __init__(
        self,
        settings: Mapping[str, object] | None = None,
        *,
        startup_timeout_s: float = 30.0,
        python: str = sys.executable,
    ) -> None:
        self.settings = dict(settings or {})
        self.startup_timeout_s = startup_timeout_s
        self.python = python
        self.base_url = ""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        """Start the child and wait until it answers `/health`; returns the base URL."""
        if self.process is not None:
            return self.base_url
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        env = {**os.environ, "LOG_LEVEL": "warning", **{k.upper(): str(v) for k, v in self.settings.items()}}
        try:
            self.process = subprocess.Popen(
                [self.python, "-m", "service_incident.server", "--fd", str(listener.fileno()), "--exit-with-stdin"],
                pass_fds=(listener.fileno(),),
                env=env,
                stdin=subprocess.PIPE,
                # The embedding program's stdout may be a contract (inference.py's): the server's
                # output, if any, goes to stderr.
                stdout=sys.stderr,
            )
        finally:
            listener.close()  # the child holds its own copy
        self.base_url = f"http://127.0.0.1:{port}"
        self._wait_ready()
        return self.base_url

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with code {self.process.returncode} during startup")
            try:
                with _direct.open(f"{self.base_url}/health", timeout=1.0) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # not serving yet
            time.sleep(_POLL_S)
        self.stop()
        raise TimeoutError(f"server not ready within {self.startup_timeout_s:g} s")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        assert process.stdin is not None
        process.stdin.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
