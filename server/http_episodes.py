"""Stateful HTTP episodes with owners: `/reset` starts one, `/step`, `/state` and `/grade` continue it.

Stock OpenEnv builds a fresh environment for every HTTP request, so a curl walkthrough (reset, step,
step, state) never sees its own episode. Here each reset keeps its environment under an id the
server draws (unguessable: holding the id is owning the episode), and a request names the episode
by that id. A client-chosen `episode_id` in the reset request names the episode in its state and
metadata only, so it can never take over an episode someone else started.

The store is bounded in idle time, in size (least recently used evicted first), and per client, so
one client's resets evict only its own episodes. The clock is injected (`time.monotonic` by
default), so expiry is tested without waiting.

For code that keeps HTTP episodes (the routes here, MCP's session methods):
    episode_id, observation = store.start(request, client)   # InvalidReset propagates
    env = store.get(episode_id)                              # UnknownEpisode if not (any longer) held
    store.close(episode_id)
`store.latest` is the episode most recently started, for a server that lets requests without an
id continue it (loopback only); a failed start clears it.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict

import msgspec

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import Observation, ResetRequest
from service_incident.wire import clip

from .sessions import Clock, EnvFactory


class UnknownEpisode(LookupError):
    """An episode id that was never issued, or whose episode was evicted, expired or closed."""


def reset(env: ServiceIncidentEnvironment, request: ResetRequest) -> Observation:
    """Start an episode on `env` from a reset request."""
    return env.start(request)


class _Entry:
    __slots__ = ("client", "env", "last_active")

    def __init__(self, env: ServiceIncidentEnvironment, client: str, now: float) -> None:
        self.env = env
        self.client = client
        self.last_active = now


class EpisodeStore:
    def __init__(
        self,
        max_episodes: int,
        max_per_client: int,
        idle_timeout_s: float,
        clock: Clock = time.monotonic,
        new_env: EnvFactory = ServiceIncidentEnvironment,
    ) -> None:
        self.new_env = new_env
        self.max_episodes = max_episodes
        self.max_per_client = max_per_client
        self.idle_timeout_s = idle_timeout_s
        self.clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self.latest: str | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def start(self, request: ResetRequest, client: str) -> tuple[str, Observation]:
        """Start an episode for `client` (an address: the unit of the per-client bound) and keep it.

        Returns its new id. InvalidReset propagates, and then no episode is the latest.
        """
        episode_id = secrets.token_urlsafe(18)
        env = self.new_env()
        try:
            # Without a name of its own, the episode is named by its id.
            observation = reset(env, msgspec.structs.replace(request, episode_id=request.episode_id or episode_id))
        except BaseException:
            self.latest = None
            raise
        own = [key for key, entry in self._entries.items() if entry.client == client]
        for key in own[: max(len(own) - self.max_per_client + 1, 0)]:
            self._drop(key)
        self._entries[episode_id] = _Entry(env, client, self.clock())
        while len(self._entries) > self.max_episodes:
            self._drop(next(iter(self._entries)))
        self.latest = episode_id
        return episode_id, observation

    def get(self, episode_id: str) -> ServiceIncidentEnvironment:
        entry = self._entries.get(episode_id)
        if entry is None:
            raise UnknownEpisode(f"unknown or expired episode id {clip(episode_id, 64)!r}; call /reset to start one")
        entry.last_active = self.clock()
        self._entries.move_to_end(episode_id)
        return entry.env

    def close(self, episode_id: str) -> bool:
        return self._drop(episode_id)

    def expire(self) -> int:
        """Drop the episodes idle past the deadline; how many."""
        deadline = self.clock() - self.idle_timeout_s
        idle = [key for key, entry in self._entries.items() if entry.last_active < deadline]
        for key in idle:
            self._drop(key)
        return len(idle)

    def _drop(self, episode_id: str) -> bool:
        entry = self._entries.pop(episode_id, None)
        if entry is None:
            return False
        entry.env.close()
        if self.latest == episode_id:
            self.latest = None
        return True
