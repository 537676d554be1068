"""Evaluate any agent on the benchmark: episodes run concurrently over the real WebSocket client.

    from service_incident.harness.evaluation import evaluate, plan
    from service_incident.tasks import TASKS

    async def my_policy(observation):                  # any async callable: observation -> Action
        return Declare(target=observation.services[0], severity="P1")

    records = await evaluate(lambda spec: my_policy, plan(TASKS.values()))

`evaluate` takes a policy *factory*, called once per episode, so a policy can keep per-episode
state (a chat history); a stateless one is `lambda spec: policy`. A policy returns an `Action`, or a
`Turn` when it has more to say: the tokens it spent, or why its reply could not become an action.
Without `base_url` an embedded server is started on a free local port. Each finished episode is an
`EpisodeRecord`, which `transcript` turns into OpenEnv's [START] / [STEP] / [END] lines.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
from msgspec import Struct

from service_incident.client import LocalServer, ServiceIncidentEnv

from ..models import Action, Observation, action_name
from ..scoring import SCORE_FLOOR
from ..tasks import Task
from .agents import REFERENCE_AGENTS, Agent

BENCHMARK = "service_incident"
SUCCESS_SCORE = 0.5
# A policy whose replies cannot be used this many times in a row is given up on: it would
# otherwise spend model calls forever without the episode moving.
MAX_UNUSABLE_REPLIES = 3
DEFAULT_CONCURRENCY = 8


class EpisodeSpec(Struct, frozen=True, kw_only=True):
    """One episode to play: a task's evaluation incident under a seed. `name` is unique within a run."""

    name: str
    task_id: str
    incident_id: str
    seed: int


class Turn(Struct, kw_only=True):
    """A policy's answer to one observation: an action, or why there is none."""

    action: Action | None
    error: str | None = None
    reply: str | None = None  # the raw model output, kept for the record
    prompt_tokens: int = 0
    completion_tokens: int = 0


Policy = Callable[[Observation], Awaitable[Action | Turn]]
PolicyFactory = Callable[[EpisodeSpec], Policy]


class StepRecord(Struct, kw_only=True):
    """One [STEP]. `observation` is what the environment answered (None when no action was sent)."""

    step: int
    action: Action | None
    action_text: str
    reward: float
    done: bool
    error: str | None
    observation: Observation | None
    reply: str | None = None


class EpisodeRecord(Struct, kw_only=True):
    """Everything about one played episode; enough to replay it without the server."""

    name: str
    task: str
    incident: str
    seed: int
    agent: str
    actions: list[str] = []
    rewards: list[float] = []
    score: float = SCORE_FLOOR
    breakdown: dict[str, float] | None = None
    steps: int = 0
    success: bool = False
    graded: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    # Why the episode ended without a grade (a server or model failure, unusable replies).
    error: str | None = None
    reset: Observation | None = None
    trace: list[StepRecord] = []

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def plan(tasks: Iterable[Task], episodes: int | None = None, seeds: Sequence[int] = (42,)) -> list[EpisodeSpec]:
    """The first `episodes` evaluation incidents of each task (all when None), each under every seed."""
    specs = []
    for task in tasks:
        for incident_id in task.incidents[:episodes]:
            for seed in seeds:
                suffix = f"@{seed}" if len(seeds) > 1 else ""
                specs.append(EpisodeSpec(name=f"{task.id}/{incident_id}{suffix}", task_id=task.id,
                                         incident_id=incident_id, seed=seed))
    return specs


def reference_policy(name: str) -> PolicyFactory:
    """A reference agent from `agents.REFERENCE_AGENTS` as a policy factory; its seed comes from the episode."""
    make = REFERENCE_AGENTS[name]

    def policy_for(spec: EpisodeSpec) -> Policy:
        agent: Agent = make(zlib.crc32(spec.name.encode()))

        async def policy(observation: Observation) -> Action:
            return agent.act(observation)

        return policy

    return policy_for


async def evaluate(
    policy_for: PolicyFactory,
    episodes: Sequence[EpisodeSpec],
    *,
    agent: str = "agent",
    base_url: str | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
) -> list[EpisodeRecord]:
    """Play every episode, at most `concurrency` at a time; records come back in the order given.

    Each episode has its own WebSocket session. `on_episode` sees each record as soon as its episode
    ends, failed or interrupted ones included. A failure ends its episode only, never the run.
    """
    async with server(base_url) as url:
        return await _play_all(policy_for, episodes, agent, url, concurrency, on_episode)


@asynccontextmanager
async def server(base_url: str | None) -> AsyncIterator[str]:
    """The server at `base_url`, or an embedded one on a free local port (None) for as long as the block runs."""
    if base_url is not None:
        yield base_url
        return
    local = LocalServer()
    try:
        yield await anyio.to_thread.run_sync(local.start)
    finally:
        with anyio.CancelScope(shield=True):  # interrupted too: no server process left behind
            await anyio.to_thread.run_sync(local.stop)


