"""A trace sample's draws: the compiled kernel (`telemetry/_spans.pyx`) against the Python loop it
stands for, on the samples the expert's trace views draw.

Plays the expert on each task; every trace view it opens is drawn twice more from its key, once by
each, in turn, and checked to be the same requests. Prints per task the views, the median
spans a sample draws, each one's median microseconds (the span sources included, as a view pays
them) and the ratio of the medians (kernel over loop).
    python bench/bench_spans.py [--episodes N] [--tasks ID ...]
"""

from __future__ import annotations

import argparse
import statistics
import time

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import ExpertAgent
from service_incident.tasks import TASKS
from service_incident.telemetry import traces
from service_incident.world import World


def measure(task_id: str, episodes: int) -> tuple[list[int], list[float], list[float]]:
    kernel = traces.compiled_kernel()
    if kernel is None:
        raise SystemExit("the kernel is not compiled in this install: `make compile`")
    spans: list[int] = []
    loop_s: list[float] = []
    kernel_s: list[float] = []

    def timed(world: World, service: str, step: int, key: str) -> list[traces.Request]:
        traces._span_source(world, service, step)  # the step's states simulated before either is timed
        found = []
        for draw, seconds in ((traces.draw_in_python, loop_s), (kernel, kernel_s)):
            started = time.perf_counter()
            found.append(draw(world, service, step, key))
            seconds.append(time.perf_counter() - started)
        if found[0] != found[1]:
            raise SystemExit(f"the kernel drew other requests: {world.incident.id} {service} step {step}")
        spans.append(sum(len(request.spans) for request in found[1]))
        return found[1]

    env = ServiceIncidentEnvironment()
    drawing, traces.draw = traces.draw, timed
    try:
        for seed in range(episodes):
            obs = env.reset(task_id=task_id, seed=seed)
            agent = ExpertAgent()
            while not obs.done:
                obs = env.step(agent.act(obs))
    finally:
        traces.draw = drawing
    return spans, loop_s, kernel_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=100, help="episodes per task")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=["gen_hard", "gen_expert"])
    args = parser.parse_args()
    print(f"{'task':<14}{'views':>7}{'spans p50':>11}{'loop p50 us':>13}{'kernel p50 us':>15}{'ratio':>8}")
    for task_id in args.tasks:
        spans, loop_s, kernel_s = measure(task_id, args.episodes)
        if not spans:
            print(f"{task_id:<14}{0:>7}")
            continue
        loop, kernel = statistics.median(loop_s), statistics.median(kernel_s)
        print(
            f"{task_id:<14}{len(spans):>7}{statistics.median(spans):>11.0f}"
            f"{1e6 * loop:>13.1f}{1e6 * kernel:>15.1f}{kernel / loop:>8.2f}"
        )


if __name__ == "__main__":
    main()
