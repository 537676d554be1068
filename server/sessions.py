"""The WebSocket session registry: one environment per socket, a capacity, and an idle deadline.

Stock OpenEnv's reaper frees an idle slot but leaves the socket open against a closed environment;
here the reaper cancels the session's serving scope, and the socket handler closes the socket itself,
so the slot and the socket go together and only the handler ever writes to its socket.
The clock is injected (`time.monotonic` by default), so the reaper is tested without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import anyio

from service_incident.environment import ServiceIncidentEnvironment

Clock = Callable[[], float]
# How the server makes an environment: with its holdout key, if it has one.
EnvFactory = Callable[[], ServiceIncidentEnvironment]


def environments(holdout_key: str | None) -> EnvFactory:
    return partial(ServiceIncidentEnvironment, holdout_key=holdout_key)


class Session:
    """A live socket's environment and the scope that serves it."""

    __slots__ = ("clock", "env", "idle", "last_active", "scope")

    def __init__(self, clock: Clock, env: ServiceIncidentEnvironment) -> None:
        self.env = env
        self.scope = anyio.CancelScope()
        self.clock = clock
        self.last_active = clock()
        self.idle = False

    def touch(self) -> None:
        self.last_active = self.clock()


class SessionRegistry:
    def __init__(
        self,
        capacity: int,
        idle_timeout_s: float,
        clock: Clock = time.monotonic,
        new_env: EnvFactory = ServiceIncidentEnvironment,
    ) -> None:
        self.capacity = capacity
        self.idle_timeout_s = idle_timeout_s
        self.clock = clock
        self.new_env = new_env
        self._sessions: set[Session] = set()

    @property
    def active(self) -> int:
        return len(self._sessions)

    def open(self) -> Session | None:
        """A new session, or None when the server is at capacity."""
        if len(self._sessions) >= self.capacity:
            return None
        session = Session(self.clock, self.new_env())
        self._sessions.add(session)
        return session

    def release(self, session: Session) -> None:
        self._sessions.discard(session)
        session.env.close()

    def reap(self) -> int:
        """Cancel sessions idle past the deadline (their handlers then close the socket and release);
        how many were cancelled."""
        deadline = self.clock() - self.idle_timeout_s
        idle = [s for s in self._sessions if s.last_active < deadline and not s.idle]
        for session in idle:
            session.idle = True
            session.scope.cancel()
        return len(idle)
