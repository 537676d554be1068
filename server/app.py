"""The ASGI app (`app`, `create_app`) and the `server` console script (`main`).

Serve with `server` (reads the settings from the environment, see settings.py) or, equivalently for
the HTTP routes, `uvicorn service_incident.server.app:app`; only `server` applies the transport
limits (frame size, keepalive, request heads), which are uvicorn options rather than app options.
`/web` serves the page (`/` redirects there); with `RESULTS_DIR` set, `/results/` serves that folder
of inference results for the page to replay. `server --workers N` runs uvicorn's workers sharing one
episode store (docs/scale-out.md); SIGTERM drains the WebSocket sessions before uvicorn stops.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute

from service_incident.wire import encode, is_loopback

from . import apidocs, collector
from .busy_poll import BusyPolling
from .episode_log import open_log
from .errors import EXCEPTION_HANDLERS, JSON
from .generation import Generation
from .guard import HostPolicy, OriginPolicy, RequestGuard, from_this_machine
from .http_api import HttpApi
from .http_episodes import EpisodeStore
from .mcp import McpEndpoint
from .openapi import openapi_document
from .replay import Replayer
from .sessions import Clock, SessionRegistry, environments
from .settings import Settings
from .webui import ResultFiles, WebUI, page_policy
from .ws import SessionEndpoint

# Bounds on how often idle sessions and episodes are looked for: often enough for short test
# timeouts, rarely enough to cost nothing in production.
_REAP_MIN_S, _REAP_MAX_S = 0.05, 5.0
# An episode used within this long (and not over) is live: a full server never evicts another
# client's live episode, it refuses the newcomer instead (bounded.py).
EPISODE_LIVE_S = 60.0
# Logged episodes one client address keeps, WebSocket and HTTP together (an evaluation runs hundreds
# of sessions from one address); its oldest go first.
LOGGED_PER_CLIENT = 4096


def create_app(settings: Settings | None = None, clock: Clock = time.monotonic) -> Starlette:
    """The app. `clock` times idle sessions and episodes (tests pass one they can move)."""
    settings = settings or Settings.load()
    new_env = environments(settings.holdout_key)
    registry = SessionRegistry(settings.max_concurrent_envs, settings.session_idle_timeout_s, clock, new_env)
    idle_s = max(settings.session_idle_timeout_s, settings.http_episode_idle_timeout_s)
    log = open_log(
        settings.episode_store,
        settings.max_concurrent_envs + settings.http_max_episodes,
        LOGGED_PER_CLIENT,
        idle_s,
        clock,
    )
    generation = Generation(settings.generation_processes, settings.holdout_key)
    replayer = Replayer(log, new_env, settings.holdout_key, generation)
    episodes = EpisodeStore(
        replayer,
        settings.http_max_episodes,
        settings.http_max_episodes_per_client,
        settings.http_episode_idle_timeout_s,
        EPISODE_LIVE_S,
        clock,
    )
    api = HttpApi(episodes, registry, _implicit_policy(settings), settings.holdout_key)
    mcp = McpEndpoint(
        api.openenv_mcp,
        settings.http_max_episodes,
        settings.http_episode_idle_timeout_s,
        clock,
        settings.http_max_body_bytes,
        new_env,
        settings.mcp_max_sessions_per_client,
        generation,
    )
    interval = min(settings.session_idle_timeout_s, settings.http_episode_idle_timeout_s) / 4
    interval = min(max(interval, _REAP_MIN_S), _REAP_MAX_S)

    async def reap_forever() -> None:
        while True:
            await anyio.sleep(interval)
            registry.reap()
            await episodes.expire()
            mcp.expire()
            await log.expire()

    origins = OriginPolicy(settings.origins)
    sessions = SessionEndpoint(registry, origins, replayer)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp.running(), anyio.create_task_group() as tasks:
            tasks.start_soon(reap_forever)
            _drain_before_exit(sessions)
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()
                generation.close()
                await log.aclose()

    openapi = encode(openapi_document())

    async def openapi_json(request: Request) -> Response:
        return Response(openapi, media_type=JSON)

    policy = page_policy(settings.frame_ancestors, settings.origins)
    routes: list[BaseRoute] = [
        WebSocketRoute("/ws", sessions.serve),
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route("/mcp", mcp),
        *api.routes(),
        *apidocs.routes(policy),
        *WebUI(policy=policy).routes(),
    ]
    if settings.results_dir is not None:
        routes.append(Mount("/results", ResultFiles(directory=settings.results_dir)))
    guard = Middleware(
        RequestGuard,
        hosts=HostPolicy(settings.hosts),
        origins=origins,
        max_body_bytes=settings.http_max_body_bytes,
        body_timeout_s=settings.http_timeout_s,
    )
    busy_polling = Middleware(BusyPolling, window_us=settings.busy_poll_us)
    return Starlette(
        routes=routes, middleware=[busy_polling, guard], exception_handlers=EXCEPTION_HANDLERS, lifespan=lifespan
    )


def _drain_before_exit(sessions: SessionEndpoint) -> None:
    """On SIGTERM (a rolling update, a scale-down), drain the WebSocket sessions first, then let
    uvicorn's own handler shut the server down (it would close every socket at once, 1012).

    Installed from the lifespan, inside uvicorn's signal capture, in whichever process serves the
    app (each worker too); an app served from a thread leaves the signals alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGTERM)

    async def drain_then_exit(signum: int) -> None:
        await sessions.drain()
        if callable(previous):
            previous(signum, None)

    draining: set[asyncio.Task[None]] = set()

    def start_draining(signum: int) -> None:
        task = loop.create_task(drain_then_exit(signum))
        draining.add(task)
        task.add_done_callback(draining.discard)

    def on_sigterm(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, previous)  # a second SIGTERM goes straight to uvicorn
        loop.call_soon_threadsafe(start_draining, signum)

    signal.signal(signal.SIGTERM, on_sigterm)


