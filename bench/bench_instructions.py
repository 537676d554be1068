"""Instructions a reset and a step execute, counted by valgrind's callgrind: a count that does not move
with the machine's load, so a change's effect on the core shows in one run, a 1% one included.

The expert plays each task's episodes here first (fresh seeds, its moves recorded). A child process
then replays those moves under callgrind three times: after the same warm-up episodes, once with
nothing more, once resetting each measured seed, once playing each measured episode whole. What the
second adds over the first is the resets; what the third adds over the second is the steps. Imports,
start-up and warm-up cancel out, and the moves come decoded before anything is counted, so the counts
are the core's own. `--against DIR` replays the same moves with another checkout's core (DIR is its
root, its hot modules compiled as this one's are: `make compile` there) and adds the ratios of this
core's counts to its. Hash randomisation is off in the child (PYTHONHASHSEED=0): two runs of one core
agree to about 0.1%.

Instructions are not time: a change that trades instructions for cache misses or allocation hides
here, so a figure of the core's speed is still `bench_core.py`'s; this one tells whether a change
moved the work at all. Needs `valgrind` (Debian's package) on the PATH; a child takes some tens of
seconds, and two run at once.
    python bench/bench_instructions.py [--episodes N] [--warm-up N] [--tasks ID ...] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import msgspec

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import ExpertAgent
from service_incident.models import Action
from service_incident.tasks import TASKS

ROOT = Path(__file__).resolve().parents[1]
# What the child does after its warm-up, in the order their counts are subtracted.
MODES = ("none", "resets", "episodes")
# Seeds far from those the tests and the other benches play, so no cache of this process is warm for them.
FIRST_SEED = 700_000
# The child: replays recorded moves with whichever core its PYTHONPATH finds, measuring nothing itself.
CHILD = """
import sys
import msgspec
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import Action

task, mode, path = sys.argv[1:4]
with open(path, "rb") as recorded:
    moves = msgspec.json.decode(recorded.read(), type=dict[str, list[tuple[int, list[Action]]]])
env = ServiceIncidentEnvironment()
for seed, actions in moves["warm_up"]:
    env.reset(task_id=task, seed=seed)
    for action in actions:
        env.step(action)
for seed, actions in moves["measured"]:
    if mode == "none":
        break
    env.reset(task_id=task, seed=seed)
    if mode == "episodes":
        for action in actions:
            env.step(action)
"""
_COLLECTED = re.compile(r"Collected : (\d+)")


class Counts(NamedTuple):
    reset: float  # instructions per reset
    step: float  # instructions per step


Played = list[tuple[int, list[Action]]]


def record(task_id: str, seeds: range) -> Played:
    """The expert's moves in each seed's episode."""
    env = ServiceIncidentEnvironment()
    played: Played = []
    for seed in seeds:
        obs = env.reset(task_id=task_id, seed=seed)
        agent, actions = ExpertAgent(), []
        while not obs.done:
            action = agent.act(obs)
            actions.append(action)
            obs = env.step(action)
        played.append((seed, actions))
    return played


def instructions(root: Path, task_id: str, mode: str, moves: Path, child: Path) -> int:
    """What the child executes, all told, with the core at `root`: found on the path by both cores alike,
    so that neither pays for another way of importing."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(root)}
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={scratch}/callgrind.out",
                sys.executable,
                str(child),
                task_id,
                mode,
                str(moves),
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=scratch,  # not the checkout: its root would be on the child's path first
            check=False,
        )
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the child failed under valgrind ({task_id}, {mode}):\n{done.stderr[-2000:]}")
    return int(found.group(1))


def measure(root: Path, task_id: str, moves: Path, steps: int, episodes: int, child: Path) -> Counts:
    with ThreadPoolExecutor(max_workers=2) as pool:
        none, resets, played = pool.map(lambda mode: instructions(root, task_id, mode, moves, child), MODES)
    return Counts((resets - none) / episodes, (played - resets) / steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=20, help="measured episodes per task")
    parser.add_argument("--warm-up", type=int, default=20, help="episodes played before those measured")
    parser.add_argument(
        "--tasks", nargs="+", choices=list(TASKS), default=["easy", "hard", "gen_hard", "gen_expert"], help="tasks"
    )
    parser.add_argument("--against", type=Path, help="the root of another checkout to count beside this one")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on the PATH (Debian: apt-get install valgrind)")
    header = f"{'task':<12}{'episodes':>9}{'steps':>7}{'reset Ir':>14}{'step Ir':>12}"
    if args.against:
        header += f"{'against reset':>15}{'against step':>14}{'reset x':>9}{'step x':>8}"
    print(header)
    with tempfile.TemporaryDirectory() as scratch:
        child = Path(scratch, "child.py")
        child.write_text(CHILD)
        for task_id in args.tasks:
            first = FIRST_SEED + args.warm_up
            measured = record(task_id, range(first, first + args.episodes))
            moves = Path(scratch, f"{task_id}.json")
            moves.write_bytes(
                msgspec.json.encode({"warm_up": record(task_id, range(FIRST_SEED, first)), "measured": measured})
            )
            steps = sum(len(actions) for _, actions in measured)
            counts = measure(ROOT, task_id, moves, steps, args.episodes, child)
            line = f"{task_id:<12}{args.episodes:>9}{steps:>7}{counts.reset:>14,.0f}{counts.step:>12,.0f}"
            if args.against:
                other = measure(args.against, task_id, moves, steps, args.episodes, child)
                line += f"{other.reset:>15,.0f}{other.step:>14,.0f}"
                line += f"{counts.reset / other.reset:>9.3f}{counts.step / other.step:>8.3f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
