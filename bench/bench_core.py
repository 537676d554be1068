"""In-process cost of reset and step, with no transport: the environment's own floor.

For generated tasks every reset draws a fresh training incident, so reset includes generation.
Prints median and p99 microseconds per call for every task (the expert's moves: traces, metric
history and health included), for the 15-service training incidents of the generated tasks alone
(resets and steps), and for the 15-service incidents of the frozen evaluation set reset by id (no
generation). A generated task's row "seed again" resets each of its seeds once more, as a group of
rollouts of one seed does. `--clock cpu` times the process's CPU time instead of the wall clock: on a
shared machine, other work then inflates nothing. `--against DIR` times another checkout's core (DIR is its
root, with the same tasks and frozen incidents) in the same process, each episode played by both in
turn, and adds the ratio of the medians (this core's over the other's): load on a shared machine
then falls on both alike.
    python bench/bench_core.py [--episodes N] [--clock wall|cpu] [--tasks ID ...] [--no-frozen]
                               [--against DIR]
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from service_incident import dataset
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.generator import MAX_SERVICES
from service_incident.harness.agents import ExpertAgent
from service_incident.tasks import TASKS


class Core(NamedTuple):
    """How to make a core's environment and its expert."""

    environment: Callable[[], Any]
    expert: Callable[[], Any]


THIS = Core(ServiceIncidentEnvironment, ExpertAgent)
# (service count, seconds) of each call.
Samples = list[tuple[int, float]]


def checkout_core(root: Path) -> Core:
    """Another checkout's core and expert, imported beside this one: the package's modules import one
    another relatively, so a copy of it under a name of its own is that checkout's core."""
    home = Path(tempfile.mkdtemp(prefix="bench-core-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    shutil.copytree(root / "service_incident", home / "against_core", ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, str(home))
    environment = importlib.import_module("against_core.environment")
    agents = importlib.import_module("against_core.harness.agents")
    return Core(environment.ServiceIncidentEnvironment, agents.ExpertAgent)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def measure(
    task_id: str,
    seeds: range,
    clock: Callable[[], float],
    incidents: list[str] | None = None,
    cores: Sequence[Core] = (THIS,),
) -> list[tuple[Samples, Samples]]:
    """Per core, every reset and every step the expert takes, an episode per seed. Each episode is played
    by each core in turn, in an order that alternates."""
    envs = [core.environment() for core in cores]
    found: list[tuple[Samples, Samples]] = [([], []) for _ in cores]
    for seed in seeds:
        incident_id = incidents[seed % len(incidents)] if incidents else None
        order = list(range(len(cores)))
        for index in order if seed % 2 == 0 else order[::-1]:
            env, (resets, steps) = envs[index], found[index]
            started = clock()
            obs = env.reset(task_id=task_id, seed=seed, incident_id=incident_id)
            count = len(obs.services)
            resets.append((count, clock() - started))
            agent = cores[index].expert()
            while not obs.done:
                action = agent.act(obs)
                started = clock()
                obs = env.step(action)
                steps.append((count, clock() - started))
    return found


def replayed(task_id: str, seeds: range, clock: Callable[[], float], cores: Sequence[Core]) -> list[Samples]:
    """Per core, a reset of each seed, alone: timed on seeds `measure` played, it is a seed reset again."""
    envs = [core.environment() for core in cores]
    found: list[Samples] = [[] for _ in cores]
    for seed in seeds:
        for env, resets in zip(envs, found, strict=True):
            started = clock()
            obs = env.reset(task_id=task_id, seed=seed)
            resets.append((len(obs.services), clock() - started))
    return found


def seconds(samples: Samples, count: int | None = None) -> list[float]:
    """The seconds of the samples, of incidents with `count` services only if given."""
    return [taken for services, taken in samples if count is None or services == count]


def row(label: str, resets: list[float], steps: list[float]) -> str:
    cells = [statistics.median(resets), percentile(resets, 0.99)]
    cells += [statistics.median(steps), percentile(steps, 0.99)] if steps else []
    return f"{label:<26}" + "".join(f"{1e6 * value:>14.1f}" for value in cells)


def report(label: str, measured: list[tuple[list[float], list[float]]]) -> None:
    """A row per core; with another core, the ratio of this one's medians to its."""
    (resets, steps), *others = measured
    line = row(label, resets, steps)
    for other_resets, other_steps in others:
        ratios = [statistics.median(resets) / statistics.median(other_resets)]
        ratios += [statistics.median(steps) / statistics.median(other_steps)] if steps else []
        line += " " * (28 if not steps else 0) + "".join(f"{ratio:>10.2f}" for ratio in ratios)
    print(line)
    for other_resets, other_steps in others:
        print(row("  against", other_resets, other_steps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=1000, help="episodes per task")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="what a call's time is")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS), help="tasks to time")
    parser.add_argument("--no-frozen", action="store_true", help="skip the frozen 15-service incidents")
    parser.add_argument("--against", type=Path, help="the root of another checkout to time beside this one")
    args = parser.parse_args()
    clock = CLOCKS[args.clock]
    cores = [THIS, *([checkout_core(args.against)] if args.against else [])]
    header = f"{'task':<26}{'reset p50 us':>14}{'reset p99 us':>14}{'step p50 us':>14}{'step p99 us':>14}"
    print(header + (f"{'reset x':>10}{'step x':>10}" if args.against else ""))
    largest: list[tuple[list[float], list[float]]] = [([], []) for _ in cores]
    for task_id in args.tasks:
        # Warm caches and the allocator on seeds of their own: a training reset timed on a seed played
        # already would find its incident's worlds simulated.
        measure(task_id, range(args.episodes, args.episodes + 20), clock, cores=cores)
        measured = measure(task_id, range(args.episodes), clock, cores=cores)
        report(task_id, [(seconds(resets), seconds(steps)) for resets, steps in measured])
        if TASKS[task_id].generated:
            for (resets, steps), (big_resets, big_steps) in zip(measured, largest, strict=True):
                big_resets.extend(seconds(resets, MAX_SERVICES))
                big_steps.extend(seconds(steps, MAX_SERVICES))
    if largest[0][0]:
        report(f"{MAX_SERVICES}-service resets ({len(largest[0][0])})", largest)
    for task_id in [t for t in args.tasks if TASKS[t].generated]:
        # A group of rollouts resets one seed several times: the seeds played above, reset again.
        again = [
            ([seconds for _, seconds in resets], []) for resets in replayed(task_id, range(args.episodes), clock, cores)
        ]
        report(f"{task_id} seed again", again)
    if args.no_frozen:
        return
    frozen = [i for i, incident in dataset.frozen().items() if len(incident.services) == MAX_SERVICES]
    task = next(t.id for t in TASKS.values() if frozen and frozen[0] in t.incidents)
    measured = measure(task, range(args.episodes), clock, frozen, cores)
    report(f"{MAX_SERVICES}-service frozen ({len(frozen)})", [(seconds(r), seconds(s)) for r, s in measured])


if __name__ == "__main__":
    main()
