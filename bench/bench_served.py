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

The three run in turn, `--rounds` times, `--seconds` each after a warm-up, and the table pools the
rounds. `SERVICE_INCIDENT_COMPILED=0` in the environment times the core's sources instead of its
compiled modules (the server inherits it); the first line says which ran.

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
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from bench_transport import policy

import service_incident.environment
from service_incident.client import ServiceIncidentEnv
from service_incident.environment import ServiceIncidentEnvironment

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from serving import process_on_socket  # noqa: E402  (a server on a loopback socket of its own)

TASK = "hard"
# Our server with its environment's steps timed: on SIGUSR1 it writes the CPU seconds of the steps
# since the last signal to the file named by its last argument (through a rename, so a reader never
# sees half of it), and starts counting again.
SERVED = """
import json, os, signal, sys, time
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

ServiceIncidentEnvironment.step = timed
signal.signal(signal.SIGUSR1, hand_over)
main(sys.argv[1:])
"""


def in_process(seconds: float, idle_s: float) -> list[float]:
    """CPU seconds of each step of the fixed episode played in this process for `seconds`, each step
    after `idle_s` asleep."""
    env = ServiceIncidentEnvironment()
    taken: list[float] = []
    seed = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        seed += 1
        observation = env.reset(task_id=TASK, seed=seed)
        for action in policy(observation):
            if idle_s:
                time.sleep(idle_s)
            started = time.thread_time()
            observation = env.step(action)
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
    steps = asyncio.run(play(url, seconds, first_seed + 100_000))
    taken = handed_over(pid, report)
    if len(taken) != steps:
        raise RuntimeError(f"the server timed {len(taken)} steps of the {steps} played")
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds of each way, each round")
    parser.add_argument("--rounds", type=int, default=2, help="times each way runs, in turn")
    parser.add_argument("--idle-us", type=float, default=200.0, help="microseconds asleep before an idle step")
    parser.add_argument("--warm-up", type=float, default=2.0, help="untimed seconds before each served run")
    args = parser.parse_args()
    compiled = str(service_incident.environment.__file__).endswith(tuple(EXTENSION_SUFFIXES))
    idle = f"in process, after {args.idle_us:.0f} µs idle"
    ways: dict[str, list[float]] = {"in process, back to back": [], idle: [], "inside our server, one session": []}
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "steps.json"
        command = [sys.executable, "-c", SERVED, "--fd", "{fd}", str(report)]
        with process_on_socket(command, env={"LOG_LEVEL": "warning"}) as (url, server):
            runs: list[tuple[str, Callable[[int], list[float]]]] = [
                ("in process, back to back", lambda _: in_process(args.seconds, 0.0)),
                (idle, lambda _: in_process(args.seconds, args.idle_us / 1e6)),
                (
                    "inside our server, one session",
                    lambda r: served(url, server.pid, report, args.seconds, args.warm_up, r * 1000),
                ),
            ]
            in_process(args.warm_up, 0.0)
            for round_ in range(args.rounds):
                for label, run in runs:
                    ways[label] += run(round_)
    print(
        f"The environment's step on {TASK}, CPU of the thread that ran it; core {'compiled' if compiled else 'source'}"
    )
    print()
    print("| where the step ran | steps | mean µs | p50 µs | p99 µs | mean x back to back |")
    print("|---|---|---|---|---|---|")
    base = statistics.fmean(ways["in process, back to back"])
    for label, taken in ways.items():
        ordered = sorted(taken)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        mean = statistics.fmean(taken)
        print(
            f"| {label} | {len(taken):,} | {mean * 1e6:.1f} | {statistics.median(taken) * 1e6:.1f} | "
            f"{p99 * 1e6:.1f} | {mean / base:.2f} |"
        )


if __name__ == "__main__":
    main()
