"""What a step pays in each reward mode. In both, an episode's return is its score.

"final" (evaluation): every step before the last pays exactly 0 and the last pays the score.
"dense" (training): every step pays the change of a potential, which is 0 at reset, the score at the
end, and in between the score the episode would get if it ended now plus an information bonus. The
bonus is shaping from privileged information (whether a look showed a root cause while its fault
did), documented as such, and the last step takes it back: the rewards add up to the score, so no
shaping can be farmed. The potential lies in [0, 1], so every step's reward lies in [-1, 1].
"""

from __future__ import annotations

from ..world.decimals import round_to

# The information bonus: each root cause first seen while its fault shows adds this, up to the cap.
INFO_REWARD = 0.1
INFO_REWARD_CAP = 0.5
POTENTIAL_MAX = 1.0

# The bounds of any single step's reward: the change of a potential in [0, POTENTIAL_MAX].
REWARD_MAX = POTENTIAL_MAX
REWARD_MIN = -POTENTIAL_MAX
# What a reward is rounded to. A potential has at most four decimals (the score's), so the rounded
# changes still add up to the score.
REWARD_DIGITS = 6

# What each step pays in each mode, as the documentation names it (docs/scoring.md's table is rendered
# from this): (step, final, dense).
REWARD_TABLE: tuple[tuple[str, str, str], ...] = (
    (
        "the potential, while the episode runs",
        "(none)",
        f"the score if the episode ended now, plus {INFO_REWARD} for each root cause a look of the agent's "
        f"showed while its fault did (privileged; at most {INFO_REWARD_CAP} in all), at most {POTENTIAL_MAX}",
    ),
    ("reset", "0", "0: the potential starts at 0"),
    ("a step before the last", "0", "the potential now less the potential before"),
    ("the last step", "the score", "the score less the potential before"),
    ("the return (the sum of the rewards)", "the score", "the score"),
)


def rounded(value: float, digits: int) -> float:
    """A reward or a part of the score as reported: rounded as `round(value, digits)` rounds (compiled,
    where built: the score's parts are rounded at every step in dense mode), and 0.0 where it is nothing,
    never -0.0."""
    return round_to(value, digits) + 0.0
