"""ServiceIncidentEnvironment: reset / step / state over one episode at a time. Sans-I/O and synchronous."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

import msgspec

from . import scoring
from .models import (
    INSPECTIONS,
    REMEDIATIONS,
    Action,
    Alert,
    CheckHealth,
    Declare,
    DeclareRootCauses,
    InspectDeploys,
    InspectLogs,
    InspectMetrics,
    InvalidReset,
    Metrics,
    Observation,
    Resolve,
    RewardMode,
    RunDbQuery,
    ServiceCard,
    State,
    action_name,
)
from .tasks import DEFAULT_TASK, TASKS, Task, find_task, resolve_incident, task_of
from .telemetry import STEP_MINUTES, Telemetry, clock, format_time
from .world import ServiceState, World

MAX_SEED = 2**63 - 1
_NO_EPISODE = "no episode is running: call reset first"
_EPISODE_OVER = "the episode is over: call reset to start another"
_VIEWS = {
    InspectLogs: "logs",
    InspectMetrics: "metrics",
    CheckHealth: "health",
    InspectDeploys: "deploys",
    RunDbQuery: "database diagnostics",
}
_DONE_REMEDY = {
    "restart": "Restarted {t}: its processes were replaced.",
    "rollback": "Rolled {t} back to its previous release.",
    "scale_up": "Scaled {t} up: capacity doubled.",
    "escalate": "Escalated to the team that owns {t}.",
}


@dataclass(slots=True)
class _Episode:
    task: Task
    seed: int
    episode_id: str
    world: World
    telemetry: Telemetry
    topology: list[ServiceCard]
    done: bool = False
    logs: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, Metrics] = field(default_factory=dict)
    health: dict[str, str] = field(default_factory=dict)
    deploys: dict[str, str] = field(default_factory=dict)
    db: dict[str, str] = field(default_factory=dict)
    # What each (service, view) showed when last looked at, to tell a fresh look from a repeat.
    seen: dict[tuple[str, str], ServiceState | str] = field(default_factory=dict)
    history: list[str] = field(default_factory=list)
    paged: list[Alert] = field(default_factory=list)
    diagnostic: str | None = None
    ledger: scoring.Ledger = field(default_factory=scoring.Ledger)
    score: float | None = None
    breakdown: dict[str, float] | None = None

    @property
    def step(self) -> int:
        return self.world.step


class ServiceIncidentEnvironment:
    """One agent's environment. Holds at most one episode; reset starts a new one."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._episode: _Episode | None = None
        self._last: Observation | None = None

    def reset(
        self,
        *,
        task_id: str | None = None,
        seed: int | None = None,
        incident_id: str | None = None,
        episode_id: str | None = None,
        reward_mode: RewardMode = "final",
    ) -> Observation:
        """Start an episode. Same task, seed and incident give a byte-identical episode."""
        task = self._task(task_id, incident_id)
        if seed is None:
            seed = random.SystemRandom().randrange(MAX_SEED)
        elif isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise InvalidReset(f"seed must be an integer in [0, {MAX_SEED}], got {seed!r}")
        try:
            incident = resolve_incident(task, incident_id, seed)
        except KeyError:
            raise InvalidReset(f"incident {incident_id!r} is not part of task {task.id!r}") from None
        world = World(incident)
        telemetry = Telemetry(world, seed)
        episode = _Episode(
            task=task,
            seed=seed,
            episode_id=episode_id or str(uuid.uuid4()),
            world=world,
            telemetry=telemetry,
            topology=[ServiceCard(s.name, s.kind, list(s.depends_on), s.user_facing) for s in incident.services],
        )
        first = incident.initial_visible
        episode.logs = {first: telemetry.logs(first, 0)}
        episode.seen[(first, "logs")] = world.states[first]
        episode.ledger.observe(episode.logs[first])
        if first in world.root_causes and telemetry.logs_anomalous(episode.logs[first]):
            episode.ledger.evidence.add(first)
        self._episode = episode
        brief = (
            f"Paged: {len(telemetry.alerts(0))} alert(s) firing. You can see the logs of {first}. "
            f"Actions: {', '.join(task.actions)}. The episode ends with {' or '.join(task.ends_on)} "
            f"or after {task.max_steps} steps."
        )
        return self._observe(brief, reward=0.0)

    def step(self, action: Action) -> Observation:
        """Apply one action. Game-level mistakes come back in `last_action_error`, never as exceptions."""
        episode = self._episode
        if episode is None:
            return _empty(_NO_EPISODE)
        if episode.done:
            assert self._last is not None
            return msgspec.structs.replace(
                self._last, reward=0.0, last_action_error=_EPISODE_OVER, message=_EPISODE_OVER
            )
        episode.world.advance()
        name = action_name(action)
        episode.history.append(_describe(episode.step, action))
        if action.rationale:
            episode.ledger.rationales.append(action.rationale)
        error = self._refusal(episode, action)
        if error is not None:
            reward, message = episode.ledger.wasted(), "Nothing happened."
        elif isinstance(action, INSPECTIONS):
            reward, message, error = self._inspect(episode, action)
        elif isinstance(action, REMEDIATIONS):
            # A remediation action's tag is the remedy it applies.
            outcome = episode.world.remediate(name, action.target)
            reward = scoring.remedy_reward(outcome)
            if outcome != "heals":
                episode.ledger.waste += 1
            message = _DONE_REMEDY[name].format(t=action.target)
        elif isinstance(action, Resolve):
            if action.target is not None and episode.ledger.declared is None:
                # Resolving "the service I fixed" names it as the root cause, as the response system did.
                episode.ledger.declared = frozenset({action.target})
            restored = episode.world.restored()
            reward = scoring.RESOLVE_RESTORED if restored else scoring.RESOLVE_PREMATURE
            message = "Resolved the incident."
        else:
            reward, message = self._declare(episode, action)
        if error is None and name in episode.task.ends_on:
            self._finish(episode)
        if not episode.done and episode.step >= episode.task.max_steps:
            reward += scoring.BUDGET_EXHAUSTED
            message += " The step budget is spent."
            self._finish(episode)
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

    def grade(self) -> tuple[float | None, dict[str, float] | None]:
        """The score and breakdown of the current episode, once it has ended."""
        episode = self._episode
        return (episode.score, episode.breakdown) if episode else (None, None)

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
        task = find_task(task_id or DEFAULT_TASK)
        if task is None:
            raise InvalidReset(f"unknown task {task_id!r}; tasks are: {', '.join(TASKS)}")
        return task

    @staticmethod
    def _refusal(episode: _Episode, action: Action) -> str | None:
        """Why an action cannot be carried out, or None. A refused action still costs its step."""
        task = episode.task
        name = action_name(action)
        if name not in task.actions:
            return f"{name} is not available in task {task.id!r}; available: {', '.join(task.actions)}"
        services = episode.world.incident.names
        named = action.targets if isinstance(action, DeclareRootCauses) else [getattr(action, "target", None)]
        if isinstance(action, Declare):
            named = [action.target, *action.additional_targets]
        unknown = [t for t in named if t is not None and t not in services]
        if unknown:
            return f"unknown service {unknown[0]!r}; services are: {', '.join(services)}"
        if task.rationale_required and not action.rationale:
            return f"task {task.id!r} requires a rationale on every action"
        if isinstance(action, RunDbQuery) and episode.world.incident.service(action.target).kind != "database":
            databases = [s.name for s in episode.world.incident.services if s.kind == "database"]
            return f"{action.target} is not a database; databases here: {', '.join(databases) or 'none'}"
        if isinstance(action, Declare | DeclareRootCauses) and episode.ledger.declared is not None:
            return "the root cause is already declared"
        return None

    def _inspect(self, episode: _Episode, action: Action) -> tuple[float, str, str | None]:
        target, telemetry, step = action.target, episode.telemetry, episode.step
        view = _VIEWS[type(action)]
        state = episode.world.states[target]
        if isinstance(action, InspectDeploys):
            text = telemetry.deploys(target, step)
            fingerprint: ServiceState | str = text
        else:
            fingerprint = state
        if episode.seen.get((target, view)) == fingerprint:
            return episode.ledger.wasted(), f"The {view} of {target} have not changed since you last looked.", None
        episode.seen[(target, view)] = fingerprint
        if isinstance(action, InspectLogs):
            text = telemetry.logs(target, step)
            episode.logs = {**episode.logs, target: text}
            anomalous = telemetry.logs_anomalous(text)
        elif isinstance(action, InspectMetrics):
            metrics = telemetry.metrics(target, step)
            episode.metrics = {**episode.metrics, target: metrics}
            text = msgspec.json.encode(metrics).decode()
            anomalous = telemetry.metrics_anomalous(target, metrics)
        elif isinstance(action, CheckHealth):
            text = telemetry.health(target, step)
            episode.health = {**episode.health, target: text}
            anomalous = not text.startswith("status=ok")
        elif isinstance(action, InspectDeploys):
            episode.deploys = {**episode.deploys, target: text}
            anomalous = telemetry.deploys_recent(text, step)
        else:
            text = telemetry.db_query(target, step) or ""
            episode.db = {**episode.db, target: text}
            anomalous = telemetry.db_anomalous(target, step)
        episode.ledger.observe(text)
        if anomalous and target in episode.world.root_causes:
            episode.ledger.evidence.add(target)
        episode.diagnostic = f"{view} of {target}: {telemetry.summarize(view, target, text, step)}"
        verdict = "something abnormal" if anomalous else "nothing abnormal"
        return episode.ledger.inspection_reward(anomalous), f"Inspected the {view} of {target}: {verdict}.", None

    def _declare(self, episode: _Episode, action: Declare | DeclareRootCauses) -> tuple[float, str]:
        world = episode.world
        if isinstance(action, Declare):
            declared = frozenset([action.target, *action.additional_targets])
            # Judged on what the pages could have shown by now, lag included.
            severity_right: bool | None = action.severity == world.severity(episode.telemetry.lagged(episode.step))
            said = f" with severity {action.severity}"
        else:
            declared, severity_right, said = frozenset(action.targets), None, ""
        episode.ledger.declared = declared
        episode.ledger.severity_right = bool(severity_right)
        named = ", ".join(sorted(declared))
        reward = scoring.declare_reward(declared, world.root_causes, severity_right)
        return reward, f"Declared {named} as root cause{said}."

    @staticmethod
    def _finish(episode: _Episode) -> None:
        episode.done = True
        episode.score, episode.breakdown = scoring.final_score(
            grading=episode.task.grading,
            roots=episode.world.root_causes,
            steps=episode.step,
            max_steps=episode.task.max_steps,
            ledger=episode.ledger,
            restored=episode.world.restored(),
        )

    def _observe(self, message: str, reward: float, error: str | None = None) -> Observation:
        episode = self._episode
        assert episode is not None
        episode.ledger.rewards.append(reward)
        incident, task = episode.world.incident, episode.task
        alerts = episode.telemetry.alerts(episode.step)
        if alerts is not episode.paged:
            # The pages are evidence the agent has seen too.
            episode.paged = alerts
            episode.ledger.observe(" ".join(f"{a.service} {a.summary}" for a in alerts))
        observation = Observation(
            task_id=task.id,
            incident_id=incident.id,
            title=f"[{alerts[0].level}] {alerts[0].service}: {alerts[0].summary}" if alerts else "No alert firing",
            services=incident.names,
            topology=episode.topology,
            alerts=alerts,
            # Views are replaced, never mutated, when something new is seen: safe to share.
            visible_logs=episode.logs,
            visible_metrics=episode.metrics,
            visible_health=episode.health,
            visible_deploys=episode.deploys,
            visible_db=episode.db,
            step_count=episode.step,
            max_steps=task.max_steps,
            clock=format_time(clock(episode.world, episode.step)),
            sla_minutes_left=max(0, task.sla_minutes - STEP_MINUTES * episode.step),
            message=message,
            available_actions=list(task.actions),
            terminal_actions=list(task.ends_on),
            dashboard=episode.telemetry.dashboard(episode.step) if task.dashboard else {},
            last_diagnostic=episode.diagnostic,
            action_history=list(episode.history),
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


def _describe(step: int, action: Action) -> str:
    fields = msgspec.structs.asdict(action)
    shown = ", ".join(
        f"{k}={v}" for k, v in fields.items() if v not in (None, [], {}) and k not in ("rationale", "metadata")
    )
    return f"step {step}: {action_name(action)}({shown})"


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