async def _play_all(
    policy_for: PolicyFactory,
    episodes: Sequence[EpisodeSpec],
    agent: str,
    base_url: str,
    concurrency: int,
    on_episode: Callable[[EpisodeRecord], None] | None,
) -> list[EpisodeRecord]:
    limiter = anyio.CapacityLimiter(concurrency)
    records: list[EpisodeRecord | None] = [None] * len(episodes)

    async def one(index: int, spec: EpisodeSpec) -> None:
        async with limiter:
            record = EpisodeRecord(name=spec.name, task=spec.task_id, incident=spec.incident_id, seed=spec.seed,
                                   agent=agent)
            started = time.perf_counter()
            try:
                async with ServiceIncidentEnv(base_url) as env:
                    await play(env, policy_for(spec), spec, record)
            except Exception as exc:  # this episode fails; the others go on
                record.error = f"{type(exc).__name__}: {exc}"
            finally:  # on cancellation too: every episode that started gets its [END]
                if not record.graded and record.error is None:
                    record.error = "interrupted"
                record.wall_s = round(time.perf_counter() - started, 4)
                records[index] = record
                if on_episode is not None:
                    on_episode(record)

    async with anyio.create_task_group() as group:
        for index, spec in enumerate(episodes):
            group.start_soon(one, index, spec)
    return [record for record in records if record is not None]


async def play(env: ServiceIncidentEnv, policy: Policy, spec: EpisodeSpec, record: EpisodeRecord) -> None:
    """One episode on an open session, filling `record` as it goes (so a failure keeps what happened)."""
    result = await env.reset(task_id=spec.task_id, seed=spec.seed, incident_id=spec.incident_id)
    observation = record.reset = result.observation
    unusable = 0
    while not observation.done:
        answer = await policy(observation)
        turn = answer if isinstance(answer, Turn) else Turn(action=answer)
        record.prompt_tokens += turn.prompt_tokens
        record.completion_tokens += turn.completion_tokens
        if turn.action is None:
            # Nothing valid to send: the policy gets its error back through its next call, and the
            # turn is logged like a step that did nothing.
            unusable += 1
            _log(record, StepRecord(step=record.steps + 1, action=None, action_text="null", reward=0.0, done=False,
                                    error=turn.error or "the policy gave no action", observation=None,
                                    reply=turn.reply))
            if unusable >= MAX_UNUSABLE_REPLIES:
                record.error = f"gave up after {unusable} unusable replies in a row"
                return
            continue
        unusable = 0
        result = await env.step(turn.action)
        observation = result.observation
        _log(record, StepRecord(step=record.steps + 1, action=turn.action, action_text=describe(turn.action),
                                reward=result.reward or 0.0, done=result.done,
                                error=observation.last_action_error, observation=observation, reply=turn.reply))
    record.graded = observation.score is not None
    record.score = observation.score if observation.score is not None else SCORE_FLOOR
    record.breakdown = observation.breakdown
    record.success = record.score >= SUCCESS_SCORE


def _log(record: EpisodeRecord, step: StepRecord) -> None:
    record.trace.append(step)
    record.steps = step.step
    record.actions.append(step.action_text)
    record.rewards.append(step.reward)


def describe(action: Action) -> str:
    """An action as one token for the [STEP] line: `inspect_logs(db)`, `declare(db+cache,P0)`."""
    fields = msgspec.structs.asdict(action)
    targets = fields.get("targets") or [t for t in (fields.get("target"),) if t]
    targets += fields.get("additional_targets") or []
    args = ["+".join(targets)] if targets else []
    if fields.get("severity"):
        args.append(fields["severity"])
    return f"{action_name(action)}({','.join(args)})"


# --- OpenEnv's stdout contract ----------------------------------------------------------------


def transcript(record: EpisodeRecord, env: str = BENCHMARK) -> list[str]:
    """The episode's [START], [STEP]... and [END] lines: two decimals, lowercase booleans, one line each."""
    lines = [f"[START] task={record.name} env={env} model={record.agent}"]
    lines += [
        f"[STEP] step={s.step} action={s.action_text} reward={s.reward:.2f} done={_bool(s.done)} "
        f"error={_one_line(s.error) if s.error else 'null'}"
        for s in record.trace
    ]
    lines.append(
        f"[END] success={_bool(record.success)} steps={record.steps} score={record.score:.2f} "
        f"rewards={','.join(f'{r:.2f}' for r in record.rewards)}"
    )
    return lines


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --- results as JSON Lines --------------------------------------------------------------------

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(EpisodeRecord)


def encode(record: EpisodeRecord) -> bytes:
    """One JSON line; `tokens` is added for readers that do not sum the two counts themselves."""
    data: dict[str, Any] = msgspec.to_builtins(record)
    data["tokens"] = record.tokens
    return _encoder.encode(data) + b"\n"


def decode(raw: bytes) -> list[EpisodeRecord]:
    return [_decoder.decode(line) for line in raw.splitlines() if line.strip()]
