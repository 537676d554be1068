"""`/ws`: one environment per socket, frames answered strictly in order, steps run on the event loop.

A step is a short CPU-bound call (well under a millisecond), so it is called directly: a thread hop per
step (stock OpenEnv's per-session executor) costs about as much as the step and, under the GIL, buys
no parallelism. What it does need is a yield to the event loop after every frame: frames a client
pipelines are already queued, so without one a session would answer thousands of them in a row
while every other session and HTTP request waited (fairness.py: busy sessions take turns).
Bad frames get an error frame and the session goes on, except the few that stock OpenEnv treats as
fatal (FATAL_CODES), which close the socket after it.
"""

from __future__ import annotations

import contextlib
import logging

import anyio
from starlette.websockets import WebSocket, WebSocketDisconnect

from service_incident import wire
from service_incident.models import parse_action
from service_incident.wire import ErrorCode, ProtocolError, core_error

from . import mcp
from .fairness import FairTurns, backlog
from .guard import OriginPolicy
from .http_episodes import reset
from .sessions import Session, SessionRegistry

log = logging.getLogger(__name__)

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001  # sent when a session was idle too long
# A peer that stopped reading can block the close frame forever; the handler must still return.
CLOSE_SEND_TIMEOUT_S = 2.0
_BINARY = ProtocolError(ErrorCode.SESSION_ERROR, "Binary frames are not supported: send JSON text frames")


class SessionEndpoint:
    def __init__(self, registry: SessionRegistry, origins: OriginPolicy) -> None:
        self.registry = registry
        self.origins = origins
        self.turns = FairTurns()

    async def serve(self, websocket: WebSocket) -> None:
        if not self.origins.allows(websocket.headers):
            await websocket.close()  # before the handshake: the browser sees a 403
            return
        # Accept before refusing, as stock OpenEnv does: its clients read the reason from an error frame.
        await websocket.accept()
        session = self.registry.open()
        if session is None:
            registry = self.registry
            with contextlib.suppress(WebSocketDisconnect):
                await websocket.send_text(wire.capacity_text(registry.active, registry.capacity))
            await _close(websocket, CLOSE_NORMAL, "")
            return
        try:
            closing = None
            # WebSocketDisconnect: the peer left while a reply was on its way; nobody to tell.
            with session.scope, contextlib.suppress(WebSocketDisconnect):
                closing = await self._converse(websocket, session)
            if session.scope.cancelled_caught:
                closing = (CLOSE_GOING_AWAY, f"session idle for more than {self.registry.idle_timeout_s:g} s")
            if closing is not None:
                await _close(websocket, *closing)
        finally:
            self.registry.release(session)

    async def _converse(self, websocket: WebSocket, session: Session) -> tuple[int, str] | None:
        """Answer frames until the peer leaves (None) or the server must close (code, reason)."""
        queued = backlog(websocket.scope)
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return None
            session.touch()
            text = message.get("text")
            if text is None:
                await websocket.send_text(wire.error_text(_BINARY))
                return CLOSE_NORMAL, ""
            try:
                reply = answer(session, text)
            except ProtocolError as error:
                reply = wire.error_text(error)
                if error.fatal:
                    await websocket.send_text(reply)
                    return CLOSE_NORMAL, ""
            if reply is None:
                return CLOSE_NORMAL, ""
            await websocket.send_text(reply)
            await self.turns.after_frame(queued() if queued else 0)


def answer(session: Session, text: str) -> str | None:
    """The reply frame to one client frame; None for `close`, which gets no reply."""
    message = wire.decode_message(text)
    env = session.env
    try:
        match message:
            case wire.StepMessage(data=data):
                return wire.observation_text(env.step(parse_action(bytes(data))))
            case wire.ResetMessage(data=request):
                return wire.observation_text(reset(env, request))
            case wire.StateMessage():
                return wire.state_text(env.state)
            case wire.McpMessage(data=request):
                return wire.mcp_text(mcp.handle(request, lambda _session_id: env))
            case wire.CloseMessage():
                return None
    except Exception as exc:
        error = core_error(exc)
        if error is not None:
            raise error from None
        # The exception text could carry environment internals; the client gets its type only.
        log.exception("environment failed on a %s message", type(message).__name__)
        raise ProtocolError(ErrorCode.EXECUTION_ERROR, f"{type(exc).__name__} in the environment") from None


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    try:
        with anyio.move_on_after(CLOSE_SEND_TIMEOUT_S):
            await websocket.close(code, reason)
    except (WebSocketDisconnect, RuntimeError):
        pass  # the peer is already gone: nothing left to close
