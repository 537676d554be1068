"""Real parts for the scale-out tests and benchmark: a redis-server, server processes that can be
killed and restarted on their port, and an nginx in front of them, each on free 127.0.0.1 ports with
its files in a temporary folder; an episode's trace, to compare runs by; and policies that disturb
the run at chosen moments."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec

from service_incident.harness.evaluation import Policy, PolicyFactory
from service_incident.harness.records import EpisodeRecord, EpisodeSpec, Turn
from service_incident.models import Action, Observation

START_S = 120.0  # a loaded machine takes a while to import the server


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def missing_services() -> str | None:
    """Why the scale-out tests cannot run here, or None (`make scale-services` installs both)."""
    absent = [name for name in ("nginx", "redis-server") if shutil.which(name) is None]
    return f"{' and '.join(absent)} not installed (make scale-services)" if absent else None


@contextmanager
def _listening(command: list[str], port: int) -> Iterator[None]:
    """Run `command` until the block ends, once it accepts connections on `port`."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_S
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{command[0]} did not start") from None
                time.sleep(0.05)
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def redis_server() -> Iterator[str]:
    """A throwaway redis-server (nothing saved to disk); yields its URL."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="redis-") as folder:
        command = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
        with _listening([*command, "--dir", folder], port):
            yield f"redis://127.0.0.1:{port}/0"


class ServerProcess:
    """`server` in its own process on a fixed port, so that it can be killed and started again there."""

    def __init__(self, environ: dict[str, str], workers: int = 1) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.environ = {**os.environ, "LOG_LEVEL": "warning", **environ}
        self.workers = workers
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ServerProcess:
        command = [sys.executable, "-m", "service_incident.server", "--port", str(self.port)]
        command += ["--workers", str(self.workers)]
        self.process = subprocess.Popen(command, env=self.environ, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + START_S
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.05)

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.signal(signal.SIGTERM)


@contextmanager
def servers(count: int, environ: dict[str, str], workers: int = 1) -> Iterator[list[ServerProcess]]:
    started = [ServerProcess(environ, workers) for _ in range(count)]
    try:
        for server in started:
            server.start()
        yield started
    finally:
        for server in started:
            server.stop()


# As docs/scale-out.md and deploy/k8s/ingress.yaml have it: WebSocket sessions (/ws) go to the
# process with the fewest open, since any process resumes any episode; HTTP requests hash on
# Episode-Id, so an episode usually finds the process that has it cached, and a request without one
# (a reset) hashes on its own request id, which spreads them. A dead upstream is skipped.
# For the measurements: one worker (the servers need the other core), no access log, connections to
# the upstreams kept alive, and a tunnel buffer that holds a whole observation frame (up to ~14 KB;
# the default of one page would pass a frame in several reads and writes).
# How long nginx keeps an upstream it saw fail out of rotation before trying it again.
FAIL_TIMEOUT_S = 2
NGINX_CONF = """
worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log error;
{user}
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    map $http_episode_id $balance_key {{ "" $request_id; default $http_episode_id; }}
    upstream sessions {{
        least_conn;
        {upstreams}
    }}
    upstream episodes {{
        hash $balance_key consistent;
        {upstreams}
        keepalive 64;
    }}
    proxy_http_version 1.1;
    proxy_connect_timeout 1s;
    proxy_next_upstream error timeout http_502;
    server {{
        listen 127.0.0.1:{port};
        location = /ws {{
            proxy_pass http://sessions;
            proxy_set_header Host $http_host;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_buffer_size 32k;
            proxy_buffers 4 32k;  # nginx checks them against proxy_buffer_size, though a tunnel uses none
            proxy_read_timeout 3600s;
            proxy_send_timeout 3600s;
        }}
        location / {{
            proxy_pass http://episodes;
            # A location's own proxy_set_header replaces all inherited ones: each names Host.
            proxy_set_header Host $http_host;
            proxy_set_header Connection "";
        }}
    }}
}}
"""


@contextmanager
def nginx(upstreams: list[ServerProcess]) -> Iterator[str]:
    """nginx balancing `upstreams`; yields its URL."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="nginx-") as folder:
        lines = "\n        ".join(f"server {u.url[7:]} max_fails=1 fail_timeout={FAIL_TIMEOUT_S}s;" for u in upstreams)
        user = "user root;" if os.geteuid() == 0 else ""
        conf = Path(folder, "nginx.conf")
        conf.write_text(NGINX_CONF.format(folder=folder, user=user, upstreams=lines, port=port))
        with _listening(["nginx", "-c", str(conf), "-p", folder], port):
            yield f"http://127.0.0.1:{port}"


def trace(record: EpisodeRecord) -> bytes:
    """What the environment showed in one episode, as bytes. The episode's name (metadata.episode_id)
    is a fresh uuid in every run, in-process too, so it is the one field left out."""

    def shown(observation: Any) -> Any:
        body = msgspec.to_builtins(observation)
        body["metadata"].pop("episode_id")
        return body

    steps = [(step.action_text, shown(step.observation)) for step in record.trace]
    return msgspec.json.encode([shown(record.reset), steps, record.score, record.failure])


def disturbing(policy_for: PolicyFactory, at: Collection[int], disturb: Callable[[], None]) -> PolicyFactory:
    """`policy_for`'s policies, calling `disturb()` as the run's answers numbered `at` (from 1, over
    every episode) are asked for: before the step they answer goes out."""
    answers = 0

    def factory(spec: EpisodeSpec) -> Policy:
        policy = policy_for(spec)

        async def act(observation: Observation) -> Action | Turn:
            nonlocal answers
            answers += 1
            if answers in at:
                disturb()
            return await policy(observation)

        return act

    return factory
