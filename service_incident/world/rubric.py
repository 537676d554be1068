"""The severity rubric, and the moment it is graded at: the worst user-facing impact from the page to
the answer, as the metrics showed it (docs/world.md).

Its own module, with no simulator in it: agents, prompts and tool schemas read the rubric without the
world model.
"""

from __future__ import annotations

from ..faults import RECORD_KINDS
from ..models import Severity

P0_ERROR_RATE = 0.35
P0_LATENCY_MS = 5000.0
P1_ERROR_RATE = 0.05
P1_LATENCY_MS = 1500.0
SEVERITIES: tuple[Severity, ...] = ("P2", "P1", "P0")
# The moment severity is graded at: `World.severity` through the last minute the metrics had shown in
# the observation the answer was chosen from (`Telemetry.graded_through`).
SEVERITY_MOMENT = (
    "Severity is graded on the worst user-facing impact between the page and the answer, as the metrics "
    "showed it in the observation the answer was chosen from (they may trail the world by a minute): a peak "
    "that has passed still counts, impact after that does not, and a remedy's own disruption (pods rolling) "
    "is not the incident's."
)
# The rubric as agents read it (prompts, tool schemas).
SEVERITY_RUBRIC = (
    f"P0 when a user-facing service fails at least {P0_ERROR_RATE:.0%} of requests, or its p99 latency is at "
    f"least {P0_LATENCY_MS:.0f} ms, or a system of record ({' or '.join(f'a {kind}' for kind in RECORD_KINDS)}) "
    f"refuses or loses writes as a store (it is read-only or out of space; a transaction a deadlock or a lock "
    f"wait rolls back is not); P1 when it fails at least {P1_ERROR_RATE:.0%} of requests or its p99 is at least "
    f"{P1_LATENCY_MS:.0f} ms; P2 otherwise. {SEVERITY_MOMENT}"
)


def rubric(error_rate: float, latency_ms: float, data_at_risk: bool) -> Severity:
    """P0: users mostly failing or stalled, or a system of record losing writes; P1 major degradation; P2 minor."""
    if data_at_risk or error_rate >= P0_ERROR_RATE or latency_ms >= P0_LATENCY_MS:
        return "P0"
    if error_rate >= P1_ERROR_RATE or latency_ms >= P1_LATENCY_MS:
        return "P1"
    return "P2"
