"""In-process cost of reset and step, with no transport: the environment's own floor.

For generated tasks every reset draws a fresh training incident, so reset includes generation.
Prints median and p99 microseconds per call for every task (the expert's moves: traces, metric
history and health included), for the 15-service training incidents of the generated tasks alone
(resets and steps), and for the 15-service incidents of the frozen evaluation set reset by id (no
generation). `--clock cpu` times the process's CPU time instead of the wall clock: on a shared
machine, other work then inflates nothing.
    python bench/bench_core.py [--episodes N] [--clock wall|cpu] [--tasks ID ...] [--no-frozen]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from service_incident import dataset
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.generator import MAX_SERVICES
from service_incident.harness.agents import ExpertAgent
from service_incident.tasks import TASKS


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def measure(
    task_id: str, episodes: int, clock: Callable[[], float], incidents: list[str] | None = None
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """(service count, seconds) of every reset, and of every step the expert takes."""
    env = ServiceIncidentEnvironment()
    resets: list[tuple[int, float]] = []
    steps: list[tuple[int, float]] = []
    for seed in range(episodes):
        incident_id = incidents[seed % len(incidents)] if incidents else None
        started = clock()
        obs = env.reset(task_id=task_id, seed=seed, incident_id=incident_id)
        count = len(obs.services)
        resets.append((count, clock() - started))
        agent = ExpertAgent()
        while not obs.done:
            action = agent.act(obs)
            started = clock()
            obs = env.step(action)
            steps.append((count, clock() - started))
    return resets, steps


def seconds(samples: list[tuple[int, float]], count: int | None = None) -> list[float]:
    """The seconds of the samples, of incidents with `count` services only if given."""
    return [taken for services, taken in samples if count is None or services == count]


def row(label: str, resets: list[float], steps: list[float]) -> str:
    cells = [statistics.median(resets), percentile(resets, 0.99)]
    cells += [statistics.median(steps), percentile(steps, 0.99)] if steps else []
    return f"{label:<26}" + "".join(f"{1e6 * value:>14.1f}" for value in cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=1000, help="episodes per task")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="what a call's time is")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS), help="tasks to time")
    parser.add_argument("--no-frozen", action="store_true", help="skip the frozen 15-service incidents")
    args = parser.parse_args()
    clock = CLOCKS[args.clock]
    print(f"{'task':<26}{'reset p50 us':>14}{'reset p99 us':>14}{'step p50 us':>14}{'step p99 us':>14}")
    largest: tuple[list[float], list[float]] = ([], [])
    for task_id in args.tasks:
        measure(task_id, 20, clock)  # warm caches and the allocator
        resets, steps = measure(task_id, args.episodes, clock)
        print(row(task_id, seconds(resets), seconds(steps)))
        if TASKS[task_id].generated:
            largest[0].extend(seconds(resets, MAX_SERVICES))
            largest[1].extend(seconds(steps, MAX_SERVICES))
    if largest[0]:
        print(row(f"{MAX_SERVICES}-service resets ({len(largest[0])})", *largest))
    if args.no_frozen:
        return
    frozen = [i for i, incident in dataset.frozen().items() if len(incident.services) == MAX_SERVICES]
    task = next(t.id for t in TASKS.values() if frozen and frozen[0] in t.incidents)
    resets, steps = measure(task, args.episodes, clock, frozen)
    print(row(f"{MAX_SERVICES}-service frozen ({len(frozen)})", seconds(resets), seconds(steps)))


if __name__ == "__main__":
    main()
