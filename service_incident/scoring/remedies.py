"""What a remedy did, judged in the world model (privileged: for grading), and the roots fixed.

A remedy is judged against the same world without it, over the steps it acts in: did it remove a
root cause's fault, ease a root's impact (a relief that buys time, a scale-up or load shedding that
lowers its error rate or latency), or change nothing for the incident or make users' impact worse?
Only the last two are waste.
"""

from __future__ import annotations

import msgspec

from ..world import World

# A remedy eases a root cause when, at some step it acts in (its own and the next ones: a relief lasts
# two), the root's error rate is lower by this much, or its p99 by this share, than in the same world
# without it; it hurts when users' graded impact is worse by as much. Over 240 training incidents, 96%
# of the listed reliefs clear these margins on their root, and 26 in 13,000 remedies on a bystander do.
EASED_ERROR = 0.01
EASED_P99 = 0.1
EFFECT_STEPS = 3


class RemedyVerdict(msgspec.Struct, frozen=True, gc=False):
    """What one remedy did, against the same world without it."""

    step: int
    remedy: str
    service: str
    heals: bool  # it removed a root cause's fault
    eased: tuple[str, ...]  # the root causes whose error rate or latency it measurably lowered
    hurts: bool  # users' graded impact got measurably worse

    @property
    def wasted(self) -> bool:
        return not self.heals and (self.hurts or not self.eased)

    def __str__(self) -> str:
        if self.heals:
            effect = f"removed the fault of {self.service}"
        elif self.wasted:
            effect = "made users' impact worse" if self.hurts else "changed nothing for the incident"
            effect += " (wasted)"
        else:
            effect = f"eased {', '.join(self.eased)} without removing the fault (not wasted)"
        return f"step {self.step}: {self.remedy} {self.service}: {effect}"


def _without_last_remedy(world: World) -> World:
    """The same world with every remedy but the last: what the last one is measured against."""
    other = World(world.incident)
    for earlier in world.history[:-1]:
        other.step = earlier.step
        other.remediate(earlier.remedy, earlier.service)
    other.step = world.step
    return other


def judge_remedy(world: World) -> RemedyVerdict:
    """The world's last remedy, judged by its effect in the world model (privileged: for grading)."""
    last = world.history[-1]
    if last.outcome == "heals":  # a fix is no waste whatever else it did: nothing to measure
        return RemedyVerdict(last.step, last.remedy, last.service, True, (), False)
    without = _without_last_remedy(world)
    eased: set[str] = set()
    hurts = False
    for step in range(last.step, last.step + EFFECT_STEPS):
        now, then = world.states_at(step), without.states_at(step)
        eased |= {
            root
            for root in world.root_causes
            if then[root].error_rate - now[root].error_rate >= EASED_ERROR
            or then[root].p99_ms - now[root].p99_ms >= EASED_P99 * then[root].p99_ms
        }
        (error, p99), (error_then, p99_then) = world.graded_impact(step), without.graded_impact(step)
        hurts |= error - error_then >= EASED_ERROR or p99 - p99_then >= EASED_P99 * p99_then
    return RemedyVerdict(last.step, last.remedy, last.service, False, tuple(sorted(eased)), hurts)


def fixed_roots(world: World) -> frozenset[str]:
    """The root causes every fault of which has its fix in effect now."""
    healed = [(fault.service, world.healed_at(index)) for index, fault in enumerate(world.incident.faults)]
    return frozenset(root for root, _ in healed) - {root for root, at in healed if at is None or at > world.step}
