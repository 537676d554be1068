"""The postmortem: the truth of an ended episode, what each root cause earned, and for each part of the
score that fell short, why (one explanation per part, in a table)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec

from ..models import Postmortem, RootCause, Severity
from .facts import RATIONALE_CITES, rationale_facts
from .rewards import rounded
from .score import Outcome, root_credit

_IN_PROPORTION = "counts in proportion to the root causes named right"


class RootFault(msgspec.Struct, frozen=True, gc=False):
    """One fault of the incident, as the postmortem tells it."""

    service: str
    fault: str
    fixes: tuple[str, ...]  # the remedies that would have removed it


class Debrief(msgspec.Struct, frozen=True):
    """An ended episode's outcome beside the incident's truth: what its postmortem is written from."""

    outcome: Outcome
    breakdown: Mapping[str, float]
    faults: tuple[RootFault, ...]
    live: tuple[str, ...]  # the services whose fault still runs at the end
    red_herrings: tuple[str, ...]
    severity: Severity | None  # as graded; None where the task does not grade it
    severity_basis: str
    declared_severity: Severity | None

    @property
    def all_named(self) -> bool:
        """Whether the answer named exactly the root causes."""
        return self.outcome.named == self.outcome.roots

    def in_proportion(self, said: list[str]) -> list[str]:
        """What is said of a part, with the note that it counts in proportion to the roots named right
        unless they all were."""
        return said if self.all_named else [*said, _IN_PROPORTION]


def _root_cause(debrief: Debrief) -> str:
    roots, named = debrief.outcome.roots, debrief.outcome.named
    absent, extra = sorted(roots - named), sorted(named - roots)
    said = [f"not named: {', '.join(absent)}"] if absent else []
    said += [f"named but not a root cause: {', '.join(extra)}"] if extra else []
    return "; ".join(said) or "no root cause was declared"


def _severity(debrief: Debrief) -> str:
    declared = f"declared {debrief.declared_severity or 'nothing'}, graded {debrief.severity}"
    return "; ".join(debrief.in_proportion([declared]))


def _evidence(debrief: Debrief) -> str:
    outcome = debrief.outcome
    unseen = sorted(outcome.roots & outcome.named - outcome.ledger.evidence)
    return "; ".join(debrief.in_proportion([f"no view showed the fault of: {', '.join(unseen)}"] if unseen else []))


def _remediation(debrief: Debrief) -> str:
    unfixed = sorted(debrief.outcome.roots - debrief.outcome.fixed)
    live = f"; faults still live on: {', '.join(debrief.live)}" if debrief.live else ""
    return f"not fixed: {', '.join(unfixed)} (each root cause is an equal share){live}"


def _efficiency(debrief: Debrief) -> str:
    outcome = debrief.outcome
    used = f"{outcome.steps} of {outcome.max_steps} steps used"
    return used if outcome.restored else "; ".join(debrief.in_proportion([used]))


def _rationale(debrief: Debrief) -> str:
    outcome, ledger = debrief.outcome, debrief.outcome.ledger
    cited, seen, of_roots = rationale_facts(ledger.rationales, ledger.observed, outcome.roots & outcome.named)
    said = [
        f"rationales cite {len(of_roots)} distinct fact(s) seen in a view of a root cause named right "
        f"({RATIONALE_CITES} earn the full credit)"
    ]
    invented = sorted(cited - seen)
    said += [f"cited but seen in no view (they dilute the credit): {', '.join(invented)}"] if invented else []
    return "; ".join(debrief.in_proportion(said))


# Why a part of the score fell short of its weight, by part.
_SHORT_OF: Mapping[str, Callable[[Debrief], str]] = {
    "root_cause": _root_cause,
    "severity": _severity,
    "evidence": _evidence,
    "remediation": _remediation,
    "efficiency": _efficiency,
    "rationale": _rationale,
}


def postmortem(debrief: Debrief) -> Postmortem:
    """The truth of an ended episode, what each root cause earned, and for each part of the score
    that fell short, why."""
    outcome, ledger = debrief.outcome, debrief.outcome.ledger
    missed = {
        part: _SHORT_OF[part](debrief)
        for part, weight in outcome.weights.items()
        if debrief.breakdown.get(part, 0.0) < weight - 1e-9
    }
    if ledger.waste:
        missed["waste"] = (
            f"{ledger.waste} wasted action(s): repeated looks, refused actions, remedies that changed nothing "
            "for the incident or made users' impact worse"
        )
    credit = root_credit(outcome)
    named = outcome.named
    return Postmortem(
        root_causes=[
            RootCause(
                service=fault.service,
                fault=fault.fault,
                fixes=list(fault.fixes),
                seen=fault.service in ledger.evidence,
                named=fault.service in named,
                fixed=fault.service in outcome.fixed,
                credited={part: rounded(value, 4) for part, value in credit[fault.service].items()},
            )
            for fault in debrief.faults
        ],
        declared=sorted(named),
        severity=debrief.severity,
        severity_basis=debrief.severity_basis,
        declared_severity=debrief.declared_severity,
        remedies=[str(verdict) for verdict in ledger.remedies],
        red_herrings=list(debrief.red_herrings),
        missed=missed,
    )
