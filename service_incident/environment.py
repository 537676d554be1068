"""ServiceIncidentEnvironment: reset / step / state over one episode at a time. Sans-I/O and synchronous."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import msgspec

from . import scoring
from .faults import DATASTORE_KINDS, FAULTS
from .holdout import KEY_SETTING, HoldoutKey
from .models import (
    Action,
    ActionRecord,
    Alert,
    Declare,
    DeclareRootCauses,
    InvalidReset,
    Metrics,
    Observation,
    Postmortem,
    ResetRequest,
    Resolve,
    RewardMode,
    RunDbQuery,
    ServiceCard,
    Severity,
    State,
    action_name,
)
from .tasks import DEFAULT_TASK, HELD_OUT, TASKS, Task, find_task, resolve_incident, task_of
from .telemetry import (
    LOG_WINDOW_S,
    LOUD_LEVELS,
    STEP_MINUTES,
    TRACE_DEPTH,
    Look,
    Scope,
    Telemetry,
    clock_text,
    level,
    minute,
)
from .telemetry.escalation import acknowledgement
from .telemetry.logs import in_backlog
from .world import P0_ERROR_RATE, P0_LATENCY_MS, P1_ERROR_RATE, P1_LATENCY_MS, World
from .world.decimals import round_to

MAX_SEED = 2**63 - 1
# Minutes a resolve watches the world for service to come back before it closes the incident.
RESOLVE_WATCH = 3
_METRICS_TEXT = msgspec.json.Encoder()  # a metrics view as the agent reads it, for the facts it shows
_NO_EPISODE = "no episode is running: call reset first"
_EPISODE_OVER = "the episode is over: call reset to start another"
_NO_SEVERITY = "this task does not grade severity"
_VIEW_LABELS = {
    "logs": "logs",
    "metrics": "metrics",
    "health": "health",
    "deploys": "deploys",
    "db": "database diagnostics",
    "traces": "traces",
}
_DONE_REMEDY = {
    "restart": "Restarted {t}: its pods were replaced.",
    "rollback": "Rolled {t} back to its previous release.",
    "scale_up": "Scaled {t} up: replicas doubled.",
    "failover": "Asked {t} to promote a replica to primary.",
    "expand_volume": "Grew the data volume of {t}.",
    "renew_certificate": "Issued and loaded a new certificate for {t}.",
    "shed_load": "Turned on admission control at {t}.",
    "terminate_blocker": "Asked {t} to end the session holding the row locks others wait on.",
    "resync_clock": "Pointed the nodes of {t} at a working time source and stepped their clocks.",
}


def valid_seed(seed: object) -> bool:
    """Whether a reset's seed is one an episode can have: an integer in [0, MAX_SEED], a bool not being one."""
    return isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed <= MAX_SEED


@dataclass(slots=True)
class _Episode:
    task: Task
    seed: int
    episode_id: str
    reward_mode: RewardMode
    world: World
    telemetry: Telemetry
    topology: list[ServiceCard]
    # A seed the server drew is withheld until the end: with it, the public generator gives the incident.
    seed_drawn: bool = False
    done: bool = False
    views: dict[str, dict[str, str]] = field(default_factory=dict)
    # The views the agent chose to look at: the first deliberate look at the one reset showed is a look too.
    opened: set[tuple[str, str]] = field(default_factory=set)
    metrics: dict[str, Metrics] = field(default_factory=dict)
    # The minute each view shown was taken, by view and service.
    as_of: dict[str, dict[str, str]] = field(default_factory=dict)
    history: list[ActionRecord] = field(default_factory=list)
    paged: list[Alert] = field(default_factory=list)
    dashboard: dict[str, str] = field(default_factory=dict)
    diagnostic: str | None = None
    ledger: scoring.Ledger = field(default_factory=scoring.Ledger)
    paid: list[float] = field(default_factory=list)
    declared_severity: Severity | None = None
    # The last minute the declared severity was graded through (see `Telemetry.graded_through`), and the
    # severity graded then: the minutes up to it never change, so the postmortem tells the same one.
    graded_through: int | None = None
    graded_severity: Severity | None = None
    score: float | None = None
    breakdown: dict[str, float] | None = None
    postmortem: Postmortem | None = None

    @property
    def step(self) -> int:
        return self.world.step

    @property
    def shown_seed(self) -> int | None:
        """The seed as metadata and state report it: one the client gave, or the server's once the episode
        is over (to replay it); never a held-out episode's (its index: the id names the incident instead)."""
        return None if self.task.held_out or (self.seed_drawn and not self.done) else self.seed


