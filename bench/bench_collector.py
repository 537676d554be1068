"""The garbage collector in a process that holds many sessions, as a server's worker does: CPython's
default policy against the server's (server/collector.py).

Each policy runs in a process of its own (the collector is the process's): `--sessions` environments
play the load test's episode (reset gen_hard, the logs of every service, then their metrics, then a
declaration) in turn, a call each, for `--rounds` rounds. A reset's incident is drawn by a generation
pool's process first, as a server's worker has it drawn (`--in-process`: generated in the process, as
the environment does alone); the waits for the pool are left out of the wall time. Prints, per
policy, the CPU per call (the process's own: the pool's process is not counted), the share of the wall
time spent collecting, and each generation's collections (how many, their mean and longest pause), and
the objects the collector tracks at the end.
    python bench/bench_collector.py [--sessions N] [--rounds N] [--in-process]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import time

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import Action, Declare, InspectLogs, InspectMetrics, ResetRequest
from service_incident.server import collector
from service_incident.server.generation import Generation

POLICIES = ("default", "server")


def episode(services: list[str]) -> list[Action]:
    """The load test's fixed episode, last action first."""
    return [
        *(InspectLogs(target=s) for s in services),
        *(InspectMetrics(target=s) for s in services),
        Declare(target=services[0], severity="P1"),
    ][::-1]


def play(policy: str, sessions: int, rounds: int, in_process: bool) -> dict[str, object]:
    """In this process: the sessions' calls under the policy, and what the collector did meanwhile."""
    envs = [ServiceIncidentEnvironment() for _ in range(sessions)]
    generation = Generation(0 if in_process else 1, None)
    loop = asyncio.new_event_loop()
    waited = 0.0
    if policy == "server":
        collector.settle()
    pauses: list[list[float]] = [[], [], []]
    began = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
        else:
            pauses[info["generation"]].append(time.perf_counter() - began[0])

    gc.callbacks.append(timed)
    left: list[list[Action]] = [[] for _ in envs]
    seeds = [500_000 + 1_000 * i for i in range(sessions)]
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        for i, env in enumerate(envs):
            if not left[i]:
                seeds[i] += 1
                drawn = time.perf_counter()
                loop.run_until_complete(generation.draw(ResetRequest(task_id="gen_hard", seed=seeds[i]), None))
                waited += time.perf_counter() - drawn
                left[i] = episode(env.reset(task_id="gen_hard", seed=seeds[i]).services)
            elif env.step(left[i].pop()).done:
                left[i] = []
    wall, cpu = time.perf_counter() - wall - waited, time.process_time() - cpu
    gc.callbacks.remove(timed)
    generation.close()
    loop.close()
    return {
        "cpu_per_call": cpu / (sessions * rounds),
        "collecting": sum(map(sum, pauses)) / wall,
        "pauses": pauses,
        "tracked": len(gc.get_objects()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--in-process", action="store_true", help="generate each reset's incident in the process")
    parser.add_argument("--policy", choices=POLICIES, help=argparse.SUPPRESS)  # one policy, in this process
    args = parser.parse_args()
    if args.policy:
        print(json.dumps(play(args.policy, args.sessions, args.rounds, args.in_process)))
        return
    print(
        f"{'policy':<9}{'sessions':>9}{'CPU per call':>14}{'collecting':>12}"
        + "".join(f"{f'gen{g}: n, mean, max ms':>26}" for g in range(3))
        + f"{'scanned':>10}"
    )
    for policy in POLICIES:
        command = [sys.executable, __file__, "--policy", policy, "--sessions", str(args.sessions)]
        command += ["--in-process"] if args.in_process else []
        found = json.loads(
            subprocess.run([*command, "--rounds", str(args.rounds)], capture_output=True, check=True).stdout
        )
        cells = "".join(
            f"{f'{len(p)}, {1e3 * sum(p) / len(p) if p else 0:.2f}, {1e3 * max(p, default=0):.1f}':>26}"
            for p in found["pauses"]
        )
        print(
            f"{policy:<9}{args.sessions:>9}{1e6 * found['cpu_per_call']:>11.0f} µs{100 * found['collecting']:>11.1f}%"
            f"{cells}{found['tracked']:>10}"
        )


if __name__ == "__main__":
    main()
