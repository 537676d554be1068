"""Instructions a reset and a step execute, counted by valgrind's callgrind: a count that does not move
with the machine's load, so a change's effect on the core shows in one run, a 1% one included.

The expert plays each task's episodes here first (fresh seeds, its moves recorded). A child process
then replays those moves under callgrind three times: after the same warm-up episodes, once with
nothing more, once resetting each measured seed, once playing each measured episode whole. What the
second adds over the first is counted as the resets; what the third adds over the second as the
steps. Imports, start-up, decoding the moves and the warm-up are the same in all three and cancel out.
The split is not exact (a reset that follows a played episode frees more than one that follows a
reset), but it is the same split for any two cores, which is what a comparison needs. The cyclic
collector is off while the measured episodes run: when it runs follows from allocation counts, so it
would move its work between resets and steps, and between cores, at random. A replay checks that
every episode ends on its last move, as it did when recorded: a core whose episodes diverge is
refused, not counted.

`--against DIR` replays the same moves with another checkout's core (DIR is its root, its hot modules
compiled as this one's are: `make compile` there) and adds the ratios of this core's counts to its.
Both cores are imported from the path alike, and each child says where it found the package. Hash
randomisation is off in the child (PYTHONHASHSEED=0): two runs of one core agree to 0.01% on steps and
0.2% on resets.

Instructions are not time: a change that trades instructions for cache misses or allocation hides
here, and a mean over every call is not `bench_core.py`'s median. A figure of the core's speed is
still `bench_core.py`'s; this one tells whether a change moved the work, and how much. Needs
`valgrind` (Debian's package) on the PATH; a child takes some tens of seconds, and two run at once.
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
from against import checkout, positive

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import ExpertAgent
from service_incident.models import Action
from service_incident.tasks import TASKS

ROOT = Path(__file__).resolve().parents[1]
# What the child does after its warm-up, in the order their counts are subtracted.
MODES = ("none", "resets", "episodes")
# Seeds no test or other bench plays: a fresh draw for every generated task, as a training reset is.
FIRST_SEED = 700_000
# The child: replays recorded moves with whichever core its PYTHONPATH finds, and says where it found it.
CHILD = """
import gc
import sys
import msgspec
import service_incident
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import Action

task, mode, path = sys.argv[1:4]
print(f"package: {service_incident.__file__}", file=sys.stderr)
with open(path, "rb") as recorded:
    moves = msgspec.json.decode(recorded.read(), type=dict[str, list[tuple[int, list[Action]]]])


def replay(seed, actions):
    observation = env.reset(task_id=task, seed=seed)
    for index, action in enumerate(actions):
        if observation.done:
            raise SystemExit(f"seed {seed}: the episode ended before move {index + 1} of {len(actions)}")
        observation = env.step(action)
    if not observation.done:
        raise SystemExit(f"seed {seed}: the episode goes on after its {len(actions)} recorded moves")


env = ServiceIncidentEnvironment()
for seed, actions in moves["warm_up"]:
    replay(seed, actions)
gc.collect()
gc.disable()
for seed, actions in moves["measured"]:
    if mode == "none":
        break
    if mode == "resets":
        env.reset(task_id=task, seed=seed)
    else:
        replay(seed, actions)
"""
_COLLECTED = re.compile(r"Collected : (\d+)")
_PACKAGE = re.compile(r"^package: (.+)$", re.MULTILINE)
Played = list[tuple[int, list[Action]]]


class Counts(NamedTuple):
    reset: float  # instructions per reset
    step: float  # instructions per step


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
    path = os.pathsep.join(filter(None, (str(root), os.environ.get("PYTHONPATH"))))
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": path}
    with tempfile.TemporaryDirectory() as scratch:
        finished = subprocess.run(
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
            check=False,
        )
    found, package = _COLLECTED.search(finished.stderr), _PACKAGE.search(finished.stderr)
    if finished.returncode != 0 or found is None or package is None:
        raise SystemExit(f"the child failed under valgrind ({task_id}, {mode}):\n{finished.stderr[-2000:]}")
    if not Path(package.group(1)).resolve().is_relative_to(root):
        raise SystemExit(f"the child imported {package.group(1)}, not the core at {root}")
    return int(found.group(1))


def measure(root: Path, task_id: str, moves: Path, steps: int, episodes: int, child: Path) -> Counts:
    with ThreadPoolExecutor(max_workers=2) as pool:
        none, resets, played = pool.map(lambda mode: instructions(root, task_id, mode, moves, child), MODES)
    return Counts((resets - none) / episodes, (played - resets) / steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=positive, default=20, help="measured episodes per task")
    parser.add_argument("--warm-up", type=int, default=20, help="episodes played before those measured")
    parser.add_argument(
        "--tasks", nargs="+", choices=list(TASKS), default=["easy", "hard", "gen_hard", "gen_expert"], help="tasks"
    )
    parser.add_argument("--against", type=checkout, help="the root of another checkout to count beside this one")
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
