"""The world model: the true state of every service, derived from an incident.

Faults set the state of their own service; failures then propagate to callers in dependency order
(a caller fails the share of its calls that error or time out, weighted by how much of its work
depends on that callee). Red herrings add real signals that do not propagate. The state is
noise-free; telemetry renders it with the episode's noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .faults import FAULTS
from .incidents import Incident
from .models import Severity
from .topology import KINDS, dependency_order

Health = Literal["ok", "degraded", "down"]

# A call slower than this starts timing out at the caller; the share grows until TIMEOUT_SPAN past it.
CALL_TIMEOUT_MS = 250.0
TIMEOUT_SPAN_MS = 2500.0
MAX_TIMEOUT_SHARE = 0.9
# A caller waits at most this long on one dependency before giving up.
CALL_DEADLINE_MS = 2000.0
# A noisy neighbour burns CPU without failing anything.
NOISY_NEIGHBOUR_CPU = 93.0
FLAKY_ERROR_RATE = 0.3

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


class World:
    """The simulated system of one episode."""

    def __init__(self, incident: Incident) -> None:
        self.incident = incident
        self.order = dependency_order({spec.name: spec.depends_on for spec in incident.services})
        self.states = self._simulate()

    def _simulate(self) -> dict[str, ServiceState]:
        incident = self.incident
        faults = {fault.service: fault for fault in incident.faults}
        noisy = {d.service for d in incident.distractions if d.kind == "noisy_neighbour"}
        flaky = {d.service for d in incident.distractions if d.kind == "flaky_errors"}
        states: dict[str, ServiceState] = {}
        for name in self.order:
            spec = incident.service(name)
            profile = KINDS[spec.kind]
            latency, cpu, memory = profile.latency_ms, profile.cpu_pct, profile.memory_pct
            own_error, silent_failure, health = 0.0, 0.0, "ok"
            fault = faults.get(name)
            if fault is not None:
                kind = FAULTS[fault.type]
                own_error = kind.error_rate * fault.intensity
                latency += kind.latency_ms * fault.intensity
                if kind.cpu_pct is not None:
                    cpu += (kind.cpu_pct - cpu) * fault.intensity
                if kind.memory_pct is not None:
                    memory += (kind.memory_pct - memory) * fault.intensity
                silent_failure = kind.caller_failure * fault.intensity
                health = kind.health
            success = 1.0 - own_error
            failing: list[tuple[str, float]] = []
            for dep in spec.depends_on:
                upstream = states[dep]
                share = upstream.call_failure * KINDS[incident.service(dep).kind].caller_weight
                if share > 0.0:
                    failing.append((dep, share))
                    success *= 1.0 - share
                latency += min(upstream.latency_ms, CALL_DEADLINE_MS) * KINDS[incident.service(dep).kind].caller_weight
            error_rate = 1.0 - success
            if failing:
                cpu = min(99.0, cpu + 10.0 * (error_rate - own_error))
            call_failure = min(1.0, error_rate + silent_failure + _timeout_share(latency))
            if name in noisy:
                cpu = max(cpu, NOISY_NEIGHBOUR_CPU)
            reported_error = error_rate
            if name in flaky:
                # Failures on a side path (a batch job, a partner webhook) that callers never hit.
                reported_error = 1.0 - (1.0 - error_rate) * (1.0 - FLAKY_ERROR_RATE)
            if fault is None:
                health = _health(reported_error, latency, profile.latency_ms)
            states[name] = ServiceState(
                name=name,
                latency_ms=latency,
                error_rate=reported_error,
                cpu_pct=cpu,
                memory_pct=memory,
                health=health,
                call_failure=call_failure,
                failing_upstreams=tuple(failing),
            )
        return states

    @property
    def user_facing_impact(self) -> tuple[float, float]:
        """Worst error rate and worst p99 latency any user sees."""
        facing = [self.states[s.name] for s in self.incident.services if s.user_facing]
        return max(s.error_rate for s in facing), max(s.latency_ms for s in facing)

    def severity(self) -> Severity:
        """The rubric: P0 a user-facing capability down or data at risk, P1 major degradation, P2 minor."""
        error_rate, latency = self.user_facing_impact
        at_risk = any(FAULTS[f.type].data_at_risk for f in self.incident.faults)
        if at_risk or error_rate >= P0_ERROR_RATE or latency >= P0_LATENCY_MS:
            return "P0"
        if error_rate >= P1_ERROR_RATE or latency >= P1_LATENCY_MS:
            return "P1"
        return "P2"

    @property
    def root_causes(self) -> frozenset[str]:
        return frozenset(fault.service for fault in self.incident.faults)


def _timeout_share(latency_ms: float) -> float:
    return min(MAX_TIMEOUT_SHARE, max(0.0, (latency_ms - CALL_TIMEOUT_MS) / TIMEOUT_SPAN_MS))


def _health(error_rate: float, latency_ms: float, baseline_ms: float) -> Health:
    if error_rate >= 0.9:
        return "down"
    if error_rate >= P1_ERROR_RATE or latency_ms >= 3 * baseline_ms + 200:
        return "degraded"
    return "ok"
