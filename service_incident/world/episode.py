"""The world of one episode: the incident's plan, the remedies applied to it, and its states by step.

Time advances one step per action: faults build up before the page, start, worsen on schedule, and
respond to remediation through the same model. The world answers what grading needs (severity,
impact, whether service is restored); agents see it only through telemetry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

import msgspec

from ..faults import FaultType, Remedy
from ..herrings import HERRINGS
from ..incidents import Incident
from ..models import Severity
from .course import RELIEF_STEPS, FaultCourse, SideWork, fault_courses, side_effects, side_work
from .plan import Plan, plan_of
from .rubric import P1_ERROR_RATE, P1_LATENCY_MS, SEVERITIES, rubric
from .simulation import Minute, ServiceState, SideEffect, reached, simulate
from .steps import Steps, incident_steps, own_steps

Outcome = Literal["heals", "relief", "disruption", "no_effect"]

# An escalation is acted on by the provider it pages this many steps later, if the fault is theirs.
ESCALATION_DELAY = 1
# How many times its size a scale-up makes a service (its replicas and resources doubled).
SCALE_UP_FACTOR = 2.0
# The share of a scale-up's added capacity serving during the step it is ordered in.
SCALE_JOINING = 0.5


class Remediation(msgspec.Struct, frozen=True, gc=False):
    step: int
    remedy: Remedy
    service: str
    outcome: Outcome


class World:
    """The simulated system of one episode, at `step` (0 is the page; history runs before it).

    `faultless` is the same incident's world without its faults and never remedied, if the caller has it
    (a generator's checks do): a service no fault or remedy touches is in its state there, not simulated
    again. `shared` says whether its untouched states go to the store every episode of the incident
    shares: not for a world no episode plays (a calm world, a fault alone)."""

    # A class of its own rather than a dataclass: the generator builds dozens of worlds per incident, and
    # a dataclass's __init__ runs as Python even where this module is compiled.
    __slots__ = (
        "_cache",
        "_capacity",
        "_restarts",
        "_runs",
        "_shed",
        "_side",
        "_side_settled",
        "_strengths",
        "_undisrupted",
        "faultless",
        "history",
        "incident",
        "plan",
        "step",
    )

    def __init__(self, incident: Incident, *, faultless: World | None = None, shared: bool = True) -> None:
        self.incident = incident
        self.step = 0
        self.history: list[Remediation] = []
        self.plan: Plan = plan_of(incident)  # cached: every world of one wiring shares it
        self.faultless = faultless
        self._runs: list[FaultCourse] = fault_courses(incident)
        self._capacity: dict[str, list[tuple[int, float]]] = {}
        self._shed: dict[str, int] = {}
        self._restarts: dict[str, set[int]] = {}
        self._side: tuple[SideWork, ...] = side_work(incident)
        # Every red herring shows from the page on (each begins before it), so their side effects are the
        # same on every step from then: kept from the first such minute simulated.
        self._side_settled: dict[str, SideEffect] | None = None
        self._cache: Steps = incident_steps(incident) if shared else own_steps()
        # States of steps with restarts as they would be without the restarts' own disruption, for grading.
        self._undisrupted: dict[int, dict[str, ServiceState]] = {}
        # Faults' strengths by (step, remedies applied): only a remedy changes a fault's course.
        self._strengths: dict[tuple[int, int], tuple[float, ...]] = {}

    @property
    def states(self) -> dict[str, ServiceState]:
        return self.states_at(self.step)

    def states_at(self, step: int) -> dict[str, ServiceState]:
        states = self._cache.get(step)
        if states is None:
            states = self._cache[step] = self._simulated(step)
        return states

    def states_of(self, step: int, reach: frozenset[str]) -> Mapping[str, ServiceState]:
        """The states at a step of the services in `reach`, which holds all they call (`Plan.reach`): every
        service's if simulated already, else only these, simulated and not kept (a check that reads a few
        services spares the others)."""
        states = self._cache.get(step)
        if states is None:
            states = self._simulated(step, reach)
        return states

    def _simulated(self, step: int, only: frozenset[str] | None = None) -> dict[str, ServiceState]:
        """The states at a step (of the services in `only`, if given). A minute no fault, surge or remedy
        reaches (most of the history, before the faults build up) is the faultless world's, if that world
        has simulated it: its states are taken, not simulated again."""
        minute = self._minute(step, disrupt=True)
        faultless = self._faultless_at(step)
        if faultless is not None and not reached(minute):
            return faultless
        return simulate(self.plan, minute, only=only, faultless=faultless)

    def _faultless_at(self, step: int) -> dict[str, ServiceState] | None:
        """The faultless world's states at a step if it has simulated them: simulating a step of it only
        to spare this world's red herrings' services would cost more than it spares."""
        return None if self.faultless is None else self.faultless._cache.get(step)

    def advance(self) -> None:
        self.step += 1

    @property
    def root_causes(self) -> frozenset[str]:
        return frozenset(fault.service for fault in self.incident.faults)

    def capacity(self, service: str, step: int | None = None) -> float:
        """How many times its original size a service has been scaled to, at a step (now by default)."""
        at = self.step if step is None else step
        factor = 1.0
        for since, times in self._capacity.get(service, ()):
            if since <= at:
                # New replicas join over the step they are added in, as a fix takes effect over steps.
                factor *= times if since < at else 1.0 + (times - 1.0) * SCALE_JOINING
        return factor

    def restarts(self, service: str, step: int | None = None) -> list[int]:
        at = self.step if step is None else step
        return sorted(s for s in self._restarts.get(service, ()) if s <= at)

    def rolled_back(self, service: str, step: int | None = None) -> bool:
        at = self.step if step is None else step
        return any(e.service == service and e.remedy == "rollback" and e.step <= at for e in self.history)

    def remedied(self, remedy: Remedy, service: str, step: int | None = None) -> int | None:
        """The step a remedy was last applied to a service, up to a step (now by default)."""
        at = self.step if step is None else step
        steps = [e.step for e in self.history if e.service == service and e.remedy == remedy and e.step <= at]
        return max(steps) if steps else None

    def change_shipped(self, service: str) -> bool:
        """Whether a recent change on this service can be rolled back."""
        if self.rolled_back(service):
            return False
        return any(run.spec.service == service and run.kind.change for run in self._runs) or any(
            HERRINGS[d.kind].ships and d.service == service for d in self.incident.distractions
        )

    def strengths(self, step: int) -> tuple[float, ...]:
        """Every fault's strength at a step, to two places: what a view's content follows besides noise."""
        key = (step, len(self.history))
        found = self._strengths.get(key)
        if found is None:
            found = self._strengths[key] = tuple(round(run.strength(step), 2) for run in self._runs)
        return found

    def demands(self, step: int) -> tuple[float, ...]:
        """The strength of every fault's extra requests at a step, which its fix does not end."""
        return tuple(round(run.demand(step), 2) for run in self._runs if run.kind.load)

    def healed_at(self, index: int) -> int | None:
        """The step the fix of the incident's fault `index` took effect (an escalation's a step late)."""
        return self._runs[index].healed_at

    def fault_runs(self, service: str, step: int) -> list[tuple[FaultType, float]]:
        """The faults live on a service at a step, with their strengths."""
        return [(run.kind, s) for run in self._runs if run.spec.service == service and (s := run.strength(step)) > 0]

    def remediate(self, remedy: Remedy, service: str) -> Outcome:
        """Apply a remedy now. The outcome is the world's truth, for grading; agents see telemetry."""
        step = self.step
        outcome: Outcome = "no_effect"
        for run in self._runs:
            if run.spec.service != service or run.healed_at is not None:
                continue
            if remedy == run.kind.fix or remedy in run.kind.acceptable:
                run.healed_at = step + (ESCALATION_DELAY if remedy == "escalate" else 0)
                outcome = "heals"
            elif remedy in run.kind.relief and outcome != "heals":
                run.relief = (step, step + RELIEF_STEPS)
                outcome = "relief"
        if remedy == "restart":
            self._restarts.setdefault(service, set()).add(step)
            if outcome == "no_effect":
                outcome = "disruption"
        elif remedy == "scale_up":
            self._capacity.setdefault(service, []).append((step, SCALE_UP_FACTOR))
        elif remedy == "shed_load":
            self._shed.setdefault(service, step)
        self._cache.forget_from(step)
        for later in [s for s in self._undisrupted if s >= step]:
            del self._undisrupted[later]
        self.history.append(Remediation(step, remedy, service, outcome))
        return outcome

    def restored(self) -> bool:
        """Every fault's fix in effect and every user-facing service back within its objectives."""
        if any(run.healed_at is None or run.healed_at > self.step for run in self._runs):
            return False
        # Side work failing (a red herring's batch job or webhook) does not keep users from being served.
        error_rate, latency = self.user_facing_impact()
        return error_rate < P1_ERROR_RATE and latency < P1_LATENCY_MS

    def user_facing_impact(self, step: int | None = None) -> tuple[float, float]:
        """Worst error rate and worst p99 latency of user-facing services at a step (now by default): what
        their metrics show, the quantities of the rubric."""
        return _impact(self.plan, self.states_at(self.step if step is None else step))

    def graded_impact(self, step: int) -> tuple[float, float]:
        """The incident's user-facing impact at a step, for the severity: what users meet there, less
        the brief disruption of the responder's own restarts (a remedy the responder chose is not the
        incident's impact). Faults that worsen, and faults a remedy did not touch, still count."""
        if not any(step in steps for steps in self._restarts.values()):
            return self.user_facing_impact(step)
        states = self._undisrupted.get(step)
        if states is None:
            states = self._undisrupted[step] = simulate(self.plan, self._minute(step, disrupt=False))
        return _impact(self.plan, states)

    def data_at_risk(self, through: int) -> bool:
        nodes = self.plan.by_name
        return any(
            run.spec.onset <= through and run.kind.data_at_risk(nodes[run.spec.service].kind) for run in self._runs
        )

    def severity(self, through: int | None = None) -> Severity:
        """The rubric applied to the incident's worst user-facing impact from the page up to step
        `through` (now by default), restarts' own disruption left out (`graded_impact`)."""
        last = self.step if through is None else through
        at_risk = self.data_at_risk(last)
        return max((rubric(*self.graded_impact(step), at_risk) for step in range(last + 1)), key=SEVERITIES.index)

    def _minute(self, step: int, disrupt: bool) -> Minute:
        """The world's conditions at a step: its live faults, red herrings, surges, shedding, restarts and
        scale-ups; with `disrupt` false, as if its restarts disrupted nothing."""
        live: dict[str, list[tuple[FaultType, float]]] = {}
        load: dict[str, float] = {}
        fanout: dict[tuple[str, str], float] = {}
        for run in self._runs:
            strength = run.strength(step)
            if strength > 0.0:
                live.setdefault(run.spec.service, []).append((run.kind, strength))
                if run.kind.fanout:
                    for edge in self.plan.by_name[run.spec.service].edges:
                        if self.plan.by_name[edge.dep].kind == run.kind.through:
                            key = (run.spec.service, edge.dep)
                            fanout[key] = fanout.get(key, 0.0) + run.kind.fanout * strength
            if run.kind.load and (demand := run.demand(step)) > 0.0:
                load[run.spec.service] = load.get(run.spec.service, 0.0) + run.kind.load * demand
        shed = {
            name: 1.2 * self.plan.healthy_rps[name] * self.capacity(name, step)
            for name, since in self._shed.items()
            if since <= step
        }
        restarting = {name for name, steps in self._restarts.items() if step in steps} if disrupt else set()
        scaled = {name: self.capacity(name, step) for name in self._capacity}
        if step < 0:
            side = side_effects(self._side, step)
        else:
            if self._side_settled is None:
                self._side_settled = side_effects(self._side, step)
            side = self._side_settled
        return Minute(step, live, side, load, shed, restarting, scaled, fanout)


def _impact(plan: Plan, states: dict[str, ServiceState]) -> tuple[float, float]:
    """The worst error rate and p99 of the user-facing services: a loop rather than two max() over a
    generator each, since grading and the generator's checks read it at every step they judge."""
    error_rate = latency = -math.inf
    for name in plan.facing:
        state = states[name]
        if state.error_rate > error_rate:
            error_rate = state.error_rate
        if state.p99_ms > latency:
            latency = state.p99_ms
    return error_rate, latency
