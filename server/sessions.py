"""The WebSocket session registry: one environment per socket, a capacity, and an idle deadline.

Stock OpenEnv's reaper frees an idle slot but leaves the socket open against a closed environment;
here the reaper cancels the session's serving scope, and the socket handler closes the socket itself,
so the slot and the socket go together and only the handler ever writes to its socket.
The clock is injected (`time.monotonic` by default), so the reaper is tested without waiting.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import anyio

from service_incident.environment import ServiceIncidentEnvironment

from .bounded import AtCapacity, BoundedStore, Clock

if TYPE_CHECKING:
    from .replay import Episode

# How the server makes an environment: with its holdout key, if it has one.
EnvFactory = Callable[[], ServiceIncidentEnvironment]


def environments(holdout_key: str | None) -> EnvFactory:
    return partial(ServiceIncidentEnvironment, holdout_key=holdout_key)


class Session:
    """A live socket's environment and the scope that serves it."""

    __slots__ = ("answering", "env", "episode", "idle", "key", "owner", "scope", "stopped")

    def __init__(self, env: ServiceIncidentEnvironment, key: str, owner: str = "") -> None:
        self.env = env
        # The episode being played, logged so that it can be resumed (replay.py); None before a reset.
        self.episode: Episode | None = None
        self.key = key
        self.owner = owner
        self.scope = anyio.CancelScope()
        self.idle = False
        # A frame is being answered: a stop then waits until its reply is sent (`stop`).
        self.answering = False
        self.stopped = False

    def stop(self) -> None:
        """End the session's conversation: at once while it waits for a frame, after its reply while it
        answers one (a frame begun is finished and answered; the handler cancels its scope then)."""
        self.stopped = True
        if not self.answering:
            self.scope.cancel()


class SessionRegistry:
    """The live sockets' sessions, bounded like every store of the server (bounded.py): at capacity a
    newcomer is refused, except that a session idle past the deadline makes way for it."""

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
        self._sessions: BoundedStore[Session] = BoundedStore(
            capacity=capacity,
            per_owner=capacity,
            idle_timeout_s=idle_timeout_s,
            live_s=idle_timeout_s,
            what="sessions",
            clock=clock,
            on_drop=_going_idle,
            evict_own=False,
        )
        self._opened = itertools.count()

    @property
    def active(self) -> int:
        return len(self._sessions)

    def open(self, owner: str = "") -> Session | None:
        """A new session, or None when the server is at capacity."""
        try:
            self._sessions.make_room(owner)
        except AtCapacity:
            return None
        session = Session(self.new_env(), str(next(self._opened)), owner)
        self._sessions.add(session.key, session, owner)
        return session

    def touch(self, session: Session) -> None:
        self._sessions.touch(session.key)

    def release(self, session: Session) -> None:
        self._sessions.pop(session.key)
        session.env.close()

    def close_all(self) -> None:
        """Cancel every session (the server is shutting down); their handlers close and release them."""
        for session in list(self._sessions.values()):
            session.stop()

    def reap(self) -> int:
        """Cancel sessions idle past the deadline (their handlers then close the socket and release);
        how many were cancelled."""
        return self._sessions.expire()


def _going_idle(session: Session) -> None:
    # Its handler closes the socket with 1001 and releases the environment.
    session.idle = True
    session.stop()
