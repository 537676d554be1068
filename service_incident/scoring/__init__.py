"""Rewards, the final score and the postmortem. Every number that grades an agent is defined here, once.

- `rewards`: the per-step rewards of the two reward modes and their bounds;
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
    BUDGET_EXHAUSTED,
    DECLARE_EXACT,
    DECLARE_PARTIAL,
    DECLARE_ROOT_ONLY,
    DECLARE_WRONG,
    INFO_REWARD,
    INFO_REWARD_CAP,
    NO_INFO_REWARD,
    REMEDY_EASES,
    REMEDY_HEALS,
    REMEDY_WRONG,
    RESOLVE_PREMATURE,
    RESOLVE_RESTORED,
    REWARD_MAX,
    REWARD_MIN,
    REWARD_TABLE,
    WASTE_PENALTY,
    declare_reward,
)
from .score import SCORE_CEIL, SCORE_FLOOR, SCORE_WASTE, WEIGHTS, Outcome, final_score, root_credit

__all__ = [
    "BUDGET_EXHAUSTED",
    "DECLARE_EXACT",
    "DECLARE_PARTIAL",
    "DECLARE_ROOT_ONLY",
    "DECLARE_WRONG",
    "EASED_ERROR",
    "EASED_P99",
    "EFFECT_STEPS",
    "INFO_REWARD",
    "INFO_REWARD_CAP",
    "NO_INFO_REWARD",
    "RATIONALE_CITES",
    "REMEDY_EASES",
    "REMEDY_HEALS",
    "REMEDY_WRONG",
    "RESOLVE_PREMATURE",
    "RESOLVE_RESTORED",
    "REWARD_MAX",
    "REWARD_MIN",
    "REWARD_TABLE",
    "SCORE_CEIL",
    "SCORE_FLOOR",
    "SCORE_WASTE",
    "WASTE_PENALTY",
    "WEIGHTS",
    "Debrief",
    "Ledger",
    "Outcome",
    "RemedyVerdict",
    "RootFault",
    "declare_reward",
    "final_score",
    "fixed_roots",
    "judge_remedy",
    "postmortem",
    "rationale_credit",
    "rationale_facts",
    "root_credit",
]
