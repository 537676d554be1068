"""In-process cost of the views an engineer reads again while a root cause is being fixed: its logs and
its health, first before a remedy, then after it, step after step (a crashing container's pods, the
alerts as they move). No transport; the step's CPU time (or wall time) per look.

Each generated incident (gen_hard by default) is played by one fixed policy, which reads the incident's
roots from the core (a benchmark's choice of where to look, not an agent's): the logs and health of
every root, a scale-up of the first root, then the same looks again until the episode's last step
before its end. A row per view and look (first, or again after the remedy) gives the median and p99
µs per step; `--against DIR` times another checkout's core on the same episodes, in processes of its
own as `bench_core.py` does (against.py), and adds the ratio of the medians (this core's over the
other's).

    python bench/bench_views.py [--episodes N] [--task ID] [--clock wall|cpu] [--against DIR [--rounds N]]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from against import add_arguments, measured
from bench_core import CLOCKS, percentile

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import CheckHealth, InspectLogs, ScaleUp
from service_incident.tasks import TASKS


def play(env: Any, task_id: str, seed: int, clock: Any, found: dict[str, list[float]]) -> None:
    """One episode of the fixed policy; each step's time added to `found` under its row's label."""
    env.reset(task_id=task_id, seed=seed)
    roots = list(dict.fromkeys(f.service for f in env._episode.world.incident.faults))
    looks = [kind(target=root) for root in roots for kind in (InspectLogs, CheckHealth)]
    plan = [(look, "first") for look in looks] + [(ScaleUp(target=roots[0]), "remedy")]
    steps = TASKS[task_id].max_steps - 1  # the last step would end the episode
    while len(plan) < steps:
        plan += [(look, "again") for look in looks]
    for action, when in plan[:steps]:
        started = clock()
        observation = env.step(action)
        label = f"{type(action).__name__} ({when})" if when != "remedy" else type(action).__name__
        found[label].append(clock() - started)
        if observation.done:
            return


def timings(args: argparse.Namespace) -> dict[str, list[float]]:
    """Each look's seconds per step, with this process's core."""
    env = ServiceIncidentEnvironment()
    found: dict[str, list[float]] = defaultdict(list)
    for seed in range(args.episodes + 10):
        # The first ten episodes warm caches, untimed.
        play(env, args.task, seed, CLOCKS[args.clock], found if seed >= 10 else defaultdict(list))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--task", default="gen_hard")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    add_arguments(parser)
    mine, other = measured(Path(__file__), parser.parse_args(), timings)
    header = f"{'look':<28}{'steps':>7}{'p50 us':>10}{'p99 us':>10}"
    print(header + (f"{'against p50':>13}{'x':>7}" if other is not None else ""))
    for label in sorted(mine):
        times = mine[label]
        median, tail = 1e6 * statistics.median(times), 1e6 * percentile(times, 0.99)
        line = f"{label:<28}{len(times):>7}{median:>10.1f}{tail:>10.1f}"
        if other is not None and label in other:
            theirs = statistics.median(other[label])
            line += f"{1e6 * theirs:>13.1f}{statistics.median(times) / theirs:>7.2f}"
        print(line)


if __name__ == "__main__":
    main()
