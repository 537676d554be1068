"""The ASGI app (`app`, `create_app`) and the `server` console script (`main`).

Serve with `server` (reads the settings from the environment, see settings.py) or, equivalently for
the HTTP routes, `uvicorn service_incident.server.app:app`; only `server` applies the WebSocket
limits (frame size, keepalive), which are uvicorn options rather than app options.
`/web` serves the page (`/` redirects there); with `RESULTS_DIR` set, `/results/` serves that folder
of inference results for the page to replay.
"""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from .http_api import JSON, HttpApi
from .http_episodes import EpisodeStore
from .mcp import McpEndpoint
from .openapi import openapi_document
from .protocol import encode
from .sessions import SessionRegistry
from .settings import Settings
from .webui import WebUI
from .ws import SessionEndpoint

# Bounds on how often idle sessions and episodes are looked for: often enough for short test
# timeouts, rarely enough to cost nothing in production.
_REAP_MIN_S, _REAP_MAX_S = 0.05, 5.0


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings.load()
    registry = SessionRegistry(settings.max_concurrent_envs, settings.session_idle_timeout_s)
    episodes = EpisodeStore(settings.http_max_episodes, settings.http_episode_idle_timeout_s)
    mcp = McpEndpoint(episodes, settings.http_max_episodes, settings.http_episode_idle_timeout_s)
    interval = min(settings.session_idle_timeout_s, settings.http_episode_idle_timeout_s) / 4
    interval = min(max(interval, _REAP_MIN_S), _REAP_MAX_S)

    async def reap_forever() -> None:
        while True:
            await anyio.sleep(interval)
            now = time.monotonic()
            registry.reap(now)
            episodes.expire(now)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp.running(), anyio.create_task_group() as tasks:
            tasks.start_soon(reap_forever)
            yield
            tasks.cancel_scope.cancel()

    openapi = encode(openapi_document())

    async def openapi_json(request: Request) -> Response:
        return Response(openapi, media_type=JSON)

    routes: list[BaseRoute] = [
        WebSocketRoute("/ws", SessionEndpoint(registry).serve),
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route("/mcp", mcp),
        *HttpApi(episodes, registry).routes(),
        *WebUI().routes(),
    ]
    if settings.results_dir is not None:
        routes.append(Mount("/results", StaticFiles(directory=settings.results_dir)))
    return Starlette(routes=routes, lifespan=lifespan)


def main(argv: list[str] | None = None) -> None:
    """Run the server. Flags override the environment variables, which override the defaults."""
    parser = argparse.ArgumentParser(prog="server", description=__doc__.splitlines()[0])
    parser.add_argument("--host", help="interface to bind (HOST; default 127.0.0.1, use 0.0.0.0 in a container)")
    parser.add_argument("--port", type=int, help="port to bind (PORT; default 8000)")
    parser.add_argument("--fd", type=int, help="serve on this already-bound socket (used by LocalServer)")
    args = parser.parse_args(argv)
    overrides = {name: value for name in ("host", "port") if (value := getattr(args, name)) is not None}
    settings = Settings.load(**overrides)
    options = settings.uvicorn_options()
    if args.fd is None:
        uvicorn.run(create_app(settings), **options)
        return
    # uvicorn's own `fd` option takes the socket for a Unix one, so TCP_NODELAY is never set and
    # Nagle's algorithm stalls replies written in two parts by ~40 ms. A socket object built from
    # the descriptor knows its real family.
    del options["host"], options["port"], options["workers"]
    server = uvicorn.Server(uvicorn.Config(create_app(settings), **options))
    server.run(sockets=[socket.socket(fileno=args.fd)])


app = create_app()

if __name__ == "__main__":
    main()
