"""In-process cost of reset and step for every task, with no transport: the environment's own floor.

Prints a table of median and p99 microseconds per call.
    python bench/bench_core.py [--episodes N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from service_incident.agents import ExpertAgent
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import InspectLogs, InspectMetrics
from service_incident.tasks import TASKS


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(task_id: str, episodes: int) -> tuple[list[float], list[float]]:
    env = ServiceIncidentEnvironment()
    resets: list[float] = []
    steps: list[float] = []
    for seed in range(episodes):
        started = time.perf_counter()
        obs = env.reset(task_id=task_id, seed=seed)
        resets.append(time.perf_counter() - started)
        # Inspections first (the common, rendering-heavy step), then the expert's closing moves.
        for action in (InspectMetrics(target=obs.services[0]), InspectLogs(target=obs.services[-1])):
            started = time.perf_counter()
            obs = env.step(action)
            steps.append(time.perf_counter() - started)
        agent = ExpertAgent()
        while not obs.done:
            action = agent.act(obs)
            started = time.perf_counter()
            obs = env.step(action)
            steps.append(time.perf_counter() - started)
    return resets, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=2000)
    args = parser.parse_args()
    print(f"{'task':<10} {'reset p50 us':>13} {'reset p99 us':>13} {'step p50 us':>12} {'step p99 us':>12}")
    for task_id in TASKS:
        measure(task_id, 50)  # warm caches and the allocator
        resets, steps = measure(task_id, args.episodes)
        print(
            f"{task_id:<10} {1e6 * statistics.median(resets):>13.1f} {1e6 * percentile(resets, 0.99):>13.1f}"
            f" {1e6 * statistics.median(steps):>12.1f} {1e6 * percentile(steps, 0.99):>12.1f}"
        )


if __name__ == "__main__":
    main()
