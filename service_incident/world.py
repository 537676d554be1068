"""The world model: the true state of every service over time, derived from an incident.

Faults set the state of their own service; failures then propagate to callers in dependency order
(a caller fails the share of its calls that error or time out, weighted by how much of its work
depends on that callee). Red herrings add real signals that do not propagate. Time advances one
step per action: faults start, worsen on schedule, and respond to remediation (the right fix heals
the root and its dependents recover over the next steps; a wrong one costs). The state is
noise-free; telemetry renders it with the episode's noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from .faults import FAULTS, FaultType, Remedy
from .incidents import FaultSpec, Incident
from .models import Severity
from .topology import KINDS, KindProfile, dependency_order

Health = Literal["ok", "degraded", "down"]
Outcome = Literal["heals", "relief", "disruption", "no_effect"]

# A service this much slower than it is when healthy starts timing its callers out; the share of
# calls that time out grows until TIMEOUT_SPAN past it.
SLOWDOWN_TOLERANCE_MS = 240.0
TIMEOUT_SPAN_MS = 2500.0
MAX_TIMEOUT_SHARE = 0.9
# A caller waits at most this long on one dependency before giving up.
CALL_DEADLINE_MS = 2000.0
# A noisy neighbour burns CPU without failing anything.
NOISY_NEIGHBOUR_CPU = 93.0
FLAKY_ERROR_RATE = 0.3

# After the right fix the fault's strength falls through these shares, one per step, then to zero.
RECOVERY = (0.5, 0.2)
# An escalation is acted on by the owning team this many steps later.
ESCALATION_DELAY = 1
# Relief from a palliative remedy lasts this many steps at this share of the fault's strength.
RELIEF_STEPS = 2
RELIEF_SHARE = 0.3
# Restarting a service fails this share of its requests during the step it restarts in.
RESTART_DISRUPTION = 0.5

# The severity rubric, from user-facing impact (README documents these very numbers).
P0_ERROR_RATE = 0.35
P0_LATENCY_MS = 5000.0
P1_ERROR_RATE = 0.05
P1_LATENCY_MS = 1500.0


@dataclass(frozen=True, slots=True)
class ServiceState:
    name: str
    latency_ms: float
    error_rate: float
    cpu_pct: float
    memory_pct: float
    health: Health
    # The share of calls to this service that fail from a caller's point of view.
    call_failure: float
    # Upstreams whose failures this service suffers, with the share of its calls they fail.
    failing_upstreams: tuple[tuple[str, float], ...]
    # How strongly each of its own faults currently shows (0 when healed or not yet started).
    fault_strength: float


_Node = tuple[str, KindProfile, tuple[tuple[str, float], ...]]


@lru_cache(maxsize=1024)
def _plan(wiring: tuple[tuple[str, str, tuple[str, ...]], ...]) -> tuple[tuple[_Node, ...], dict[str, float]]:
    """What a simulation needs per service in dependency order, and each service's healthy latency.

    Cached by wiring: the generator tries several fault strengths on one topology.
    """
    kinds = {name: kind for name, kind, _ in wiring}
    order = dependency_order({name: deps for name, _, deps in wiring})
    depends = {name: deps for name, _, deps in wiring}
    nodes = tuple(
        (name, KINDS[kinds[name]], tuple((d, KINDS[kinds[d]].caller_weight) for d in depends[name])) for name in order
    )
    # Callers time out on a service that is slower than usual, not on one that is deep.
    healthy: dict[str, float] = {}
    for name, profile, deps in nodes:
        shares = [(1.0 / len(deps) if profile.routes else weight) for _, weight in deps]
        healthy[name] = profile.latency_ms + sum(
            min(healthy[d], CALL_DEADLINE_MS) * share for (d, _), share in zip(deps, shares, strict=True)
        )
    return nodes, healthy


@dataclass(slots=True)
class _FaultRun:
    spec: FaultSpec
    kind: FaultType
    healed_at: int | None = None
    relief: tuple[int, int] | None = None

    def strength(self, step: int) -> float:
        spec = self.spec
        if step < spec.onset:
            return 0.0
        worse = spec.intensify_at is not None and step >= spec.intensify_at
        if worse and self.healed_at is not None and self.healed_at <= spec.intensify_at:
            worse = False
        strength = max(spec.intensity, spec.peak) if worse else spec.intensity
        if self.healed_at is not None and step >= self.healed_at:
            since = step - self.healed_at
            strength *= RECOVERY[since] if since < len(RECOVERY) else 0.0
        if self.relief is not None and self.relief[0] <= step < self.relief[1]:
            strength *= RELIEF_SHARE
        return strength


@dataclass(frozen=True, slots=True)
class Remediation:
    step: int
    remedy: Remedy
    service: str
    outcome: Outcome


@dataclass(slots=True)
class World:
    """The simulated system of one episode, at `step`."""

    incident: Incident
    step: int = 0
    history: list[Remediation] = field(default_factory=list)
    _runs: list[_FaultRun] = field(default_factory=list)
    _order: tuple[_Node, ...] = ()
    _capacity: dict[str, float] = field(default_factory=dict)
    _restarts: dict[str, set[int]] = field(default_factory=dict)
    _rolled_back: set[str] = field(default_factory=set)
    _cache: dict[int, dict[str, ServiceState]] = field(default_factory=dict)
    _healthy_latency: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._runs = [_FaultRun(spec, FAULTS[spec.type]) for spec in self.incident.faults]
        wiring = tuple((s.name, s.kind, tuple(s.depends_on)) for s in self.incident.services)
        self._order, self._healthy_latency = _plan(wiring)

    @property
    def states(self) -> dict[str, ServiceState]:
        return self.states_at(self.step)

    def states_at(self, step: int) -> dict[str, ServiceState]:
        if step not in self._cache:
            # Most steps change nothing: reuse the previous step's states when no input moved.
            same = step > 0 and self._inputs(step) == self._inputs(step - 1)
            self._cache[step] = self.states_at(step - 1) if same else self._simulate(step)
        return self._cache[step]

    def _inputs(self, step: int) -> tuple[object, ...]:
        """Everything a simulation at `step` reads besides the wiring."""
        restarting = tuple(sorted(name for name, steps in self._restarts.items() if step in steps))
        remedied = sum(1 for event in self.history if event.step <= step)
        return (*(run.strength(step) for run in self._runs), restarting, remedied)

    def advance(self) -> None:
        self.step += 1

    @property
    def root_causes(self) -> frozenset[str]:
        return frozenset(fault.service for fault in self.incident.faults)

    def capacity(self, service: str) -> float:
        """How many times its original size a service has been scaled to."""
        return self._capacity.get(service, 1.0)

    def deployed(self, service: str) -> bool:
        """Whether a recent change on this service can be rolled back."""
        if service in self._rolled_back:
            return False
        if any(run.spec.service == service and run.kind.change for run in self._runs):
            return True
        return any(d.kind == "recent_deploy" and d.service == service for d in self.incident.distractions)

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
        if remedy == "restart" and outcome != "heals":
            self._restarts.setdefault(service, set()).add(step)
            outcome = "disruption" if outcome == "no_effect" else outcome
        elif remedy == "scale_up":
            self._capacity[service] = self._capacity.get(service, 1.0) * 2.0
        elif remedy == "rollback" and self.deployed(service):
            self._rolled_back.add(service)
        # The future changed: forget what was simulated from now on.
        self._cache = {s: states for s, states in self._cache.items() if s < step}
        self.history.append(Remediation(step, remedy, service, outcome))
        return outcome

    def restored(self) -> bool:
        """Every fault's fix in effect and every user-facing service back within its objectives."""
        if any(run.healed_at is None or run.healed_at > self.step for run in self._runs):
            return False
        error_rate, latency = self.user_facing_impact()
        return error_rate < P1_ERROR_RATE and latency < P1_LATENCY_MS

    def user_facing_impact(self, step: int | None = None) -> tuple[float, float]:
        """Worst error rate and worst p99 latency any user sees at a step (now by default)."""
        states = self.states_at(self.step if step is None else step)
        facing = [states[s.name] for s in self.incident.services if s.user_facing]
        return max(s.error_rate for s in facing), max(s.latency_ms for s in facing)

    def severity(self, through: int | None = None) -> Severity:
        """The rubric applied to the worst impact users have seen up to step `through` (now by default).

        P0 a user-facing capability down or data at risk, P1 major degradation, P2 minor.
        """
        last = self.step if through is None else through
        at_risk = any(run.kind.data_at_risk and run.spec.onset <= last for run in self._runs)
        return max((rubric(*self.user_facing_impact(step), at_risk) for step in range(last + 1)), key=SEVERITIES.index)

    def _simulate(self, step: int) -> dict[str, ServiceState]:
        incident = self.incident
        noisy = {d.service for d in incident.distractions if d.kind == "noisy_neighbour"}
        flaky = {d.service for d in incident.distractions if d.kind == "flaky_errors"}
        live: dict[str, list[tuple[FaultType, float]]] = {}
        for run in self._runs:
            strength = run.strength(step)
            if strength > 0.0:
                live.setdefault(run.spec.service, []).append((run.kind, strength))
        healthy_latency = self._healthy_latency
        restarting = {name for name, steps in self._restarts.items() if step in steps}
        capacities = self._capacity
        states: dict[str, ServiceState] = {}
        for name, profile, deps in self._order:
            latency, cpu, memory = profile.latency_ms, profile.cpu_pct, profile.memory_pct
            own_error = silent_failure = strength_total = 0.0
            health: Health | None = None
            for kind, strength in live.get(name, ()) if live else ():
                strength_total += strength
                own_error = 1.0 - (1.0 - own_error) * (1.0 - kind.error_rate * strength)
                silent_failure += kind.caller_failure * strength
                latency += kind.latency_ms * strength
                if kind.cpu_pct is not None:
                    cpu += (kind.cpu_pct - cpu) * strength
                if kind.memory_pct is not None:
                    memory += (kind.memory_pct - memory) * strength
                health = kind.health if strength >= 0.5 else "degraded"
            if restarting and name in restarting:
                own_error = 1.0 - (1.0 - own_error) * (1.0 - RESTART_DISRUPTION)
            capacity = capacities.get(name, 1.0) if capacities else 1.0
            if capacity != 1.0:
                cpu = profile.cpu_pct + (cpu - profile.cpu_pct) / capacity
            failing: list[tuple[str, float]] = []
            upstream_success = 1.0
            upstream_latency = 0.0
            routed = 1.0 / len(deps) if profile.routes and deps else 0.0
            for dep, weight in deps:
                upstream = states[dep]
                share = upstream.call_failure * weight
                waited = upstream.latency_ms if upstream.latency_ms < CALL_DEADLINE_MS else CALL_DEADLINE_MS
                if share > 0.0:
                    failing.append((dep, share))
                if routed:
                    upstream_success -= share * routed
                    upstream_latency += waited * routed
                else:
                    upstream_success *= 1.0 - share
                    upstream_latency += waited * weight
            latency += upstream_latency
            error_rate = 1.0 - (1.0 - own_error) * upstream_success
            if failing:
                cpu = min(99.0, cpu + 10.0 * (error_rate - own_error))
            # Callers time out on the share of calls slowed past their tolerance.
            slowdown = latency - healthy_latency[name] - SLOWDOWN_TOLERANCE_MS
            timeouts = 0.0 if slowdown <= 0.0 else min(MAX_TIMEOUT_SHARE, slowdown / TIMEOUT_SPAN_MS)
            call_failure = error_rate + silent_failure + timeouts
            if call_failure > 1.0:
                call_failure = 1.0
            if name in noisy:
                cpu = max(cpu, NOISY_NEIGHBOUR_CPU / capacity)
            reported_error = error_rate
            if name in flaky:
                # Failures on a side path (a batch job, a partner webhook) that callers never hit.
                reported_error = 1.0 - (1.0 - error_rate) * (1.0 - FLAKY_ERROR_RATE)
            states[name] = ServiceState(
                name,
                latency,
                reported_error,
                cpu,
                memory,
                health or _health(reported_error, latency, profile.latency_ms),
                call_failure,
                tuple(failing),
                strength_total,
            )
        return states


SEVERITIES: tuple[Severity, ...] = ("P2", "P1", "P0")


def rubric(error_rate: float, latency_ms: float, data_at_risk: bool) -> Severity:
    """The severity rubric: P0 a user-facing capability down or data at risk, P1 major degradation, P2 minor."""
    if data_at_risk or error_rate >= P0_ERROR_RATE or latency_ms >= P0_LATENCY_MS:
        return "P0"
    if error_rate >= P1_ERROR_RATE or latency_ms >= P1_LATENCY_MS:
        return "P1"
    return "P2"


def _health(error_rate: float, latency_ms: float, baseline_ms: float) -> Health:
    if error_rate >= 0.9:
        return "down"
    if error_rate >= P1_ERROR_RATE or latency_ms >= 3 * baseline_ms + 200:
        return "degraded"
    return "ok"
