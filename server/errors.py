"""HTTP errors, rendered once: starlette's exception handlers turn each failure into its JSON reply.

    ProtocolError (bad body, action, reset or id)  -> 422 {"detail": [{"type", "loc", "msg"}]}
    HTTPException (400, 403, 404, 408, 413, 415)    -> its status, {"detail": "..."}
    a Host this server does not answer to           -> 421, {"detail": "..."}
    UnknownEpisode                                  -> 404 {"detail": "..."}
    AtCapacity                                      -> 429 (the client's bound) or 503 (the server's)
    Diverged                                        -> 409 (stepped by another process meanwhile)
    ClientDisconnect (the client left mid-body)     -> nothing is sent, nothing is logged

The 422 shape is FastAPI's, which stock OpenEnv clients and validators read.
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from service_incident.wire import ErrorDetail, ProtocolError, clip, encode

from .bounded import AtCapacity
from .http_episodes import UnknownEpisode
from .replay import Diverged

JSON = "application/json"


class ValidationFailure(Struct):
    detail: list[ErrorDetail]


class Failure(Struct):
    detail: str


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(encode(body), status, headers, media_type=JSON)


# Refused before its body was read: closing is the only way not to read the rest of it.
_UNREAD_BODY = frozenset({403, 408, 413, 415, 421})


def failure(status: int, detail: str) -> Response:
    headers = {"Connection": "close"} if status in _UNREAD_BODY else None
    return json_response(Failure(clip(detail)), status, headers)


async def _unprocessable(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProtocolError)
    return json_response(ValidationFailure(exc.errors or []), 422)


async def _http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return failure(exc.status_code, exc.detail)


async def _unknown(request: Request, exc: Exception) -> Response:
    return failure(404, str(exc))


async def _full(request: Request, exc: Exception) -> Response:
    # Whose bound is full decides the status: the client's own (429) or the server's (503).
    assert isinstance(exc, AtCapacity)
    return failure(429 if exc.whose == "owner" else 503, str(exc))


async def _diverged(request: Request, exc: Exception) -> Response:
    return failure(409, str(exc))


async def _gone(request: Request, exc: Exception) -> Response:
    # Nobody is listening for the reply: an empty one is dropped by the server, and no traceback.
    return Response(status_code=400)


EXCEPTION_HANDLERS = {
    ProtocolError: _unprocessable,
    HTTPException: _http,
    UnknownEpisode: _unknown,
    AtCapacity: _full,
    Diverged: _diverged,
    ClientDisconnect: _gone,
}
