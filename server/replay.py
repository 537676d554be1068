"""Durable episodes: a live environment and its log, rebuilt in any process by replaying the log.

An episode is born in `begin` (the reset), grows by `Episode.step`, and is written by `save`, which
callers await before they answer: an observation a client has seen is always in the log, so a
client that lost its connection (or whose process died) can name its episode anywhere and carry on.

* The episode id is the credential: drawn here, 144 random bits, never stored. The log is keyed by
  its digest (`log_key`), so reading the store gives nobody an episode to resume.
* A request without a seed gets one drawn here rather than in the environment, so the log replays
  it; the environment still treats it as drawn and withholds it until the end. For a held-out task
  the seed is the incident's index; the log holds that and the key's fingerprint, never the
  generator seed, and a process with another key refuses to replay it.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import uuid

import msgspec
from msgspec import Struct

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.holdout import fingerprint
from service_incident.models import Action, Observation, ResetRequest, State, parse_action
from service_incident.tasks import HELD_OUT
from service_incident.wire import FrameEncoder, clip

from .episode_log import EpisodeLog, Logged
from .generation import Generation, Reset, reset_arguments
from .sessions import EnvFactory

EPISODE_ID_BYTES = 18


class UnknownEpisode(LookupError):
    """An episode id that was never issued, or whose episode was evicted, expired or closed."""


class Diverged(RuntimeError):
    """The log holds steps this process did not take: the episode was played elsewhere meanwhile."""


class LogHead(Struct, frozen=True, forbid_unknown_fields=True):
    """The first entry of an episode's log: how it was reset."""

    # Its episode_id filled in; its seed as the client gave it (None: drawn, below).
    request: ResetRequest
    drawn_seed: int | None = None
    # The fingerprint of the key a held-out incident derives from.
    holdout: str | None = None


_encode = msgspec.json.Encoder().encode
_head_decoder = msgspec.json.Decoder(LogHead)


def log_key(episode_id: str) -> str:
    return hashlib.sha256(episode_id.encode()).hexdigest()[:32]


def unknown(episode_id: str) -> UnknownEpisode:
    return UnknownEpisode(f"unknown or expired episode id {clip(episode_id, 64)!r}; reset to start one")


class Episode:
    """A live environment, what its log holds (`logged` actions) and what it does not yet (`unsaved`)."""

    __slots__ = ("env", "frames", "head", "key", "last", "lock", "logged", "owner", "saved_head", "unsaved")

    def __init__(self, env: ServiceIncidentEnvironment, key: str, owner: str, head: bytes) -> None:
        self.env = env
        self.key = key
        self.owner = owner
        self.head = head
        self.saved_head = False
        self.logged = 0
        self.unsaved: list[bytes] = []
        self.last: Observation | None = None
        # Two requests may step one HTTP episode at once; their saves must not interleave.
        self.lock = asyncio.Lock()
        # Its HTTP replies' (a WebSocket encodes with the socket's own, which outlives an episode).
        self.frames = FrameEncoder()

    @property
    def steps(self) -> int:
        """Actions taken, saved or not."""
        return self.logged + len(self.unsaved)

    @property
    def state(self) -> State:
        return self.env.state

    def grade(self) -> tuple[float | None, dict[str, float] | None]:
        return self.env.grade()

    def step(self, action: Action) -> Observation:
        observation = self.last = self.env.step(action)
        self.unsaved.append(_encode(action))
        return observation


class Replayer:
    def __init__(
        self, log: EpisodeLog, new_env: EnvFactory, holdout_key: str | None, generation: Generation | None = None
    ) -> None:
        self.log = log
        self.new_env = new_env
        self.holdout = fingerprint(holdout_key) if holdout_key is not None else None
        self.generation = generation or Generation(0, holdout_key)

    async def ready(self, request: ResetRequest) -> Reset:
        """The reset made ready by the generation pool: `begin` then only starts it."""
        return await self.generation.ready(request)

    def begin(
        self,
        reset: Reset,
        owner: str,
        env: ServiceIncidentEnvironment | None = None,
        *,
        named_by_id: bool = False,
    ) -> tuple[str, Episode, Observation]:
        """Reset an environment (a new one unless given) into a new episode; `save` writes it.

        Its name (`episode_id` in state and metadata) is the client's, else the id itself if
        `named_by_id`, else a fresh uuid as the environment would draw. InvalidReset propagates.
        """
        episode_id = secrets.token_urlsafe(EPISODE_ID_BYTES)
        env = env or self.new_env()
        request, drawn = reset
        name = request.episode_id or (episode_id if named_by_id else str(uuid.uuid4()))
        request = msgspec.structs.replace(request, episode_id=name)
        observation = env.reset(**reset_arguments(env, reset._replace(request=request)))
        held_out = (env.state.task_id or "") in HELD_OUT
        head = LogHead(request, drawn, self.holdout if held_out else None)
        episode = Episode(env, log_key(episode_id), owner, _encode(head))
        episode.last = observation
        return episode_id, episode, observation

    async def save(self, episode: Episode) -> None:
        """Write what the log lacks; raises Diverged if another process stepped the episode meanwhile."""
        async with episode.lock:
            if not episode.saved_head:
                await self.log.create(episode.key, episode.head, episode.owner)
                episode.saved_head = True
            batch, episode.unsaved = episode.unsaved, []
            if batch and not await self.log.append(episode.key, episode.logged, batch):
                raise Diverged("the episode was stepped elsewhere meanwhile: resume it to continue")
            episode.logged += len(batch)

    async def restore(self, episode_id: str, owner: str) -> Episode:
        """The episode rebuilt from its log; UnknownEpisode if the store no longer has it."""
        key = log_key(episode_id)
        logged = await self.log.load(key)
        if logged is None:
            raise unknown(episode_id)
        head = _head_decoder.decode(logged.head)
        if head.holdout is not None and head.holdout != self.holdout:
            raise UnknownEpisode(f"episode {clip(episode_id, 64)!r} was played with another holdout key")
        await self.generation.draw(head.request, head.drawn_seed)
        return self._replay(key, owner, logged, head)

    async def catch_up(self, episode: Episode, episode_id: str) -> None:
        """Bring a cached episode up to its log (another process may have stepped it)."""
        length = await self.log.length(episode.key)
        if length is None:
            raise unknown(episode_id)
        if length > episode.logged:
            logged = await self.log.load(episode.key)
            if logged is None:
                raise unknown(episode_id)
            for action in logged.actions[episode.logged :]:
                episode.last = episode.env.step(parse_action(action))
            episode.logged = len(logged.actions)

    async def drop(self, episode: Episode) -> None:
        if episode.saved_head:
            await self.log.drop(episode.key)

    def _replay(self, key: str, owner: str, logged: Logged, head: LogHead) -> Episode:
        env = self.new_env()
        last = env.reset(**reset_arguments(env, Reset(head.request, head.drawn_seed)))
        for action in logged.actions:
            last = env.step(parse_action(action))
        episode = Episode(env, key, owner, logged.head)
        episode.saved_head = True
        episode.logged = len(logged.actions)
        episode.last = last
        return episode
