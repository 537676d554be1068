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
from .bounded import AtCapacity
from .fairness import FairTurns, backlog
from .guard import OriginPolicy
from .replay import Replayer, UnknownEpisode
from .sessions import Session, SessionRegistry

log = logging.getLogger(__name__)

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001  # sent when a session was idle too long, or the server is shutting down
DRAINING = "server shutting down: resume the episode on another"
DRAIN_S = 5.0
# A peer that stopped reading can block the close frame forever; the handler must still return.
CLOSE_SEND_TIMEOUT_S = 2.0
_BINARY = ProtocolError(ErrorCode.SESSION_ERROR, "Binary frames are not supported: send JSON text frames")


class SessionEndpoint:
    def __init__(self, registry: SessionRegistry, origins: OriginPolicy, replayer: Replayer) -> None:
        self.registry = registry
        self.origins = origins
        self.replayer = replayer
        self.turns = FairTurns()
        self.draining = False

    async def drain(self, within_s: float = DRAIN_S) -> None:
        """Stop admitting sessions and close every one with 1001 once its frame in flight is answered,
        so that clients resume elsewhere (their episodes are in the log); waits at most `within_s`."""
        self.draining = True
        self.registry.close_all()
        with anyio.move_on_after(within_s):
            while self.registry.active:
                await anyio.sleep(0.01)

    async def serve(self, websocket: WebSocket) -> None:
        if not self.origins.allows(websocket.headers):
            await websocket.close()  # before the handshake: the browser sees a 403
            return
        # Accept before refusing, as stock OpenEnv does: its clients read the reason from an error frame.
        await websocket.accept()
        owner = websocket.client.host if websocket.client else ""
        if self.draining:
            await _close(websocket, CLOSE_GOING_AWAY, DRAINING)  # the client resumes on another process
            return
        session = self.registry.open(owner)
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
            if session.stopped:  # its scope is cancelled only once it is stopped (`Session.stop`)
                idle = f"session idle for more than {self.registry.idle_timeout_s:g} s"
                closing = (CLOSE_GOING_AWAY, DRAINING if self.draining else idle)
            if closing is not None:
                await _close(websocket, *closing)
        finally:
            self.registry.release(session)

    async def _converse(self, websocket: WebSocket, session: Session) -> tuple[int, str] | None:
        """Answer frames until the peer leaves (None) or the server must close (code, reason)."""
        queued = backlog(websocket.scope)
        frames = wire.FrameEncoder()  # the socket's frames, each sent once: one encoder keeps their views
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect" or session.stopped:
                # Stopped as the frame came in, before it was begun: left unanswered, as one a moment later.
                return None
            self.registry.touch(session)
            text = message.get("text")
            if text is None:
                await websocket.send_text(wire.error_text(_BINARY))
                return CLOSE_NORMAL, ""
            # A frame begun is finished and answered, even while the server drains: a session stopped
            # meanwhile is cancelled once its reply is sent (`Session.stop`). A shielding cancel scope
            # per frame would do the same at some microseconds a frame.
            session.answering = True
            try:
                reply = await self.answer(session, text, frames)
            except ProtocolError as error:
                reply = wire.error_text(error)
                if error.fatal:
                    await websocket.send_text(reply)
                    return CLOSE_NORMAL, ""
            if reply is None:
                return CLOSE_NORMAL, ""
            await websocket.send_text(reply)
            session.answering = False
            if session.stopped:
                session.scope.cancel()  # the next wait is cancelled: the handler closes the socket
            await self.turns.after_frame(queued() if queued else 0)

    async def answer(  # noqa: C901 (one case per frame type)
        self, session: Session, text: str, frames: wire.FrameEncoder
    ) -> str | None:
        """The reply frame to one client frame, observations encoded by the socket's `frames`; None for
        `close`, which gets no reply.

        A reset or step is saved in the episode log before its reply is sent, so whatever a client
        has seen can be resumed on another socket, in this process or any other sharing the store.
        """
        message = wire.decode_message(text)
        try:
            match message:
                case wire.StepMessage(data=data):
                    action = parse_action(bytes(data))
                    if session.episode is None:
                        return frames.observation_text(session.env.step(action))
                    observation = session.episode.step(action)
                    await self.replayer.save(session.episode)
                    return frames.observation_text(observation)
                case wire.ResetMessage(data=request):
                    previous = session.episode
                    reset = await self.replayer.ready(request)
                    episode_id, session.episode, observation = self.replayer.begin(reset, session.owner, session.env)
                    if previous is not None:
                        await self.replayer.drop(previous)
                    await self.replayer.save(session.episode)
                    return frames.reset_text(observation, episode_id)
                case wire.ResumeMessage(data=resume):
                    return await self._resume(session, resume, frames)
                case wire.StateMessage():
                    return wire.state_text(session.env.state)
                case wire.McpMessage(data=request):
                    reply = wire.mcp_text(mcp.handle(request, lambda _session_id: session.episode or session.env))
                    if session.episode is not None:
                        await self.replayer.save(session.episode)
                    return reply
                case wire.CloseMessage():
                    if session.episode is not None:
                        await self.replayer.drop(session.episode)
                    return None
        except UnknownEpisode as exc:
            raise ProtocolError(ErrorCode.UNKNOWN_EPISODE, str(exc)) from None
        except AtCapacity as exc:  # the episode log is full of other clients' live episodes
            raise ProtocolError(ErrorCode.CAPACITY_REACHED, str(exc)) from None
        except Exception as exc:
            error = core_error(exc)
            if error is not None:
                raise error from None
            # The exception text could carry environment internals; the client gets its type only.
            log.exception("environment failed on a %s message", type(message).__name__)
            raise ProtocolError(ErrorCode.EXECUTION_ERROR, f"{type(exc).__name__} in the environment") from None

    async def _resume(self, session: Session, resume: wire.Resume, frames: wire.FrameEncoder) -> str:
        episode = await self.replayer.restore(resume.episode_id, session.owner)
        # The log holds every step the client saw answered, and at most the one whose reply it lost.
        if not resume.steps <= episode.logged <= resume.steps + 1:
            raise UnknownEpisode(
                f"the episode has taken {episode.logged} steps, not {resume.steps}: reset to start over"
            )
        assert episode.last is not None
        session.env.close()
        session.env, session.episode = episode.env, episode
        return frames.resumed_text(episode.last, episode.logged)


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    try:
        with anyio.move_on_after(CLOSE_SEND_TIMEOUT_S):
            await websocket.close(code, reason)
    except (WebSocketDisconnect, RuntimeError):
        pass  # the peer is already gone: nothing left to close
