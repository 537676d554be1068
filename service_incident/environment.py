"""ServiceIncidentEnvironment: reset / step / state over one episode at a time. Sans-I/O and synchronous."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

import msgspec

from . import scoring
from .models import (
    Action,
    Declare,
    InspectLogs,
    InspectMetrics,
    InvalidReset,
    Metrics,
    Observation,
    ServiceCard,
    State,
)
from .tasks import DEFAULT_TASK, TASKS, Task, incident, task_of
from .telemetry import Telemetry, clock, format_time
from .world import World

MAX_SEED = 2**63 - 1
_NO_EPISODE = "no episode is running: call reset first"
_EPISODE_OVER = "the episode is over: call reset to start another"


@dataclass(slots=True)
class _Episode:
    task: Task
    seed: int
    episode_id: str
    world: World
    telemetry: Telemetry
    topology: list[ServiceCard]
    step: int = 0
    done: bool = False
    logs: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, Metrics] = field(default_factory=dict)
    ledger: scoring.Ledger = field(default_factory=scoring.Ledger)
    score: float | None = None
    breakdown: dict[str, float] | None = None


class ServiceIncidentEnvironment:
    """One agent's environment. Holds at most one episode; reset starts a new one."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._episode: _Episode | None = None
        self._last: Observation | None = None

    def reset(
        self,
        task_id: str | None = None,
        seed: int | None = None,
        incident_id: str | None = None,
        episode_id: str | None = None,
    ) -> Observation:
        """Start an episode. Same task, seed and incident give a byte-identical episode."""
        task = self._task(task_id, incident_id)
        if seed is None:
            seed = random.SystemRandom().randrange(MAX_SEED)
        elif isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise InvalidReset(f"seed must be an integer in [0, {MAX_SEED}], got {seed!r}")
        if incident_id is None:
            incident_id = random.Random(f"{task.id}:{seed}").choice(task.incidents)
        world = World(incident(task, incident_id))
        telemetry = Telemetry(world, seed)
        spec = world.incident
        episode = _Episode(
            task=task,
            seed=seed,
            episode_id=episode_id or str(uuid.uuid4()),
            world=world,
            telemetry=telemetry,
            topology=[ServiceCard(s.name, s.kind, list(s.depends_on), s.user_facing) for s in spec.services],
        )
        episode.logs[spec.initial_visible] = telemetry.logs(spec.initial_visible, 0)
        self._episode = episode
        brief = (
            f"Paged: {len(telemetry.alerts(0))} alert(s) firing. You can see the logs of "
            f"{spec.initial_visible}. Find the root-cause service and the severity within {task.max_steps} steps."
        )
        return self._observe(brief, reward=0.0)

    def step(self, action: Action) -> Observation:
        """Apply one action. Game-level mistakes come back in `last_action_error`, never as exceptions."""
        episode = self._episode
        if episode is None:
            return _empty(_NO_EPISODE)
        if episode.done:
            assert self._last is not None
            return self._replay_last(_EPISODE_OVER)
        episode.step += 1
        services = episode.world.incident.names
        error: str | None = None
        if action.target not in services:
            reward = episode.ledger.wasted()
            error = f"unknown service {action.target!r}; services are: {', '.join(services)}"
            message = "Nothing happened: the target is not a service of this system."
        elif isinstance(action, Declare):
            reward, message = self._declare(episode, action)
        else:
            reward, message = self._inspect(episode, action)
        if not episode.done and episode.step >= episode.task.max_steps:
            reward += scoring.BUDGET_EXHAUSTED
            message += " The step budget is spent without a declaration."
            self._finish(episode, declared=None, severity_right=False)
        if episode.done:
            reward = scoring.settle(reward, episode.ledger)
            message += f" Episode over: score {episode.score:.2f}."
        return self._observe(message, reward=round(reward, 6), error=error)

    @property
    def state(self) -> State:
        episode = self._episode
        if episode is None:
            return State()
        return State(
            episode_id=episode.episode_id,
            step_count=episode.step,
            task_id=episode.task.id,
            incident_id=episode.world.incident.id,
            seed=episode.seed,
            done=episode.done,
        )

    def close(self) -> None:
        self._episode = None
        self._last = None

    @staticmethod
    def _task(task_id: str | None, incident_id: str | None) -> Task:
        if task_id is None and incident_id is not None:
            found = task_of(incident_id)
            if found is None:
                raise InvalidReset(f"unknown incident {incident_id!r}")
            return found
        task = TASKS.get(task_id or DEFAULT_TASK)
        if task is None:
            raise InvalidReset(f"unknown task {task_id!r}; tasks are: {', '.join(TASKS)}")
        if incident_id is not None and incident_id not in task.incidents:
            raise InvalidReset(f"incident {incident_id!r} is not part of task {task.id!r}")
        return task

    def _inspect(self, episode: _Episode, action: InspectLogs | InspectMetrics) -> tuple[float, str]:
        target, telemetry = action.target, episode.telemetry
        if isinstance(action, InspectLogs):
            if target in episode.logs:
                return episode.ledger.wasted(), f"The logs of {target} are already on screen."
            text = telemetry.logs(target, episode.step)
            episode.logs[target] = text
            anomalous = telemetry.logs_anomalous(text)
            what = "logs"
        else:
            if target in episode.metrics:
                return episode.ledger.wasted(), f"The metrics of {target} are already on screen."
            metrics = telemetry.metrics(target, episode.step)
            episode.metrics[target] = metrics
            anomalous = telemetry.metrics_anomalous(target, metrics)
            what = "metrics"
        if anomalous:
            episode.ledger.evidence.add(target)
        verdict = "something abnormal" if anomalous else "nothing abnormal"
        return episode.ledger.inspection_reward(anomalous), f"Inspected the {what} of {target}: {verdict}."

    def _declare(self, episode: _Episode, action: Declare) -> tuple[float, str]:
        world = episode.world
        root_right = frozenset({action.target}) == world.root_causes
        severity_right = action.severity == world.severity()
        self._finish(episode, declared=frozenset({action.target}), severity_right=severity_right)
        return (
            scoring.declare_reward(root_right, severity_right),
            f"Declared {action.target} as the root cause with severity {action.severity}.",
        )

    @staticmethod
    def _finish(episode: _Episode, declared: frozenset[str] | None, severity_right: bool) -> None:
        episode.done = True
        episode.score, episode.breakdown = scoring.final_score(
            declared=declared,
            roots=episode.world.root_causes,
            severity_right=severity_right,
            steps=episode.step,
            max_steps=episode.task.max_steps,
            ledger=episode.ledger,
        )

    def _observe(self, message: str, reward: float, error: str | None = None) -> Observation:
        episode = self._episode
        assert episode is not None
        episode.ledger.rewards.append(reward)
        incident = episode.world.incident
        alerts = episode.telemetry.alerts(episode.step)
        observation = Observation(
            task_id=episode.task.id,
            incident_id=incident.id,
            title=f"[{alerts[0].level}] {alerts[0].service}: {alerts[0].summary}" if alerts else "Incident",
            services=incident.names,
            topology=episode.topology,
            alerts=alerts,
            visible_logs=dict(episode.logs),
            visible_metrics=dict(episode.metrics),
            step_count=episode.step,
            max_steps=episode.task.max_steps,
            clock=format_time(clock(episode.world, episode.step)),
            message=message,
            last_action_error=error,
            score=episode.score,
            breakdown=episode.breakdown,
            done=episode.done,
            reward=reward,
            metadata={
                "episode_id": episode.episode_id,
                "seed": episode.seed,
                "cumulative_reward": round(sum(episode.ledger.rewards), 6),
            },
        )
        self._last = observation
        return observation

    def _replay_last(self, error: str) -> Observation:
        assert self._last is not None
        return msgspec.structs.replace(self._last, reward=0.0, last_action_error=error, message=error)


def _empty(error: str) -> Observation:
    return Observation(
        task_id="",
        incident_id="",
        title="",
        services=[],
        topology=[],
        alerts=[],
        visible_logs={},
        visible_metrics={},
        step_count=0,
        max_steps=0,
        clock="",
        message=error,
        last_action_error=error,
        reward=0.0,
    )