def _implicit_policy(settings: Settings) -> Callable[[Request], bool]:
    """Whether a request without an episode id may continue the latest episode (HTTP_IMPLICIT_EPISODE).

    "auto" needs both the setting's host and the request to be local (guard.from_this_machine): the
    setting alone cannot tell, since `uvicorn --host 0.0.0.0` does not go through the settings, nor
    can the address, since a tunnel or a proxy on this machine connects from loopback too.
    """
    if settings.http_implicit_episode != "auto":
        return lambda request: settings.http_implicit_episode == "true"
    if not is_loopback(settings.host):
        return lambda request: False
    return lambda request: from_this_machine(request.scope)


def main(argv: list[str] | None = None) -> None:
    """Run the server. Flags override the environment variables, which override the defaults."""
    parser = argparse.ArgumentParser(prog="server", description=__doc__.splitlines()[0])
    parser.add_argument("--host", help="interface to bind (HOST; default 127.0.0.1, use 0.0.0.0 in a container)")
    parser.add_argument("--port", type=int, help="port to bind (PORT; default 8000)")
    parser.add_argument("--fd", type=int, help="serve on this already-bound socket (used by LocalServer)")
    parser.add_argument(
        "--exit-with-stdin",
        action="store_true",
        help="stop when standard input closes: the launching process ended, however it ended",
    )
    parser.add_argument(
        "--workers",
        help="server processes on one port, a number or `auto` (one per core) (WORKERS; default 1)",
    )
    args = parser.parse_args(argv)
    overrides = {name: value for name in ("host", "port", "workers") if (value := getattr(args, name)) is not None}
    settings = Settings.load(**overrides)
    if settings.worker_count > 1:
        if args.fd is not None:
            parser.error("--fd serves one process: give --workers a port instead")
        _serve_workers(settings, overrides, args.exit_with_stdin)
        return
    options = settings.uvicorn_options()
    sockets = None
    if args.fd is not None:
        # uvicorn's own `fd` option takes the socket for a Unix one, so TCP_NODELAY is never set and
        # Nagle's algorithm stalls replies written in two parts by ~40 ms. A socket object built from
        # the descriptor knows its real family.
        del options["host"], options["port"]
        sockets = [socket.socket(fileno=args.fd)]
    del options["workers"]  # one process, which uvicorn.Server is
    app = create_app(settings)
    collector.settle()
    server = uvicorn.Server(uvicorn.Config(app, **options))
    if args.exit_with_stdin:
        threading.Thread(target=_stop_at_eof, args=(server,), name="exit-with-stdin", daemon=True).start()
    server.run(sockets=sockets)


def _serve_workers(settings: Settings, overrides: dict[str, object], exit_with_stdin: bool) -> None:
    """uvicorn's workers: processes on one port, each building the app from the environment, so the
    settings travel there; without a store of their own they share a SQLite file made here."""
    environ = {name.upper(): str(value) for name, value in overrides.items()}
    folder = None
    if settings.episode_store == "memory":
        folder = tempfile.mkdtemp(prefix="service-incident-")
        environ["EPISODE_STORE"] = f"sqlite://{Path(folder, 'episodes.sqlite3')}"
    os.environ.update(environ)
    if exit_with_stdin:
        threading.Thread(target=_signal_at_eof, name="exit-with-stdin", daemon=True).start()
    try:
        uvicorn.run("service_incident.server.app:worker_app", factory=True, **settings.uvicorn_options())
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def worker_app() -> Starlette:
    """The app of one of `--workers`' processes, built from the environment, its collector settled."""
    app = create_app()
    collector.settle()
    return app


def _signal_at_eof() -> None:
    while sys.stdin.buffer.read(65536):
        pass
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's supervisor stops its workers on it


def _stop_at_eof(server: uvicorn.Server) -> None:
    # The kernel closes the parent's end of the pipe when the parent exits, SIGKILL included, so
    # this read returns then whatever happened to it; a parent-death signal would fire on the exit of
    # the launching thread instead, which for a client's event-loop thread is far too early.
    while sys.stdin.buffer.read(65536):
        pass
    server.should_exit = True


app = create_app()

if __name__ == "__main__":
    main()
