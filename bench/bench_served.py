"""The environment's step timed where it runs: in a loop in process, and inside our server.

`bench_core.py` times calls made back to back in one process. A server makes its calls between its
other work (the frame's parse, the encode, the socket, the loop) and between waits on its socket; the
same step costs it more. This plays the transport benchmark's fixed episode on `hard` (every service's
logs, then metrics, then a declaration) three ways, each timed by the thread's CPU clock around
`ServiceIncidentEnvironment.step`:

- in process, steps back to back;
- in process, each step after the process slept `--idle-us` microseconds, as a server waits on its
  socket between calls;
- over a socket to our server (`python -m service_incident.server`'s main, one session, one step in
  flight), the server timing its environment's steps with a wrapper installed before it starts (two
  clock reads a step), and handing them over when signalled.

This process takes the server's collector policy (`server.collector.settle`), so the three differ in
where the step runs and nothing else. Each round runs the three in turn, the order reversed every
other round, each on seeds of its own for `--seconds` after `--warm-up` seconds of untimed play; the
table pools the rounds. `SERVICE_INCIDENT_COMPILED=0` in the environment times the core's sources
instead of its compiled modules (the server inherits it); the first line says which ran.

    .venv/bin/python bench/bench_served.py [--seconds S] [--rounds N] [--idle-us N] [--warm-up S]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from against import positive, runs_compiled
from bench_core import percentile, rest
from bench_transport import policy

from service_incident.client import ServiceIncidentEnv
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.server import collector

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from serving import process_on_socket  # noqa: E402  (a server on a loopback socket of its own)

TASK = "hard"
# Seeds of a run: each run plays seeds of its own, from a round's and a way's offset.
ROUND_SEEDS, WAY_SEEDS = 1_000_000, 100_000
# Our server with its environment's steps timed: on SIGUSR1 it writes the CPU seconds of the steps
# since the last signal to the file named by its last argument (through a rename, so a reader never
# sees half of it), and starts counting again. The handler runs on the event loop's thread, between
# two steps. A watcher ends it once this script is gone, however it ended.
SERVED = """
import json, os, signal, sys, threading, time
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.server.app import main

report = sys.argv.pop()
step = ServiceIncidentEnvironment.step
taken = []

def timed(self, action):
    started = time.thread_time()
    try:
        return step(self, action)
    finally:
        taken.append(time.thread_time() - started)

def hand_over(signum, frame):
    with open(report + ".part", "w") as file:
        json.dump(taken, file)
    os.replace(report + ".part", report)
    taken.clear()

def exit_with_parent(parent=os.getppid()):
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)

ServiceIncidentEnvironment.step = timed
signal.signal(signal.SIGUSR1, hand_over)
threading.Thread(target=exit_with_parent, daemon=True).start()
main(sys.argv[1:])
"""
# A run of one way: its seconds, its untimed seconds before, its first seed; the CPU seconds of its steps.
Way = Callable[[float, float, int], list[float]]


def in_process(idle_s: float, seconds: float, warm_up: float, first_seed: int) -> list[float]:
    """CPU seconds of each step of the fixed episode played in this process for `seconds` (after
    `warm_up` seconds untimed), each step after `idle_s` asleep."""
    env = ServiceIncidentEnvironment()
    taken: list[float] = []
    seed = first_seed
    timed_from = time.perf_counter() + warm_up
    deadline = timed_from + seconds
    while time.perf_counter() < deadline:
        seed += 1
        observation = env.reset(task_id=TASK, seed=seed)
        timed = time.perf_counter() >= timed_from
        for action in policy(observation):
            rest(idle_s)
            started = time.thread_time()
            observation = env.step(action)
            if timed:
                taken.append(time.thread_time() - started)
            if observation.done:
                break
    return taken


async def play(url: str, seconds: float, first_seed: int) -> int:
    """The fixed episode over one session for `seconds`, one step in flight: how many steps."""
    steps = 0
    seed = first_seed
    deadline = time.perf_counter() + seconds
    async with ServiceIncidentEnv(url) as env:
        while time.perf_counter() < deadline:
            seed += 1
            result = await env.reset(task_id=TASK, seed=seed)
            for action in policy(result.observation):
                result = await env.step(action)
                steps += 1
                if result.done:
                    break
        if env.resumes:
            # A resumed episode's steps are stepped again on the server, counted with the rest.
            raise RuntimeError("the session lost its socket and resumed: its steps were timed twice")
    return steps


def handed_over(pid: int, report: Path) -> list[float]:
    """The server's step times since its last hand-over."""
    report.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not report.exists():
        if time.monotonic() > deadline:
            raise RuntimeError("the server did not hand its step times over")
        time.sleep(0.01)
    found: list[float] = json.loads(report.read_text())
    return found


def served(url: str, pid: int, report: Path, seconds: float, warm_up: float, first_seed: int) -> list[float]:
    """CPU seconds of each step our server's environment took while one session played for `seconds`,
    after `warm_up` seconds of play untimed."""
    asyncio.run(play(url, warm_up, first_seed))
    handed_over(pid, report)
    steps = asyncio.run(play(url, seconds, first_seed + WAY_SEEDS // 2))
    taken = handed_over(pid, report)
    if len(taken) != steps:
        raise RuntimeError(f"the server timed {len(taken)} steps of the {steps} played")
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds of each way, each round")
    parser.add_argument("--rounds", type=positive, default=2, help="times each way runs")
    parser.add_argument("--idle-us", type=float, default=200.0, help="microseconds asleep before an idle step")
    parser.add_argument("--warm-up", type=float, default=2.0, help="untimed seconds before each timed run")
    args = parser.parse_args()
    if min(args.seconds, args.idle_us, args.warm_up) < 0:
        parser.error("--seconds, --idle-us and --warm-up are at least 0")
    collector.settle()
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "steps.json"
        command = [sys.executable, "-c", SERVED, "--fd", "{fd}", str(report)]
        with process_on_socket(command, env={"LOG_LEVEL": "warning"}) as (url, server):
            ways: dict[str, Way] = {
                "in process, back to back": lambda *run: in_process(0.0, *run),
                f"in process, after {args.idle_us:.0f} µs idle": lambda *run: in_process(args.idle_us / 1e6, *run),
                "inside our server, one session": lambda *run: served(url, server.pid, report, *run),
            }
            taken: dict[str, list[float]] = {label: [] for label in ways}
            numbered = list(enumerate(ways))
            for round_ in range(args.rounds):
                for position, label in numbered if round_ % 2 == 0 else reversed(numbered):
                    first_seed = round_ * ROUND_SEEDS + position * WAY_SEEDS
                    taken[label] += ways[label](args.seconds, args.warm_up, first_seed)
    print(f"The environment's step on {TASK}, CPU of the thread that ran it; core", end=" ")
    print("compiled" if runs_compiled() else "source")
    print()
    print("| where the step ran | steps | mean µs | p50 µs | p99 µs | mean x back to back |")
    print("|---|---|---|---|---|---|")
    base = statistics.fmean(taken["in process, back to back"])
    for label, seconds in taken.items():
        mean = statistics.fmean(seconds)
        cells = [f"{len(seconds):,}", *(f"{1e6 * value:.1f}" for value in (mean, statistics.median(seconds)))]
        cells += [f"{1e6 * percentile(seconds, 0.99):.1f}", f"{mean / base:.2f}"]
        print(f"| {label} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
