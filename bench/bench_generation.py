"""What a training reset and its episode cost the server's own process once the generation pool drew
the incident: the CPU the event loop spends, against what the pool spends beside it.

A server draws a training incident in a process of its generation pool (`server/generation.py`). The
pool sends back the incident and what playing its reset simulated and rendered there for every episode
of it (the states up to the page; the pages and the first look's log lines, `telemetry.state.Shared`);
the server's process then starts the episode and answers its steps. Rows:
- "renderings kept": the server as it is;
- "incident alone": the incident kept and the rest dropped (`keep_untouched_steps` and `keep_shared`
  made no-ops), so the server's process simulates and renders it all itself, as it did before the
  pool sent them.
Each seed is drawn by one pool and played by the two rows in turn (new seeds for each: every draw of
a training task is a new incident), so load on a shared machine falls on both alike. Two episodes:
the load test's (bench/bench_load.py: the logs, then the metrics, of every service) and the
expert's. CPU time of this process (`time.process_time`): during the draw (taking what the pool sent),
the reset, and the whole episode with its reset and the draw; the pool's side as the wall time of a
draw, which the reset waits on.
    python bench/bench_generation.py [--episodes N] [--tasks ID ...]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import ExpertAgent
from service_incident.models import Action, Observation, ResetRequest
from service_incident.server import collector, generation
from service_incident.server.generation import Generation

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_transport import policy  # the load test's fixed episode

KEPT, ALONE = "renderings kept", "incident alone"
# What the server keeps of a draw besides its incident.
KEEPS = ("keep_untouched_steps", "keep_shared")


def dropped(*_: object) -> None:
    """A keep that keeps nothing."""


def fixed(observation: Observation) -> list[Action]:
    return policy(observation)  # type: ignore[arg-type]  (reads the services only)


def play(env: ServiceIncidentEnvironment, task_id: str, seed: int, episode: str) -> tuple[float, float]:
    """CPU seconds of the reset, and of the whole episode with it."""
    started = time.process_time()
    observation = env.reset(task_id=task_id, seed=seed)
    reset = time.process_time() - started
    actions = iter(fixed(observation)) if episode == "load test" else None
    expert = ExpertAgent()
    while not observation.done:
        action = next(actions, None) if actions is not None else expert.act(observation)
        if action is None:
            break
        observation = env.step(action)
    return reset, time.process_time() - started


async def measure(task_id: str, episodes: int, first_seed: int) -> dict[tuple[str, str], dict[str, list[float]]]:
    keeps = {name: getattr(generation, name) for name in KEEPS}
    pool = Generation(1, None)
    env = ServiceIncidentEnvironment()
    found: dict[tuple[str, str], dict[str, list[float]]] = {}
    try:
        for index in range(episodes):
            for episode in ("load test", "expert"):
                for row in (KEPT, ALONE) if index % 2 else (ALONE, KEPT):
                    seed = first_seed + index * 4 + (episode == "expert") * 2 + (row == ALONE)  # each a new incident
                    for name, keep in keeps.items():
                        setattr(generation, name, keep if row == KEPT else dropped)
                    began, cpu = time.perf_counter(), time.process_time()
                    await pool.draw(ResetRequest(task_id=task_id, seed=seed), None)
                    drawn, taken = time.perf_counter() - began, time.process_time() - cpu
                    reset, whole = play(env, task_id, seed, episode)
                    times = found.setdefault((episode, row), {"draw": [], "taken": [], "reset": [], "episode": []})
                    times["draw"].append(drawn)
                    times["taken"].append(taken)
                    times["reset"].append(reset)
                    times["episode"].append(taken + whole)
    finally:
        for name, keep in keeps.items():
            setattr(generation, name, keep)
        pool.close()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=100, help="seeds per task, episode and row")
    parser.add_argument("--tasks", nargs="+", default=["gen_hard", "gen_expert"])
    args = parser.parse_args()
    collector.settle()  # the server's own collector policy
    print(
        f"\nThe server's process after the pool's draw: medians of {args.episodes} new seeds per row "
        "(CPU time of this process; a draw's wall time)\n"
    )
    print(
        "| task | episode | row | draw ms (pool, wall) | draw µs (this process) | reset µs | episode ms "
        "| reset ratio | episode ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for number, task_id in enumerate(args.tasks):
        found = asyncio.run(measure(task_id, args.episodes, 500_000 + number * 100_000))
        for episode in ("load test", "expert"):
            medians = {
                row: {k: statistics.median(v) for k, v in found[(episode, row)].items()} for row in (KEPT, ALONE)
            }
            for row in (KEPT, ALONE):
                m = medians[row]
                ratios = (
                    f"{m['reset'] / medians[ALONE]['reset']:.2f} | {m['episode'] / medians[ALONE]['episode']:.2f}"
                    if row == KEPT
                    else " | "
                )
                print(
                    f"| {task_id} | {episode} | {row} | {m['draw'] * 1e3:.2f} | {m['taken'] * 1e6:,.0f} "
                    f"| {m['reset'] * 1e6:,.0f} "
                    f"| {m['episode'] * 1e3:.2f} | {ratios} |"
                )
    print(
        "\nRatios: renderings kept over incident alone; an episode's CPU counts its draw's in this process too."
        "\nThe pool simulates and renders in both rows (the second drops what it sent), so the draw's wall time"
        "\nshows what a reset waits on, not a difference between the rows."
    )


if __name__ == "__main__":
    main()
