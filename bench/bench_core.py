"""In-process cost of reset and step, with no transport: the environment's own floor.

For generated tasks every reset draws a fresh training incident, so reset includes generation.
Prints median and p99 microseconds per call for every task (the expert's moves: traces, metric
history and health included), for the 15-service training incidents of the generated tasks alone
(resets and steps), and for the 15-service incidents of the frozen evaluation set reset by id (no
generation). A generated task's row "seed again" resets each of its seeds once more, as a group of
rollouts of one seed does. `--clock cpu` times the process's CPU time instead of the wall clock: on a
shared machine, other work then inflates nothing. `--against DIR` times another checkout's core as
well (DIR is its root, with the same tasks and frozen incidents, its hot modules compiled as this
one's are: `make compile` there), each core in processes of its own, `--rounds` times each in an order
that alternates (against.py), and adds the ratio of the medians (this core's over the other's).
`--idle-us N` sleeps N microseconds before every timed call, as a serving process waits on its socket
between calls: a call made back to back with the one before costs less than one made after the process
gave up its core (docs/measurement.md, "Core speed: hot in a loop, cold in a server").
    python bench/bench_core.py [--episodes N] [--clock wall|cpu] [--tasks ID ...] [--no-frozen]
                               [--idle-us N] [--against DIR [--rounds N]]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from against import add_arguments, measured

from service_incident import dataset
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.generator import MAX_SERVICES
from service_incident.harness.agents import ExpertAgent
from service_incident.tasks import TASKS

# (service count, seconds) of each call.
Samples = list[tuple[int, float]]
# The seconds of a row's resets and of its steps (none for a row of resets alone), and every row's by label.
Timed = tuple[list[float], list[float]]
Rows = dict[str, Timed]
# The row of the 15-service training incidents among the generated tasks' episodes: how many there were
# is printed beside it, from its samples.
TRAINING_ROW = f"{MAX_SERVICES}-service resets"


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def measure(
    task_id: str, seeds: range, clock: Callable[[], float], idle_s: float, incidents: list[str] | None = None
) -> tuple[Samples, Samples]:
    """Every reset and every step the expert takes, an episode per seed, each after `idle_s` asleep."""
    env = ServiceIncidentEnvironment()
    resets: Samples = []
    steps: Samples = []
    for seed in seeds:
        incident_id = incidents[seed % len(incidents)] if incidents else None
        rest(idle_s)
        started = clock()
        obs = env.reset(task_id=task_id, seed=seed, incident_id=incident_id)
        count = len(obs.services)
        resets.append((count, clock() - started))
        agent = ExpertAgent()
        while not obs.done:
            action = agent.act(obs)
            rest(idle_s)
            started = clock()
            obs = env.step(action)
            steps.append((count, clock() - started))
    return resets, steps


def replayed(task_id: str, seeds: range, clock: Callable[[], float], idle_s: float) -> list[float]:
    """A reset of each seed, alone: timed on seeds `measure` played, it is a seed reset again."""
    env = ServiceIncidentEnvironment()
    found = []
    for seed in seeds:
        rest(idle_s)
        started = clock()
        env.reset(task_id=task_id, seed=seed)
        found.append(clock() - started)
    return found


def rest(idle_s: float) -> None:
    """Sleep before a timed call, if asked: the process gives up its core, as a server between calls."""
    if idle_s:
        time.sleep(idle_s)


def seconds(samples: Samples, count: int | None = None) -> list[float]:
    """The seconds of the samples, of incidents with `count` services only if given."""
    return [taken for services, taken in samples if count is None or services == count]


def row(label: str, resets: list[float], steps: list[float]) -> str:
    cells = [statistics.median(resets), percentile(resets, 0.99)]
    cells += [statistics.median(steps), percentile(steps, 0.99)] if steps else []
    return f"{label:<26}" + "".join(f"{1e6 * value:>14.1f}" for value in cells)


def report(label: str, measured: Timed, other: Timed | None) -> None:
    """A row; with another core's, the ratio of this one's medians to its, and its row below."""
    resets, steps = measured
    line = row(label, resets, steps)
    if other is not None:
        other_resets, other_steps = other
        ratios = [statistics.median(resets) / statistics.median(other_resets)]
        ratios += [statistics.median(steps) / statistics.median(other_steps)] if steps else []
        line += " " * (28 if not steps else 0) + "".join(f"{ratio:>10.2f}" for ratio in ratios)
    print(line)
    if other is not None:
        print(row("  against", *other))


def timings(args: argparse.Namespace) -> Rows:
    """Every row's seconds, with this process's core."""
    clock, idle_s = CLOCKS[args.clock], args.idle_us / 1e6
    found: Rows = {}
    largest: Timed = ([], [])
    for task_id in args.tasks:
        # Warm caches and the allocator on seeds of their own: a training reset timed on a seed played
        # already would find its incident's worlds simulated.
        measure(task_id, range(args.episodes, args.episodes + 20), clock, idle_s)
        resets, steps = measure(task_id, range(args.episodes), clock, idle_s)
        found[task_id] = (seconds(resets), seconds(steps))
        if TASKS[task_id].generated:
            largest[0].extend(seconds(resets, MAX_SERVICES))
            largest[1].extend(seconds(steps, MAX_SERVICES))
    if largest[0]:
        found[TRAINING_ROW] = largest
    for task_id in [t for t in args.tasks if TASKS[t].generated]:
        # A group of rollouts resets one seed several times: the seeds played above, reset again.
        found[f"{task_id} seed again"] = (replayed(task_id, range(args.episodes), clock, idle_s), [])
    if not args.no_frozen:
        frozen = [i for i, incident in dataset.frozen().items() if len(incident.services) == MAX_SERVICES]
        task = next(t.id for t in TASKS.values() if frozen and frozen[0] in t.incidents)
        resets, steps = measure(task, range(args.episodes), clock, idle_s, frozen)
        found[f"{MAX_SERVICES}-service frozen ({len(frozen)})"] = (seconds(resets), seconds(steps))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=1000, help="episodes per task")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="what a call's time is")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS), help="tasks to time")
    parser.add_argument("--no-frozen", action="store_true", help="skip the frozen 15-service incidents")
    parser.add_argument("--idle-us", type=float, default=0.0, help="microseconds asleep before each timed call")
    add_arguments(parser)
    args = parser.parse_args()
    if args.idle_us < 0:
        parser.error("--idle-us is at least 0")
    mine, other = measured(Path(__file__), args, timings)
    if args.idle_us:
        print(f"every timed call after {args.idle_us:g} µs asleep")
    header = f"{'task':<26}{'reset p50 us':>14}{'reset p99 us':>14}{'step p50 us':>14}{'step p99 us':>14}"
    print(header + (f"{'reset x':>10}{'step x':>10}" if other is not None else ""))
    for label, (resets, steps) in mine.items():
        # A row the other core has none of (its incidents differ) is printed without a ratio.
        theirs = None if other is None or label not in other else other[label]
        report(f"{label} ({len(resets)})" if label == TRAINING_ROW else label, (resets, steps), theirs)


if __name__ == "__main__":
    main()
