"""Stateful HTTP episodes: `/reset` starts one, `/step` and `/state` continue it.

Stock OpenEnv builds a fresh environment for every HTTP request, so a curl walkthrough (reset, step,
step, state) never sees its own episode. Here each reset keeps its environment under its episode id;
a request names the episode (header, body or query) or falls back to the most recent one. The store
is bounded in size (least recently used evicted first) and in idle time.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict

import msgspec

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import Observation, ResetRequest


class UnknownEpisode(LookupError):
    """An episode id that was never issued, or whose episode was evicted or expired."""


class _Entry:
    __slots__ = ("env", "last_active")

    def __init__(self, env: ServiceIncidentEnvironment) -> None:
        self.env = env
        self.last_active = time.monotonic()


class EpisodeStore:
    def __init__(self, max_episodes: int, idle_timeout_s: float) -> None:
        self.max_episodes = max_episodes
        self.idle_timeout_s = idle_timeout_s
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._latest: str | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def reset(self, request: ResetRequest) -> tuple[str, Observation]:
        """Start an episode (InvalidReset propagates) and keep it; an existing id is restarted."""
        episode_id = request.episode_id or str(uuid.uuid4())
        env = ServiceIncidentEnvironment()
        observation = env.reset(**msgspec.structs.asdict(msgspec.structs.replace(request, episode_id=episode_id)))
        self._drop(episode_id)
        self._entries[episode_id] = _Entry(env)
        self._latest = episode_id
        while len(self._entries) > self.max_episodes:
            self._drop(next(iter(self._entries)))
        return episode_id, observation

    def get(self, episode_id: str | None) -> tuple[str | None, ServiceIncidentEnvironment]:
        """The named episode, else the most recent one, else a fresh environment that is not kept.

        A fresh environment answers like any environment before its first reset, which is what a
        stock OpenEnv server does for every HTTP request.
        """
        key = episode_id or self._latest
        if key is None:
            return None, ServiceIncidentEnvironment()
        entry = self._entries.get(key)
        if entry is None:
            raise UnknownEpisode(f"unknown or expired episode id {key!r}; call /reset to start one")
        entry.last_active = time.monotonic()
        self._entries.move_to_end(key)
        return key, entry.env

    def close(self, episode_id: str) -> bool:
        return self._drop(episode_id)

    def expire(self, now: float) -> None:
        deadline = now - self.idle_timeout_s
        for key in [k for k, e in self._entries.items() if e.last_active < deadline]:
            self._drop(key)

    def _drop(self, episode_id: str) -> bool:
        entry = self._entries.pop(episode_id, None)
        if entry is None:
            return False
        entry.env.close()
        if self._latest == episode_id:
            self._latest = None
        return True
