"""How faults and red herrings unfold over time: a fault builds up before the page, starts, worsens on
schedule and yields to its remedies; a red herring shows from its onset on, adding real signals that
do not reach users."""

from __future__ import annotations

import msgspec

from ..faults import FAULTS, FaultType
from ..herrings import HERRINGS, MINOR_CPU_SHARE, MINOR_ERROR_SHARE, minor_fault
from ..incidents import Distraction, FaultSpec, Incident
from .draws import spread, unit
from .simulation import SideEffect

# Minutes of history before the page that metrics keep.
HISTORY_MINUTES = 12
# Relief from a palliative remedy lasts this many steps at about this share of the fault's strength.
RELIEF_STEPS = 2
RELIEF_SHARE = 0.3


def fault_lead(incident: Incident, spec: FaultSpec, index: int) -> int:
    low, high = FAULTS[spec.type].lead
    return spec.lead if spec.lead is not None else low + int(unit(incident.id, index, "lead") * (high - low + 1))


class FaultCourse(msgspec.Struct):
    """One fault of an incident over time, and the remedies that changed it. A Struct rather than a
    dataclass: every world builds one per fault, and a dataclass's __init__ runs as Python."""

    spec: FaultSpec
    kind: FaultType
    lead: int
    # The share of its strength a fixed fault keeps over the minute its fix lands in; none after it,
    # so its lines, events, failing requests and metrics end together (telemetry ends its lines at the fix).
    recovery: float
    healed_at: int | None = None
    relief: tuple[int, int] | None = None

    def strength(self, step: int) -> float:
        return self._course(step, remedied=True)

    def demand(self, step: int) -> float:
        """The strength of the extra requests the fault brings (its `load`): they come from outside
        the service, so no remedy of the service ends them; shedding turns them away where they arrive."""
        return self._course(step, remedied=False)

    def _course(self, step: int, remedied: bool) -> float:
        spec = self.spec
        if step < spec.onset:
            if spec.onset > 0 or step < -self.lead:
                return 0.0
            # Building up before the page.
            return spec.intensity * (step + self.lead + 1) / (self.lead + 1)
        worse = spec.intensify_at is not None and step >= spec.intensify_at
        if not remedied:
            return max(spec.intensity, spec.peak) if worse else spec.intensity
        if worse and self.healed_at is not None and self.healed_at <= (spec.intensify_at or 0):
            worse = False
        strength = max(spec.intensity, spec.peak) if worse else spec.intensity
        if self.healed_at is not None and step >= self.healed_at:
            since = step - self.healed_at
            strength *= self.recovery if since == 0 else 0.0
        if self.relief is not None and self.relief[0] <= step < self.relief[1]:
            strength *= RELIEF_SHARE
        return strength


def fault_courses(incident: Incident) -> list[FaultCourse]:
    return [
        FaultCourse(
            spec, FAULTS[spec.type], fault_lead(incident, spec, index), spread(0.35, 0.6, incident.id, index, "r1")
        )
        for index, spec in enumerate(incident.faults)
    ]


def distraction_strength(distraction: Distraction, incident_id: str, index: int) -> float:
    if distraction.strength is not None:
        return distraction.strength
    return spread(0.3, 1.0, incident_id, index, distraction.kind, "strength")


def distraction_onset(incident_id: str, index: int) -> int:
    """Minutes before the page a red herring began (at least one: every red herring shows at the page):
    drawn like a fault's lead, so onsets overlap."""
    return 1 + int(unit(incident_id, index, "onset") * 14)


def pre_incident(incident: Incident) -> int:
    """The last minute before anything of the incident (a fault building up, a red herring) began, or
    before the history, whichever is earlier: what was firing then has been firing for hours."""
    onsets = [-HISTORY_MINUTES]
    onsets += [-fault_lead(incident, fault, index) for index, fault in enumerate(incident.faults)]
    onsets += [-distraction_onset(incident.id, index) for index in range(len(incident.distractions))]
    return min(onsets) - 1


# A red herring with side effects: (distraction, first step it shows, strength).
SideWork = tuple[Distraction, int, float]


def side_work(incident: Incident) -> tuple[SideWork, ...]:
    return tuple(
        (d, -distraction_onset(incident.id, index), distraction_strength(d, incident.id, index))
        for index, d in enumerate(incident.distractions)
        if HERRINGS[d.kind].side_effects
    )


def background_error(distraction: Distraction, strength: float) -> float:
    """The error rate a red herring fails its service's background work with (a job's runs, never a
    request): side work failing, or a minor fault's; 0 for a herring that fails nothing."""
    herring = HERRINGS[distraction.kind]
    fault = minor_fault(distraction.kind, distraction.fault)
    if fault is not None:
        return fault.error_rate * MINOR_ERROR_SHARE * strength
    if herring.side_errors is not None:
        return herring.side_errors[0] + herring.side_errors[1] * strength
    return 0.0


def side_effects(side: tuple[SideWork, ...], step: int) -> dict[str, SideEffect]:
    """CPU and background error rates that red herrings add, by service, with a minor fault's share of
    those errors and how its work fails."""
    found: dict[str, SideEffect] = {}
    for d, start, strength in side:
        if step < start:
            continue
        cpu, error, minor, mode = found.get(d.service, (0.0, 0.0, 0.0, "error"))
        herring = HERRINGS[d.kind]
        if herring.busy_cpu is not None:
            cpu = max(cpu, herring.busy_cpu[0] + herring.busy_cpu[1] * strength)
        failing = background_error(d, strength)
        fault = minor_fault(d.kind, d.fault)
        if fault is not None:
            # A real fault, weak and in background work: its own signals show, no request meets it.
            minor = max(minor, failing)
            mode = fault.failure if minor > 0.0 else mode
            cpu = max(cpu, (fault.cpu_pct or 0.0) * MINOR_CPU_SHARE * strength)
        # Failures of background work (a batch job, a partner webhook) that no request waits on.
        error = max(error, failing)
        found[d.service] = (cpu, error, minor, mode)
    return found
