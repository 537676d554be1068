"""The red herring taxonomy: what each kind of real but unrelated signal does and where it may stand.

Like the fault taxonomy, every red herring is data: the services it may stand on, its side effects on
its service's state (CPU of a batch job, errors of a background job that fails, a weak fault of its
own in background work), the lines it writes, the page it leaves firing and the release it ships. The
generator places herrings by these rows (and redraws any draw whose herrings would hurt users, page
critically or warn other than chronically); the world and telemetry interpret them uniformly;
nothing here names an incident.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .faults import FAULTS, FaultType

HerringKind = Literal[
    "noisy_neighbour", "recent_deploy", "misleading_log", "flaky_errors", "stale_alert", "minor_fault"
]
# Where a herring may stand: any service (a root's included), any service users do not call directly
# (a root's included), any service that is not a root, a caller with a dependency that is not a root
# (the one it blames), or a service that is not a root with a fault type it can host.
Placement = Literal["anywhere", "internal", "bystander", "caller", "host"]
# How a herring writes its lines: side work in its technology's words (or its failing job's), blame of
# a dependency that is fine, or its minor fault's own lines.
Writing = Literal["side_work", "blame", "fault"]
# An effect that grows with a herring's strength: at strength s, base + slope * s.
Linear = tuple[float, float]

# How strongly a minor fault fails its service's background work and drives its CPU, against the
# fault's full effect at the herring's strength.
MINOR_ERROR_SHARE = 0.25
MINOR_CPU_SHARE = 0.8
# How strongly a minor fault writes its fault type's lines.
MINOR_STRENGTH = 0.4


@dataclass(frozen=True, slots=True)
class HerringType:
    """One kind of red herring."""

    name: HerringKind
    stands: Placement
    writes: Writing = "side_work"
    # Its own lines (busy side work adds those of its service's technology, see telemetry.phrases; a
    # failing job's are the job's, see telemetry.jobs).
    lines: tuple[str, ...] = ()
    # The CPU a batch job holds its service at, and the error rate of the background job that fails.
    busy_cpu: Linear | None = None
    side_errors: Linear | None = None
    # A weak fault of its own in background work (the distraction names its type, one `in_background`):
    # its signals show, no request meets it.
    minor_fault: bool = False
    # How often any service shows this side work as everyday noise, whether or not anything is wrong
    # with it: near the rate the herring adds, so the lines say little about which service is at fault.
    everyday: float = 0.0
    # A disk warning left firing from before the incident, and a release that a rollback undoes.
    stale_page: bool = False
    ships: bool = False

    @property
    def side_effects(self) -> bool:
        """Whether it changes its service's state, not only its telemetry."""
        return self.busy_cpu is not None or self.side_errors is not None or self.minor_fault


HERRINGS: Mapping[HerringKind, HerringType] = {
    herring.name: herring
    for herring in (
        HerringType(
            name="noisy_neighbour",
            stands="anywhere",
            lines=(
                "INFO batch job reindex-{hex:4} running, processed {int:10000:90000} rows",
                "INFO background compaction in progress ({int:20:80}% done)",
                "WARN cpu throttled for {int:10:40}% of the last period",
                "INFO nightly report generation started for {int:100:900} accounts",
            ),
            # Well below the CPU page (90%): a batch job keeps a service busy, it pages no one.
            busy_cpu=(55.0, 16.0),
            everyday=0.25,
        ),
        # A release's trace is its deploy history and its pods' age, not a line of its own.
        HerringType(name="recent_deploy", stands="bystander", ships=True),
        HerringType(
            name="misleading_log",
            stands="caller",
            writes="blame",
            lines=(
                '{level} req={{hex:8}} "{{endpoint}}" status=504 upstream={blamed} err="deadline exceeded after '
                '{deadline}ms"',
                "{level} slow response from upstream={blamed} rt={{int:300:900}}ms, retrying (attempt 2/3)",
                '{level} req={{hex:8}} "{{endpoint}}" status={status} upstream={blamed} err="{failure}"',
            ),
        ),
        # Its lines are those of the background job it fails (telemetry.jobs), named on every line.
        HerringType(name="flaky_errors", stands="internal", side_errors=(0.03, 0.4), everyday=0.2),
        HerringType(name="stale_alert", stands="bystander", stale_page=True),
        HerringType(name="minor_fault", stands="host", writes="fault", minor_fault=True),
    )
}


def minor_fault(kind: HerringKind, fault: str | None) -> FaultType | None:
    """The fault type a herring shows as a weak fault of its own, if it is one."""
    return FAULTS[fault] if fault is not None and HERRINGS[kind].minor_fault else None


def in_background(fault: FaultType) -> bool:
    """Whether a fault type can be a minor fault of background work alone: one that fails some of the
    work it hits (so a job's row shows it), crashes no serving container, loses no write of record and
    brings no requests, so no user request waits on it."""
    return fault.error_rate > 0.0 and fault.termination is None and not fault.loses_writes and not fault.load
