"""Where the evaluation plays: a small session protocol and its two implementations.

A `Session` is one environment session (reset, then steps) and `Sessions` opens one per episode,
the way an HTTP client runs over either a network or an in-process ASGI transport:

- `InProcess()` plays `ServiceIncidentEnvironment` in this process: no server, no sockets;
- `WebSocket(base_url)` plays over the WebSocket client against a running server, and
  `WebSocket.embedded()` starts one on a free local port for as long as it is used
  (`over_websocket(base_url_or_None)` picks between the two).

Both give the same observations for the same task, seed and actions. The client is imported when a
WebSocket session is asked for: an in-process evaluation loads neither it nor websockets. A step
whose reply did not come in time is not the episode's end: the WebSocket session resumes the
episode from the server's log (at most MAX_RESUMES times an episode) and counts it in `resumes`. A
session's `resumes` counts every time its episode was carried on, the client's own resumes (a lost
connection, a server going away) included: the evaluation keeps it in the episode's record.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Protocol

import msgspec

from ..environment import ServiceIncidentEnvironment
from ..models import Action, Observation, ResetRequest

if TYPE_CHECKING:
    from service_incident.client import ServiceIncidentEnv


class Session(Protocol):
    """One environment session. One that can lose its episode and carry it on also counts `resumes`
    (an int attribute), which the evaluation keeps in the episode's record; one without has none."""

    async def reset(self, request: ResetRequest) -> Observation: ...

    async def step(self, action: Action) -> Observation: ...


class Sessions(Protocol):
    """Opens a session per episode. `where` names the environment in messages."""

    @property
    def where(self) -> str: ...

    def open(self) -> AbstractAsyncContextManager[Session]: ...


class _InProcessSession:
    def __init__(self, env: ServiceIncidentEnvironment) -> None:
        self._env = env

    async def reset(self, request: ResetRequest) -> Observation:
        observation = self._env.start(request)
        # The environment never waits; a checkpoint lets concurrent episodes (and model calls) take turns.
        await asyncio.sleep(0)
        return observation

    async def step(self, action: Action) -> Observation:
        observation = self._env.step(action)
        await asyncio.sleep(0)
        return observation


class InProcess:
    """Episodes on the environment itself, in this process (offering the held-out tasks with a key)."""

    where = "the in-process environment"

    def __init__(self, holdout_key: str | None = None) -> None:
        self.holdout_key = holdout_key

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Session]:
        yield _InProcessSession(ServiceIncidentEnvironment(self.holdout_key))


# Resumes one episode may take: a server that keeps missing the message timeout fails the episode.
MAX_RESUMES = 3


class _WebSocketSession:
    def __init__(self, env: ServiceIncidentEnv, sessions: WebSocket) -> None:
        self._env = env
        self._sessions = sessions
        self._resumes = 0  # those made here, after a reply that did not come in time

    @property
    def resumes(self) -> int:
        """All of them: the client's own (a lost connection, a server going away) and those made here."""
        return self._env.resumes

    async def reset(self, request: ResetRequest) -> Observation:
        return (await self._env.reset(**msgspec.structs.asdict(request))).observation

    async def step(self, action: Action) -> Observation:
        from service_incident.client import Desynchronised, NoReply

        while True:
            try:
                return (await self._env.step(action)).observation
            except (NoReply, Desynchronised):
                if self._resumes >= MAX_RESUMES:
                    raise
            # The log says whether the server took the step whose reply was lost: if so, the resume
            # answers it; if not, it is sent again. EpisodeLost (the log is gone) propagates.
            answered = self._env.steps
            result = await self._env.resume()
            self._resumes += 1
            self._sessions.resumes += 1
            if self._env.steps > answered:
                return result.observation


class WebSocket:
    """Episodes over the WebSocket client, a session each, against the server at `base_url`: or
    spread in turn across several, comma-separated (servers sharing an episode store, or not)."""

    def __init__(self, base_url: str, message_timeout_s: float | None = None) -> None:
        self.base_url = base_url
        self.base_urls = [url.strip() for url in base_url.split(",") if url.strip()]
        self._turn = itertools.cycle(self.base_urls)
        # The client's own default unless given: how long a step's reply may take before a resume.
        self._options = {} if message_timeout_s is None else {"message_timeout_s": message_timeout_s}
        self.resumes = 0  # episodes' sessions resumed after a reply that did not come in time

    @property
    def where(self) -> str:
        return self.base_url

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Session]:
        from service_incident.client import ServiceIncidentEnv

        async with ServiceIncidentEnv(next(self._turn), **self._options) as env:
            yield _WebSocketSession(env, self)

    @classmethod
    @asynccontextmanager
    async def embedded(cls) -> AsyncIterator[WebSocket]:
        """A server of our own on a free local port, stopped when the block ends (interrupted too)."""
        import anyio

        from service_incident.client import LocalServer

        local = LocalServer()
        try:
            yield cls(await anyio.to_thread.run_sync(local.start))
        finally:
            with anyio.CancelScope(shield=True):  # no server process left behind
                await anyio.to_thread.run_sync(local.stop)


@asynccontextmanager
async def over_websocket(base_url: str | None) -> AsyncIterator[WebSocket]:
    """WebSocket sessions against `base_url`, or against an embedded server (None) while the block runs."""
    if base_url is not None:
        yield WebSocket(base_url)
        return
    async with WebSocket.embedded() as embedded:
        yield embedded
