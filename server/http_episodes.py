"""Stateful HTTP episodes with owners: `/reset` starts one, `/step`, `/state` and `/grade` continue it.

Stock OpenEnv builds a fresh environment for every HTTP request, so a curl walkthrough (reset, step,
step, state) never sees its own episode. Here each reset keeps its environment under an id the
server draws (unguessable: holding the id is owning the episode), and a request names the episode
by that id. A client-chosen `episode_id` in the reset request names the episode in its state and
metadata only, so it can never take over an episode someone else started.

Every episode is logged (replay.py), so a request may reach any process sharing the store: the
episode is cached where it lives and replayed where it does not. A step of an episode held here
reads nothing from the store: its save writes only where the log ends where this copy's does, so a
copy left behind (another process stepped the episode meanwhile) learns so from its write, is
replaced by the episode taken over from its log, and takes the step there. A request that writes
nothing (state, grade, MCP's calls) checks a held copy against the log's length first. The cache is
bounded like every store (bounded.py): in idle time, per client (its resets past the bound evict
its own oldest) and in size (an idle episode makes way, a live one of another client never does:
the reset is refused with 503 saying whose bound is full).

For code that keeps HTTP episodes (the routes here, MCP's session methods):
    episode_id, observation = await store.start(request, client)   # InvalidReset propagates
    episode = await store.get(episode_id, client)                 # UnknownEpisode if not (any longer) held
    observation = episode.step(action); await store.save(episode_id, episode)
    # or, for a step alone, without reading the store beforehand:
    episode = await store.get(episode_id, client, stepping=True)
    observation = await store.step(episode_id, episode, action)
    await store.close(episode_id)
`store.latest` is the episode most recently started here, for a server that lets requests without
an id continue it (loopback only); a failed start clears it.
"""

from __future__ import annotations

import time

from service_incident.models import Action, Observation, ResetRequest

from .bounded import BoundedStore, Clock
from .episode_log import MemoryLog
from .replay import Diverged, Episode, Replayer, UnknownEpisode, log_key

__all__ = ["EpisodeStore", "UnknownEpisode"]


class EpisodeStore:
    def __init__(
        self,
        replayer: Replayer,
        max_episodes: int,
        max_per_client: int,
        idle_timeout_s: float,
        live_s: float,
        clock: Clock = time.monotonic,
    ) -> None:
        self.replayer = replayer
        # Only a shared log can hold steps this process did not take.
        self.shared = not isinstance(replayer.log, MemoryLog)
        self._evicted: list[Episode] = []
        self._cache: BoundedStore[Episode] = BoundedStore(
            capacity=max_episodes,
            per_owner=max_per_client,
            idle_timeout_s=idle_timeout_s,
            live_s=live_s,
            what="HTTP episodes",
            clock=clock,
            on_drop=self._evicted.append,
        )
        self.latest: str | None = None

    def __len__(self) -> int:
        return len(self._cache)

    async def start(self, request: ResetRequest, client: str) -> tuple[str, Observation]:
        """Start an episode for `client` (an address: the unit of the per-client bound) and keep it.

        Returns its new id. InvalidReset and AtCapacity propagate, and then no episode is the latest.
        """
        try:
            reset = await self.replayer.ready(request)
            self._cache.make_room(client)
            episode_id, episode, observation = self.replayer.begin(reset, client, named_by_id=True)
        except BaseException:
            self.latest = None
            await self._drop_evicted()
            raise
        self._cache.add(episode.key, episode, client)
        await self._drop_evicted()
        await self.replayer.save(episode)
        self.latest = episode_id
        return episode_id, observation

    async def get(self, episode_id: str, client: str, *, stepping: bool = False) -> Episode:
        """The episode, held here or taken over from the log; UnknownEpisode if the store has it no more.

        A copy held here is checked against a shared log, unless the request only `step`s it.
        """
        key = log_key(episode_id)
        episode = self._cache.get(key)
        if episode is None:
            episode = await self.replayer.restore(episode_id, client)
            if key not in self._cache:  # another request may have restored it meanwhile
                self._cache.make_room(client)
                self._cache.add(key, episode, client)
                self._note_if_over(episode)
                await self._drop_evicted()
            return self._cache.get(key) or episode
        if self.shared and not stepping:
            await self.replayer.catch_up(episode, episode_id)
            self._note_if_over(episode)
        return episode

    async def step(self, episode_id: str, episode: Episode, action: Action) -> Observation:
        """Take `action` and save it. A copy another process has stepped past is dropped when its save
        finds the log longer, and the step is taken on the episode taken over from the log instead;
        Diverged only if yet another step lands elsewhere in between."""
        observation = episode.step(action)
        try:
            await self.save(episode_id, episode)
        except Diverged:
            episode = await self.get(episode_id, episode.owner)
            observation = episode.step(action)
            await self.save(episode_id, episode)
        return observation

    async def save(self, episode_id: str, episode: Episode) -> None:
        self._note_if_over(episode)
        try:
            await self.replayer.save(episode)
        except Diverged:
            self._forget(episode)
            raise

    async def close(self, episode_id: str) -> bool:
        key = log_key(episode_id)
        held = key in self._cache
        self._cache.pop(key)
        await self._drop_evicted()
        if self.latest == episode_id:
            self.latest = None
        return held

    async def expire(self) -> int:
        """Drop the episodes idle past the deadline; how many. A shared log keeps them: another process
        may be playing one, and the log expires them on its own clock."""
        count = self._cache.expire()
        if self.shared:
            self._forget_evicted()
        else:
            await self._drop_evicted()
        return count

    def _note_if_over(self, episode: Episode) -> None:
        """An episode over makes way for a newcomer whenever it was last used: the cache learns it ended
        from whoever ended it (a step, saved next; a replay) rather than asking every episode it holds."""
        if episode.state.done and self._cache.peek(episode.key) is episode:
            self._cache.finish(episode.key)

    def _forget(self, episode: Episode) -> None:
        """Drop a copy left behind; not the copy that may have replaced it meanwhile."""
        if self._cache.peek(episode.key) is episode:
            self._cache.pop(episode.key)
        self._forget_evicted()

    def _forget_evicted(self) -> None:
        for episode in self._evicted:
            episode.env.close()
        self._evicted.clear()

    async def _drop_evicted(self) -> None:
        evicted, self._evicted[:] = list(self._evicted), []
        for episode in evicted:
            episode.env.close()
            await self.replayer.drop(episode)
        if self.latest is not None and log_key(self.latest) not in self._cache:
            self.latest = None
