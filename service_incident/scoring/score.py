"""The final score: each part's weight by kind of grading, what each root cause earned, the sum.

The score lies in [SCORE_FLOOR, SCORE_CEIL] and grades the answer, the evidence behind it, the state
the world was left in and the steps taken.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from .facts import rationale_credit
from .ledger import Ledger
from .rewards import POTENTIAL_MAX, REWARD_DIGITS, rounded

# Final score: the weight of each part per kind of grading. `root_cause`, `evidence` and `remediation`
# are earned root by root (named, seen while named, fixed); every other part counts in proportion to
# the root causes named right (the `root_cause` share: found over declared-or-true), so a wrong answer
# earns none of them and half the roots earns about half; efficiency counts in full once service is
# restored.
WEIGHTS: Mapping[str, Mapping[str, float]] = {
    "triage": {"root_cause": 0.5, "severity": 0.2, "evidence": 0.2, "efficiency": 0.1},
    "response": {
        "root_cause": 0.3,
        "remediation": 0.3,
        "severity": 0.1,
        "evidence": 0.1,
        "efficiency": 0.1,
        "rationale": 0.1,
    },
    "rca": {"root_cause": 0.4, "remediation": 0.2, "evidence": 0.2, "efficiency": 0.2},
    "generated": {"root_cause": 0.35, "remediation": 0.2, "severity": 0.15, "evidence": 0.15, "efficiency": 0.15},
}
SCORE_WASTE = 0.05  # taken off per wasted action (redundant, invalid, disallowed, or a remedy that did no good)
SCORE_FLOOR = 0.01
SCORE_CEIL = 0.99


class Outcome(msgspec.Struct, frozen=True):
    """What an ended episode did, as its score is computed from it."""

    grading: str  # a key of WEIGHTS
    roots: frozenset[str]
    steps: int
    max_steps: int
    ledger: Ledger
    fixed: frozenset[str] = frozenset()  # the root causes whose fix is in effect at the end
    restored: bool = False

    @property
    def weights(self) -> Mapping[str, float]:
        return WEIGHTS[self.grading]

    @property
    def named(self) -> frozenset[str]:
        """The services the answer named (none before an answer)."""
        return self.ledger.declared or frozenset()


def root_credit(outcome: Outcome) -> dict[str, dict[str, float]]:
    """What each root cause earned of the parts earned root by root: named (`root_cause`, diluted by
    services named that are not roots), seen while named (`evidence`, out of the `root_cause` share),
    and fixed (`remediation`, an equal share per root)."""
    weights, roots, declared = outcome.weights, outcome.roots, outcome.named
    found = declared & roots
    root_share = len(found) / len(declared | roots)
    earned = {
        root: {
            "root_cause": 1.0 / len(declared | roots) if root in found else 0.0,
            # Seeing a root and not naming it earns nothing.
            "evidence": root_share / len(found) if root in found and root in outcome.ledger.evidence else 0.0,
            "remediation": 1.0 / len(roots) if root in outcome.fixed else 0.0,
        }
        for root in sorted(roots)
    }
    return {
        root: {part: weights[part] * value for part, value in parts.items() if part in weights}
        for root, parts in earned.items()
    }


def final_score(outcome: Outcome) -> tuple[float, dict[str, float]]:
    """The episode's score and its breakdown."""
    weights, roots, ledger = outcome.weights, outcome.roots, outcome.ledger
    declared = ledger.declared
    root_share = len(declared & roots) / len(declared | roots) if declared else 0.0
    found = declared & roots if declared else frozenset()
    earned = {
        "severity": root_share if ledger.severity_right else 0.0,
        "efficiency": (1.0 if outcome.restored else root_share) * (1.0 - (outcome.steps - 1) / outcome.max_steps),
        "rationale": (
            root_share * rationale_credit(ledger.rationales, ledger.observed, found) if "rationale" in weights else 0.0
        ),
    }
    parts = {name: weight * earned[name] for name, weight in weights.items() if name in earned}
    for credit in root_credit(outcome).values():
        for name, value in credit.items():
            parts[name] = parts.get(name, 0.0) + value
    parts = {name: parts.get(name, 0.0) for name in weights}
    parts["waste"] = -SCORE_WASTE * ledger.waste
    raw = max(0.0, min(1.0, sum(parts.values())))
    score = SCORE_FLOOR + (SCORE_CEIL - SCORE_FLOOR) * raw
    return rounded(score, 4), {name: rounded(value, 4) for name, value in parts.items()}


def potential(outcome: Outcome) -> float:
    """Dense mode's potential while the episode runs (at the end it is the score): see `rewards`."""
    return rounded(min(POTENTIAL_MAX, final_score(outcome)[0] + outcome.ledger.bonus), REWARD_DIGITS)
