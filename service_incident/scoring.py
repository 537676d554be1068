"""Per-step rewards and the final score. Every number that grades an agent is defined here, once.

Information rewards are potential-based shaping: they are paid when evidence is first revealed and
settled (subtracted) when the episode ends, so an episode's return is its outcome minus its waste
and no amount of inspecting can raise it. The final score is separate, in [SCORE_FLOOR, SCORE_CEIL],
and grades the answer, the evidence behind it and the steps it took.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Per-step rewards (the triage table).
INFO_REWARD = 0.1  # a new inspection that reveals an anomaly
NO_INFO_REWARD = 0.0  # a new inspection that reveals nothing abnormal
WASTE_PENALTY = -0.05  # a redundant inspection, an unknown target
DECLARE_EXACT = 1.0  # root cause and severity right
DECLARE_ROOT_ONLY = 0.6  # root cause right, severity wrong
DECLARE_WRONG = -0.3  # root cause wrong
BUDGET_EXHAUSTED = -0.2  # the step budget ran out without a declaration
# Information rewards paid in one episode stop here, which bounds the settlement.
INFO_REWARD_CAP = 0.5

# The bounds of any single step's reward (settlement included).
REWARD_MAX = DECLARE_EXACT
REWARD_MIN = min(DECLARE_WRONG, BUDGET_EXHAUSTED + WASTE_PENALTY) - INFO_REWARD_CAP

# Final score weights; the parts after the root cause count only when the root cause is right.
SCORE_ROOT_CAUSE = 0.5
SCORE_SEVERITY = 0.2
SCORE_EVIDENCE = 0.2
SCORE_EFFICIENCY = 0.1
SCORE_WASTE = 0.05  # taken off per wasted action
SCORE_FLOOR = 0.01
SCORE_CEIL = 0.99


@dataclass(slots=True)
class Ledger:
    """What an episode has done so far, as far as grading is concerned."""

    info_paid: float = 0.0
    waste: int = 0
    evidence: set[str] = field(default_factory=set)
    rewards: list[float] = field(default_factory=list)

    def inspection_reward(self, anomalous: bool) -> float:
        if not anomalous:
            return NO_INFO_REWARD
        paid = min(INFO_REWARD, INFO_REWARD_CAP - self.info_paid)
        self.info_paid = round(self.info_paid + paid, 6)
        return paid

    def wasted(self) -> float:
        self.waste += 1
        return WASTE_PENALTY


def declare_reward(root_right: bool, severity_right: bool) -> float:
    if not root_right:
        return DECLARE_WRONG
    return DECLARE_EXACT if severity_right else DECLARE_ROOT_ONLY


def settle(reward: float, ledger: Ledger) -> float:
    """The terminal step's reward: its own reward less the shaping paid along the way."""
    return round(reward - ledger.info_paid, 6)


def final_score(
    *,
    declared: frozenset[str] | None,
    roots: frozenset[str],
    severity_right: bool,
    steps: int,
    max_steps: int,
    ledger: Ledger,
) -> tuple[float, dict[str, float]]:
    """The episode's score and its breakdown. `declared` is None when nothing was declared."""
    parts = {"root_cause": 0.0, "severity": 0.0, "evidence": 0.0, "efficiency": 0.0}
    if declared is not None and declared == roots:
        parts["root_cause"] = SCORE_ROOT_CAUSE
        parts["severity"] = SCORE_SEVERITY if severity_right else 0.0
        parts["evidence"] = SCORE_EVIDENCE * len(ledger.evidence & roots) / len(roots)
        parts["efficiency"] = SCORE_EFFICIENCY * (1.0 - (steps - 1) / max_steps)
    parts["waste"] = -SCORE_WASTE * ledger.waste
    raw = max(0.0, min(1.0, sum(parts.values())))
    score = SCORE_FLOOR + (SCORE_CEIL - SCORE_FLOOR) * raw
    breakdown = {name: round(value, 4) for name, value in parts.items()}
    return round(score, 4), breakdown