class ServiceIncidentEnvironment:
    """One agent's environment. Holds at most one episode; reset starts a new one.

    With a `holdout_key` (see holdout), the held-out tasks are offered too.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, holdout_key: str | None = None) -> None:
        self._episode: _Episode | None = None
        self._last: Observation | None = None
        self._holdout = HoldoutKey(holdout_key) if holdout_key is not None else None
        # Where a seed comes from when a reset names none: a server that logs episodes to replay them
        # draws it itself, so a replay of a drawn seed is the same episode, the seed still withheld.
        self.draw_seed: Callable[[], int] = lambda: random.SystemRandom().randrange(MAX_SEED)

    def reset(
        self,
        *,
        task_id: str | None = None,
        seed: int | None = None,
        incident_id: str | None = None,
        episode_id: str | None = None,
        reward_mode: RewardMode = "final",
    ) -> Observation:
        """Start an episode: `start` with these fields of a `ResetRequest`."""
        request = ResetRequest(
            task_id=task_id, seed=seed, incident_id=incident_id, episode_id=episode_id, reward_mode=reward_mode
        )
        return self.start(request)

    def start(self, request: ResetRequest) -> Observation:
        """Start an episode. Same task, seed and incident give a byte-identical episode."""
        task_id, seed, incident_id = request.task_id, request.seed, request.incident_id
        episode_id, reward_mode = request.episode_id, request.reward_mode
        task = self._task(task_id, incident_id, self._holdout is not None)
        seed_drawn = seed is None
        if seed is None:
            seed = self.draw_seed()
        elif not valid_seed(seed):
            raise InvalidReset(f"seed must be an integer in [0, {MAX_SEED}], got {seed!r}")
        if reward_mode not in ("final", "dense"):
            raise InvalidReset(f"reward_mode must be 'final' or 'dense', got {reward_mode!r}")
        if task.held_out and reward_mode == "dense":
            # Dense shaping is paid from the truth (which inspection showed a root): an oracle.
            raise InvalidReset(f"task {task.id!r} is held out: its reward is paid at the end only ('final')")
        try:
            incident = resolve_incident(task, incident_id, seed, self._holdout)
        except KeyError:
            raise InvalidReset(f"incident {incident_id!r} is not part of task {task.id!r}") from None
        except ValueError as exc:  # the generator found no incident for this seed (the message names no seed)
            raise InvalidReset(str(exc)) from None
        world = World(incident)
        telemetry = Telemetry(world, seed)
        episode = _Episode(
            task=task,
            seed=seed,
            episode_id=episode_id or str(uuid.uuid4()),
            reward_mode=reward_mode,
            world=world,
            telemetry=telemetry,
            topology=[ServiceCard(s.name, s.kind, list(s.depends_on), s.user_facing) for s in incident.services],
            seed_drawn=seed_drawn,
        )
        first = incident.initial_visible
        self._episode = episode
        self._record(episode, telemetry.look("logs", first, 0), opened=False)
        brief = (
            f"Paged: {len(telemetry.alerts(0))} alert(s). You can see the logs of {first}. "
            f"Actions: {', '.join(task.actions)}. The episode ends with {' or '.join(task.ends_on)} "
            f"or after {task.max_steps} steps."
            + (
                " Every action needs a rationale (credited for citing what you observed)."
                if task.rationale_required
                else ""
            )
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
        if action.rationale:
            episode.ledger.cite(action.rationale)
        error = self._refusal(episode, action, name)
        episode.history.append(_record(episode.step, action, name, refused=error is not None))
        if error is not None:
            episode.ledger.wasted()
            message = "Nothing happened."
        elif action.kind == "inspect":
            message = self._inspect(episode, action)
        elif action.kind == "remedy":
            message = self._remedy(episode, name, action.target)
        elif isinstance(action, Resolve):
            if action.target is not None and episode.ledger.declared is None:
                # Resolving "the service I fixed" names it as the root cause, as the response system did.
                episode.ledger.declare(frozenset({action.target}))
            restored, watched = self._watch(episode)
            outcome = "service restored" if restored else "users still failing, incident reopened"
            message = f"Resolved the incident after watching for {watched} min: {outcome}."
        else:
            message = self._declare(episode, action)
        if error is None and name in episode.task.ends_on:
            self._finish(episode)
        if not episode.done and episode.step >= episode.task.max_steps:
            message += " The step budget is spent."
            self._finish(episode)
        if episode.done:
            message += f" Episode over: score {episode.score:.2f}."
        return self._observe(message, reward=_reward(episode), error=error)

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
            seed=episode.shown_seed,
            done=episode.done,
        )

    def grade(self) -> tuple[float | None, dict[str, float] | None]:
        """The score and breakdown of the current episode, once it has ended."""
        episode = self._episode
        return (episode.score, episode.breakdown) if episode else (None, None)

    def render_ahead(self) -> None:
        """Render now, for every episode of the current incident, what they show from the incident alone
        until their first remedy, through the task's budget (`Telemetry.render_ahead`): what a process
        that draws incidents for another (a server's generation pool) sends with each, right after its
        reset."""
        episode = self._episode
        if episode is not None:
            episode.telemetry.render_ahead(episode.task.max_steps)

    def close(self) -> None:
        self._episode = None
        self._last = None

    @staticmethod
    def _task(task_id: str | None, incident_id: str | None, keyed: bool) -> Task:
        if task_id is None and incident_id is not None:
            found = task_of(incident_id)
            if found is None:
                raise InvalidReset(f"unknown incident {incident_id!r}")
            return found
        task = find_task(task_id or DEFAULT_TASK, held_out=keyed)
        if task is None and task_id in HELD_OUT:
            raise InvalidReset(
                f"task {task_id!r} is held out: it is offered only where a holdout key is set "
                f"(the {KEY_SETTING} setting)"
            )
        if task is None:
            offered = [*TASKS, *(HELD_OUT if keyed else ())]
            raise InvalidReset(f"unknown task {task_id!r}; tasks are: {', '.join(offered)}")
        return task

    @staticmethod
    def _refusal(episode: _Episode, action: Action, name: str) -> str | None:
        """Why an action (`name` is its tag) cannot be carried out, or None. A refused action still costs its step."""
        task = episode.task
        if name not in task.actions:
            return f"{name} is not available in task {task.id!r}; available: {', '.join(task.actions)}"
        services = episode.world.plan.by_name
        named = action.targets if isinstance(action, DeclareRootCauses) else [getattr(action, "target", None)]
        if isinstance(action, Declare):
            named = [action.target, *action.additional_targets]
        unknown = [t for t in named if t is not None and t not in services]
        if unknown:
            return f"unknown service {unknown[0]!r}; services are: {', '.join(episode.world.incident.names)}"
        if task.rationale_required and not action.rationale:
            return f"task {task.id!r} requires a rationale on every action"
        endpoint = getattr(action, "endpoint", None)
        if endpoint is not None:
            service = getattr(action, "target", "")
            endpoints = episode.telemetry.endpoints(type(action).view, service)  # type: ignore[arg-type]
            if endpoint not in endpoints:
                return f"unknown endpoint {endpoint!r} of {service}; its endpoints are: {', '.join(endpoints)}"
        if isinstance(action, RunDbQuery) and episode.world.incident.service(action.target).kind not in DATASTORE_KINDS:
            stores = [s.name for s in episode.world.incident.services if s.kind in DATASTORE_KINDS]
            return f"{action.target} is not a database, queue or cache; those here: {', '.join(stores) or 'none'}"
        if isinstance(action, Declare | DeclareRootCauses) and episode.ledger.declared is not None:
            return "the root cause is already declared"
        return None

    @staticmethod
    def _watch(episode: _Episode) -> tuple[bool, int]:
        """An incident commander monitors before closing: the world runs on, a minute at a time and
        within the budget, until service is restored or the fix is seen not to hold."""
        world = episode.world
        watched = 0
        while not world.restored() and watched < RESOLVE_WATCH and world.step < episode.task.max_steps:
            world.advance()
            watched += 1
        return world.restored(), watched

    @staticmethod
    def _remedy(episode: _Episode, name: str, target: str) -> str:
        # A remediation action's tag is the remedy it applies.
        episode.world.remediate(name, target)  # type: ignore[arg-type]
        episode.ledger.remedied(scoring.judge_remedy(episode.world))
        if name == "escalate":
            return acknowledgement(episode.world, target, episode.step)
        return _DONE_REMEDY[name].format(t=target)

    def _inspect(self, episode: _Episode, action: Action) -> str:
        target: str = action.target  # type: ignore[union-attr, assignment]
        view = type(action).view
        assert view is not None
        scope = Scope(getattr(action, "endpoint", None), getattr(action, "errors_only", False))
        look = episode.telemetry.look(view, target, episode.step, scope)  # type: ignore[arg-type]
        label = _VIEW_LABELS[view]
        if not look.changed and (view, target) in episode.opened:
            episode.ledger.wasted()
            # The view asked for is shown again as it was taken (another scope may have replaced it).
            _show(episode, look)
            taken = minute(episode.world, look.step)
            return f"The {label} of {target} show nothing new since you last looked at {taken}."
        episode.opened.add((view, target))
        episode.ledger.looked(self._record(episode, look))
        episode.diagnostic = f"{label} of {target}: {_digest(look)}"
        return f"Inspected the {label} of {target}."

    @staticmethod
    def _record(episode: _Episode, look: Look, opened: bool = True) -> frozenset[str]:
        """Show a look in the observation; the root causes whose fault it showed (privileged, for grading).

        Evidence is what the agent chose to look at: the view shown at reset counts for none, or an
        answer declared at once would be backed by evidence whenever the service shown is a root."""
        _show(episode, look)
        world = episode.world
        shown = {look.service}
        if look.view == "traces":
            shown |= _reachable(world, look.service, TRACE_DEPTH)
        if look.view == "logs" and in_backlog(world.incident, look.service, look.step):
            shown = set()
        episode.ledger.observe(look.text if look.metrics is None else partial(_metrics_text, look), frozenset(shown))
        if not opened:
            return frozenset()
        return frozenset(root for root in world.root_causes & shown if world.fault_runs(root, episode.step))

    def _declare(self, episode: _Episode, action: Declare | DeclareRootCauses) -> str:
        world = episode.world
        if isinstance(action, Declare):
            declared = frozenset([action.target, *action.additional_targets])
            # Judged on what the metrics had shown when the answer was chosen, lag included.
            episode.graded_through = episode.telemetry.graded_through(episode.step)
            episode.graded_severity = world.severity(episode.graded_through)
            severity_right = action.severity == episode.graded_severity
            episode.declared_severity = action.severity
            said = f" with severity {action.severity}"
        else:
            declared, severity_right, said = frozenset(action.targets), False, ""
        episode.ledger.declare(declared, severity_right)
        return f"Declared: {', '.join(sorted(declared))}{said}."

    @staticmethod
    def _finish(episode: _Episode) -> None:
        episode.done = True
        outcome = _outcome(episode)
        episode.score, episode.breakdown = scoring.final_score(outcome)
        if episode.task.held_out:
            return  # the postmortem tells the incident's answers, which must stay with the host
        episode.postmortem = scoring.postmortem(_debrief(episode, outcome, episode.breakdown))

    def _observe(self, message: str, reward: float, error: str | None = None) -> Observation:
        episode = self._episode
        assert episode is not None
        episode.paid.append(reward)
        incident, task = episode.world.incident, episode.task
        alerts = episode.telemetry.alerts(episode.step)
        if alerts is not episode.paged:
            # Pages are seen facts (quoting them dilutes nothing) but a view of no service: they earn nothing.
            episode.paged = alerts
            episode.ledger.observe(partial(_paged_text, alerts), frozenset())
        dashboard = episode.telemetry.dashboard(episode.step) if task.dashboard else {}
        if dashboard and dashboard != episode.dashboard:
            # The dashboard is seen like the pages: quoting it dilutes nothing and earns nothing.
            episode.dashboard = dashboard
            episode.ledger.observe(partial(_dashboard_text, dashboard), frozenset())
        views = episode.views
        observation = Observation(
            task_id=task.id,
            incident_id=incident.id,
            title=f"[{alerts[0].level}] {alerts[0].service}: {alerts[0].summary}" if alerts else "No alert firing",
            services=incident.names,
            topology=episode.topology,
            alerts=alerts,
            visible_logs=views.get("logs", {}),
            visible_metrics=episode.metrics,
            visible_health=views.get("health", {}),
            visible_deploys=views.get("deploys", {}),
            visible_db=views.get("db", {}),
            visible_traces=views.get("traces", {}),
            as_of=episode.as_of,
            step_count=episode.step,
            max_steps=task.max_steps,
            clock=clock_text(episode.world, episode.step),
            sla_minutes_left=max(0, task.sla_minutes - STEP_MINUTES * episode.step),
            message=message,
            available_actions=list(task.actions),
            terminal_actions=list(task.ends_on),
            dashboard=dashboard,
            last_diagnostic=episode.diagnostic,
            action_history=list(episode.history),
            last_action_error=error,
            score=episode.score,
            breakdown=episode.breakdown,
            done=episode.done,
            reward=reward,
            postmortem=episode.postmortem,
            metadata={
                "episode_id": episode.episode_id,
                **({} if episode.shown_seed is None else {"seed": episode.shown_seed}),
                "reward_mode": episode.reward_mode,
                # Rounded as each reward is (without `rounded`'s -0.0 to 0.0: a sum can land just below 0).
                "cumulative_reward": round_to(sum(episode.paid), scoring.REWARD_DIGITS),
            },
        )
        self._last = observation
        return observation


def _outcome(episode: _Episode) -> scoring.Outcome:
    """The episode as its score is computed from it, now."""
    world, task = episode.world, episode.task
    return scoring.Outcome(
        grading=task.grading,
        roots=world.root_causes,
        steps=episode.step,
        max_steps=task.max_steps,
        ledger=episode.ledger,
        fixed=scoring.fixed_roots(world),
        restored=world.restored(),
    )


def _reward(episode: _Episode) -> float:
    """What the step just taken pays: the score at the end in final mode (0 before), the change of the
    potential in dense mode (which ends at the score)."""
    if episode.reward_mode == "final":
        return episode.score if episode.score is not None else 0.0
    potential = episode.score if episode.score is not None else scoring.potential(_outcome(episode))
    return episode.ledger.pay(potential)


def _debrief(episode: _Episode, outcome: scoring.Outcome, breakdown: dict[str, float]) -> scoring.Debrief:
    """An ended episode's outcome beside the incident's truth, for its postmortem."""
    world, task = episode.world, episode.task
    graded, severity = episode.graded_through, episode.graded_severity
    if graded is None:  # no severity declared: the one an answer now would be graded on
        graded = episode.telemetry.graded_through(episode.step + 1)
        severity = world.severity(graded) if task.grades_severity else None
    return scoring.Debrief(
        outcome=outcome,
        breakdown=breakdown,
        faults=tuple(
            scoring.RootFault(f.service, f.type, (FAULTS[f.type].fix, *FAULTS[f.type].acceptable))
            for f in world.incident.faults
        ),
        live=tuple(sorted({f.service for f in world.incident.faults if world.fault_runs(f.service, episode.step)})),
        red_herrings=tuple(f"{d.kind} on {d.service}" for d in world.incident.distractions),
        severity=severity if task.grades_severity else None,
        severity_basis=_severity_basis(world, graded) if task.grades_severity else _NO_SEVERITY,
        declared_severity=episode.declared_severity,
    )


def _severity_basis(world: World, graded: int) -> str:
    """Why the severity graded is what it is: the worst user-facing impact up to the graded step, and the rubric."""
    impacts = [world.graded_impact(step) for step in range(graded + 1)]
    error_rate = max(impact[0] for impact in impacts)
    worst_latency = max(impact[1] for impact in impacts)
    at_risk = world.data_at_risk(graded)
    return (
        f"worst user-facing impact from the page to {clock_text(world, graded)} (the last minute the "
        f"metrics had shown when the answer was chosen; a remedy's own disruption (pods rolling) not counted): "
        f"error rate {error_rate:.1%}, p99 {worst_latency:.0f} ms"
        f"{'; a system of record refused or lost writes' if at_risk else ''}. {_RUBRIC}"
    )


# The rubric as a severity basis states it: the same for every episode, so written once.
_RUBRIC = (
    f"Rubric: P0 at error rate >= {P0_ERROR_RATE:.0%} or p99 >= {P0_LATENCY_MS:.0f} ms or writes of record lost; "
    f"P1 at >= {P1_ERROR_RATE:.0%} or >= {P1_LATENCY_MS:.0f} ms; otherwise P2."
)


def _show(episode: _Episode, look: Look) -> None:
    """Put a look in the observation, stamped with the minute it was taken."""
    if look.metrics is not None:
        episode.metrics = {**episode.metrics, look.service: look.metrics}
    else:
        # Views are replaced, never mutated, when something new is seen: safe to share.
        episode.views[look.view] = {**episode.views.get(look.view, {}), look.service: look.text}
    stamps = episode.as_of.get(look.view, {})
    episode.as_of = {**episode.as_of, look.view: {**stamps, look.service: minute(episode.world, look.step)}}


def _paged_text(alerts: list[Alert]) -> str:
    return " ".join(f"{a.service} {a.summary}" for a in alerts)


def _dashboard_text(dashboard: dict[str, str]) -> str:
    return " ".join(f"{name} {text}" for name, text in dashboard.items())


def _metrics_text(look: Look) -> str:
    """A metrics view as seen: it shows its minute-by-minute history too, and every figure in it was seen."""
    return f"{look.text} {_METRICS_TEXT.encode(look.metrics).decode()}"


def _reachable(world: World, service: str, depth: int) -> set[str]:
    found: set[str] = set()
    frontier = [service]
    for _ in range(depth):
        frontier = [e.dep for name in frontier for e in world.plan.by_name[name].edges]
        found.update(frontier)
    return found


def _digest(look: Look) -> str:
    """A neutral digest of what a view showed: counts and values, never a conclusion."""
    lines = look.text.splitlines()
    if look.view == "logs":
        lines = [line for line in lines if not line.startswith("(")]  # a shipper's note is no log line
        seen = [level(line) for line in lines]
        counts = {lvl: seen.count(lvl) for lvl in LOUD_LEVELS}
        shown = ", ".join(f"{n} {lvl}" for lvl, n in counts.items() if n)
        return f"{len(lines)} lines in the last {LOG_WINDOW_S} s" + (f" ({shown})" if shown else "")
    if look.view in ("deploys", "traces"):
        return f"{len(lines)} lines"
    return lines[0] if lines else "no output"


def _record(step: int, action: Action, name: str, refused: bool) -> ActionRecord:
    return ActionRecord(
        step=step,
        action=name,
        target=getattr(action, "target", None),
        targets=list(getattr(action, "targets", None) or getattr(action, "additional_targets", None) or []),
        severity=getattr(action, "severity", None),
        refused=refused,
    )


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
