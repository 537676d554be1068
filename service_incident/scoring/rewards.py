"""The per-step rewards of both reward modes, and the bounds of any one step's reward.

"final" (evaluation): every step before the last pays exactly 0 and the last carries the episode's
whole return. "dense" (training): the same return spread over the steps, with shaping that uses
privileged information (whether an inspection looked at a root cause while its fault showed, whether
a remedy healed one) and is documented as such. Information rewards are potential-based: paid when a
root's evidence is first seen and settled (subtracted) at the end, so the return is the outcome minus
the waste in both modes.
"""

from __future__ import annotations

# Per-step rewards (the triage table).
INFO_REWARD = 0.1  # dense only: a new look at a root cause while its fault shows (privileged)
NO_INFO_REWARD = 0.0  # any other new look
WASTE_PENALTY = -0.05  # a redundant inspection, an unknown target, an action the task does not allow
DECLARE_EXACT = 1.0  # root cause and severity right
DECLARE_ROOT_ONLY = 0.6  # root cause right, severity wrong
DECLARE_PARTIAL = 0.3  # some but not all root causes of a multi-fault incident
DECLARE_WRONG = -0.3  # root cause wrong
BUDGET_EXHAUSTED = -0.2  # the step budget ran out without ending the episode
# Information rewards paid in one episode stop here, which bounds the settlement.
INFO_REWARD_CAP = 0.5
# Remediation (response and root-cause tasks).
REMEDY_HEALS = 0.2  # the remedy removes a root cause
REMEDY_EASES = 0.0  # it eases a root's impact without removing the fault: no waste, and nothing to farm
REMEDY_WRONG = -0.1  # it changes nothing for the incident, or makes users' impact worse
RESOLVE_RESTORED = 0.5  # resolved with service restored
RESOLVE_PREMATURE = -0.5  # resolved while a fault is live or users still fail

# Dense mode's per-step rewards, each with the event as the documentation names it (docs/scoring.md's
# table is rendered from this).
REWARD_TABLE: tuple[tuple[str, float], ...] = (
    ("dense: first look at a root cause while its fault shows (privileged)", INFO_REWARD),
    ("any other new look", NO_INFO_REWARD),
    ("redundant inspection, unknown target or action the task does not allow", WASTE_PENALTY),
    ("declare: service and severity right", DECLARE_EXACT),
    ("declare: service right, severity wrong", DECLARE_ROOT_ONLY),
    ("declare: some but not all root causes", DECLARE_PARTIAL),
    ("declare: wrong service", DECLARE_WRONG),
    ("remedy that removes a root cause's fault", REMEDY_HEALS),
    ("remedy that eases a root cause's impact without removing its fault (buys time)", REMEDY_EASES),
    ("remedy that changes nothing for the incident or makes users' impact worse", REMEDY_WRONG),
    ("resolve with service restored", RESOLVE_RESTORED),
    ("resolve while a fault is live or users still fail", RESOLVE_PREMATURE),
    ("step budget spent before the episode ended", BUDGET_EXHAUSTED),
)


# The bounds of any single step's reward (settlement included).
REWARD_MAX = DECLARE_EXACT
REWARD_MIN = min(DECLARE_WRONG, RESOLVE_PREMATURE, BUDGET_EXHAUSTED + WASTE_PENALTY) - INFO_REWARD_CAP


def declare_reward(declared: frozenset[str], roots: frozenset[str], severity_right: bool | None) -> float:
    """`severity_right` is None where the task does not grade severity."""
    if declared == roots:
        return DECLARE_ROOT_ONLY if severity_right is False else DECLARE_EXACT
    return DECLARE_PARTIAL if declared & roots else DECLARE_WRONG


def rounded(value: float, digits: int) -> float:
    """A reward or a part of the score as reported: rounded, and 0.0 where it is nothing, never -0.0."""
    return round(value, digits) + 0.0
