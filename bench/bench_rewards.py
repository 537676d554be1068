"""Rewards against the score over many episodes: every step's reward inside the range the manifest
declares, every return equal to the score (final mode: nothing paid before the last step).

Every reference agent and a player of random valid actions, on every task, in both reward modes,
`--seeds` seeds each (the default 40 makes 25 tasks x 5 players x 2 modes x 40 = 10,000 episodes).
Prints a row per task and mode and a total; exits 1 if any reward or return is off.
    python bench/bench_rewards.py [--seeds N] [--tasks ID ...]
"""

from __future__ import annotations

import argparse
import sys
import time

from service_incident.harness.returns import Tally, check
from service_incident.scoring import REWARD_MAX, REWARD_MIN
from service_incident.tasks import TASKS


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=40, help="seeds per task and mode")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS), metavar="ID")
    args = parser.parse_args()
    began = time.perf_counter()
    tallies = check(args.tasks, range(args.seeds))
    print(f"declared range [{REWARD_MIN}, {REWARD_MAX}]")
    print(
        f"{'task':<24}{'mode':<7}{'episodes':>9}{'steps':>8}{'lowest':>9}{'highest':>9}"
        f"{'outside':>9}{'early':>7}{'apart':>7}{'worst |return-score|':>22}"
    )
    total = Tally()
    for (task_id, mode), tally in tallies.items():
        print(
            f"{task_id:<24}{mode:<7}{tally.episodes:>9}{tally.steps:>8}{tally.lowest:>9.4f}{tally.highest:>9.4f}"
            f"{tally.out_of_range:>9}{tally.paid_early:>7}{tally.apart:>7}{tally.worst_gap:>22.2e}"
        )
        total.merge(tally)
    print(
        f"{'total':<31}{total.episodes:>9}{total.steps:>8}{total.lowest:>9.4f}{total.highest:>9.4f}"
        f"{total.out_of_range:>9}{total.paid_early:>7}{total.apart:>7}{total.worst_gap:>22.2e}"
    )
    print(f"{time.perf_counter() - began:.0f} s")
    return 0 if total.clean else 1


if __name__ == "__main__":
    sys.exit(main())
