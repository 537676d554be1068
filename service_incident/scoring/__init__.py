"""Rewards, the final score and the postmortem. Every number that grades an agent is defined here, once.

- `rewards`: what a step pays in each reward mode, and the bounds of a step's reward;
- `facts`: the facts a rationale cites and its credit;
- `remedies`: what a remedy did in the world model, and the roots fixed;
- `ledger`: what an episode has done so far, changed only through its own methods;
- `score`: the final score and what each root cause earned;
- `postmortem`: the truth of an ended episode and why each part fell short.
"""

from .facts import RATIONALE_CITES, rationale_credit, rationale_facts
from .ledger import Ledger
from .postmortem import Debrief, RootFault, postmortem
from .remedies import EASED_ERROR, EASED_P99, EFFECT_STEPS, RemedyVerdict, fixed_roots, judge_remedy
from .rewards import (
    INFO_REWARD,
    INFO_REWARD_CAP,
    POTENTIAL_MAX,
    REWARD_DIGITS,
    REWARD_MAX,
    REWARD_MIN,
    REWARD_TABLE,
    rounded,
)
from .score import SCORE_CEIL, SCORE_FLOOR, SCORE_WASTE, WEIGHTS, Outcome, final_score, potential, root_credit

__all__ = [
    "EASED_ERROR",
    "EASED_P99",
    "EFFECT_STEPS",
    "INFO_REWARD",
    "INFO_REWARD_CAP",
    "POTENTIAL_MAX",
    "RATIONALE_CITES",
    "REWARD_DIGITS",
    "REWARD_MAX",
    "REWARD_MIN",
    "REWARD_TABLE",
    "SCORE_CEIL",
    "SCORE_FLOOR",
    "SCORE_WASTE",
    "WEIGHTS",
    "Debrief",
    "Ledger",
    "Outcome",
    "RemedyVerdict",
    "RootFault",
    "final_score",
    "fixed_roots",
    "judge_remedy",
    "postmortem",
    "potential",
    "rationale_credit",
    "rationale_facts",
    "root_credit",
    "rounded",
]
