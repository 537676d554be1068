"""Evaluate any agent on the benchmark: episodes run concurrently, each on a session of its own.

    from service_incident.harness.evaluation import evaluate, plan
    from service_incident.harness.session import InProcess
    from service_incident.tasks import TASKS

    async def my_policy(observation):                  # any async callable: observation -> Action
        return Declare(target=observation.services[0], severity="P1")

    records = await evaluate(lambda spec: my_policy, plan(TASKS.values()), sessions=InProcess())

`evaluate` takes a policy *factory*, called once per episode, so a policy can keep per-episode
state (a chat history); a stateless one is `lambda spec: policy`. A policy returns an `Action`, or a
`Turn` when it has more to say: the tokens it spent, or why its reply could not become an action.
A policy that depends on a service (a model endpoint) raises `EndpointFailure` when that service
fails: the episode is then counted apart from the agent's mean, like one the environment failed.

Episodes are played on `sessions` (see `session`): in-process, or over the WebSocket client against
`base_url`, or (neither given) against an embedded server on a free local port. Every episode is
played with final rewards: nothing is paid before the last step, which carries the whole return.
Each finished episode is an `EpisodeRecord` (see `records`).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence

from ..models import Action, Observation, ResetRequest
from ..scoring import SCORE_FLOOR
from .agents import AGENTS, Agent
from .records import (
    BENCHMARK,
    EpisodeRecord,
    EpisodeSpec,
    Failure,
    StepRecord,
    Turn,
    decode,
    describe,
    encode,
    plan,
    succeeded,
    transcript,
)
from .session import Session, Sessions, over_websocket

# What a caller of `evaluate` plans, gets back and writes out comes along with it.
__all__ = [
    "BENCHMARK",
    "DEFAULT_CONCURRENCY",
    "MAX_UNUSABLE_REPLIES",
    "EndpointFailure",
    "EpisodeRecord",
    "EpisodeSpec",
    "Policy",
    "PolicyFactory",
    "StepRecord",
    "Turn",
    "decode",
    "encode",
    "evaluate",
    "plan",
    "play",
    "reference_policy",
    "transcript",
]

# A policy whose replies cannot be used this many times in a row is given up on: it would
# otherwise spend model calls forever without the episode moving.
MAX_UNUSABLE_REPLIES = 3
DEFAULT_CONCURRENCY = 8

Policy = Callable[[Observation], Awaitable[Action | Turn]]
PolicyFactory = Callable[[EpisodeSpec], Policy]


class EndpointFailure(RuntimeError):
    """A service the policy depends on failed (a model endpoint, after its retries): not the agent's doing."""


def reference_policy(name: str) -> PolicyFactory:
    """A reference agent from `agents.AGENTS` as a policy factory; its seed comes from the episode."""
    make = AGENTS[name]

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
    sessions: Sessions | None = None,
    base_url: str | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
) -> list[EpisodeRecord]:
    """Play every episode, at most `concurrency` at a time; records come back in the order given.

    `on_episode` sees each record as soon as its episode ends, failed or interrupted ones included.
    A failure ends its episode only, never the run.
    """
    if sessions is not None:
        if base_url is not None:
            raise TypeError("give sessions or base_url, not both")
        return await _play_all(policy_for, episodes, agent, sessions, concurrency, on_episode)
    async with over_websocket(base_url) as websocket:
        return await _play_all(policy_for, episodes, agent, websocket, concurrency, on_episode)


async def _play_all(
    policy_for: PolicyFactory,
    episodes: Sequence[EpisodeSpec],
    agent: str,
    sessions: Sessions,
    concurrency: int,
    on_episode: Callable[[EpisodeRecord], None] | None,
) -> list[EpisodeRecord]:
    # asyncio alone, so an in-process evaluation loads no I/O library (the server's anyio included).
    limiter = asyncio.Semaphore(concurrency)
    records: list[EpisodeRecord | None] = [None] * len(episodes)

    async def one(index: int, spec: EpisodeSpec) -> None:
        async with limiter:
            record = EpisodeRecord(
                name=spec.name, task=spec.task_id, incident=spec.incident_id or "", seed=spec.seed, agent=agent
            )
            started = time.perf_counter()
            try:
                async with sessions.open() as session:
                    try:
                        await play(session, policy_for(spec), spec, record)
                    finally:
                        record.resumes = getattr(session, "resumes", 0)
            except Exception as exc:  # the environment failed this episode; the others go on
                if not record.graded:  # a session that fails to close after the grade changes nothing
                    _fail(record, "lost" if getattr(exc, "episode_lost", False) else "environment", exc)
            finally:  # on cancellation too: every episode that started gets its [END]
                if not record.graded and record.failure is None:
                    record.error, record.failure = "interrupted", "interrupted"
                record.wall_s = round(time.perf_counter() - started, 4)
                records[index] = record
                if on_episode is not None:
                    on_episode(record)

    async with asyncio.TaskGroup() as group:
        for index, spec in enumerate(episodes):
            group.create_task(one(index, spec))
    return [record for record in records if record is not None]


async def play(session: Session, policy: Policy, spec: EpisodeSpec, record: EpisodeRecord) -> None:
    """One episode on an open session, filling `record` as it goes (so a failure keeps what happened).

    The session's own failures propagate; the policy's are recorded as the agent's or its endpoint's.
    """
    request = ResetRequest(task_id=spec.task_id, seed=spec.seed, incident_id=spec.incident_id, reward_mode="final")
    observation = record.reset = await session.reset(request)
    record.incident = observation.incident_id  # the one the seed drew, when the spec names none
    unusable = 0
    while not observation.done:
        try:
            answer = await policy(observation)
        except EndpointFailure as exc:
            _fail(record, "model", exc)
            return
        except Exception as exc:
            _fail(record, "agent", exc)
            return
        turn = answer if isinstance(answer, Turn) else Turn(action=answer)
        record.prompt_tokens += turn.prompt_tokens
        record.completion_tokens += turn.completion_tokens
        if turn.action is None:
            # Nothing valid to send: the policy gets its error back through its next call, and the
            # turn is logged like a step that did nothing.
            unusable += 1
            _log(
                record,
                StepRecord(
                    step=record.steps + 1,
                    action=None,
                    action_text="null",
                    reward=0.0,
                    done=False,
                    error=turn.error or "the policy gave no action",
                    observation=None,
                    reply=turn.reply,
                ),
            )
            if unusable >= MAX_UNUSABLE_REPLIES:
                record.error, record.failure = f"gave up after {unusable} unusable replies in a row", "agent"
                return
            continue
        unusable = 0
        observation = await session.step(turn.action)
        _log(
            record,
            StepRecord(
                step=record.steps + 1,
                action=turn.action,
                action_text=describe(turn.action),
                reward=observation.reward or 0.0,
                done=observation.done,
                error=observation.last_action_error,
                observation=observation,
                reply=turn.reply,
            ),
        )
    record.graded = observation.score is not None
    record.score = observation.score if observation.score is not None else SCORE_FLOOR
    record.breakdown = observation.breakdown
    record.success = succeeded(record.score)


def _fail(record: EpisodeRecord, failure: Failure, exc: Exception) -> None:
    record.error, record.failure = f"{type(exc).__name__}: {exc}", failure


def _log(record: EpisodeRecord, step: StepRecord) -> None:
    record.trace.append(step)
    record.steps = step.step
    record.actions.append(step.action_text)
    record.rewards.append(step.reward)
