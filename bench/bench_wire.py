"""What encoding the observation frame costs beside the step, step by step over gen_expert episodes.

The observation is cumulative (every view taken so far is in every later frame), so a frame grows over
an episode and so would its encoding. Each episode is played twice over, by the expert and by an agent
that inspects everything in turn (the frame grows the most), and every step's reply is encoded both
ways, in process (the least of a few tries each): plainly, as one msgspec encode of the whole frame,
and by the server's FrameEncoder, which splices in the bytes of the views earlier frames carried.
Both give the same bytes (checked here on every frame, and by tests/test_wire_frames.py). Times are
the process's CPU time, so other work on a shared machine inflates nothing; the step's is the core's
own step. Beside the table by step number, one of each episode's first and last step: the smallest
and the largest frame an episode sends after its reset.

    python bench/bench_wire.py [--episodes N] [--task gen_expert]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator

import msgspec

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import ExpertAgent
from service_incident.models import ACTIONS_BY_NAME, Action, Observation, parse_action
from service_incident.wire import FrameEncoder, ObservationFrame, step_payload

clock = time.process_time
REPEATS = 4  # encodes of each kind timed per frame


def every_look(observation: Observation) -> Iterator[Action]:
    """Every inspection of every service, round and round: views pile up, and a second look at a
    service replaces its view with a newer one."""
    looks = [name for name in observation.available_actions if ACTIONS_BY_NAME[name].kind == "inspect"]
    while True:
        for service in observation.services:
            for look in looks:
                yield parse_action({"action": look, "target": service})


def plain_text(observation: Observation) -> str:
    """The frame as one plain encode of the whole observation."""
    return msgspec.json.encode(ObservationFrame(step_payload(observation))).decode()


def timed(frames: FrameEncoder, observation: Observation) -> tuple[float, float]:
    """The least CPU time of a few plain and spliced encodes of one frame, taken in turns so that
    neither always finds the caches warmed by the other. Each spliced encode starts from a copy of
    the session's encoder as the step left it: what the server does for this frame, and no more
    (a second encode of the frame would find its new views kept too). The copy is shallow: an
    encoder replaces what it keeps, never changes it, so copies share it safely."""
    plain: list[float] = []
    spliced: list[float] = []
    for turn in range(REPEATS):
        for which in (0, 1) if turn % 2 == 0 else (1, 0):
            trial = copy.copy(frames)
            started = clock()
            if which == 0:
                plain_text(observation)
            else:
                trial.observation_text(observation)
            (plain if which == 0 else spliced).append(clock() - started)
    return min(plain), min(spliced)


# One step's reply: frame bytes, core step, plain encode, spliced encode (seconds).
Sample = tuple[int, float, float, float]
# Each episode's steps, in order.
Episodes = list[list[Sample]]


def measure(task_id: str, episodes: int) -> tuple[Episodes, Episodes]:
    """(the expert's episodes, every_look's episodes)."""
    env = ServiceIncidentEnvironment()
    found: tuple[Episodes, Episodes] = ([], [])
    for seed in range(episodes):
        for expert, played in zip((True, False), found, strict=True):
            observation = env.reset(task_id=task_id, seed=seed)
            frames = FrameEncoder()
            frames.observation_text(observation)  # the reset's reply, as a session sends it first
            agent, looks = ExpertAgent(), every_look(observation)
            steps: list[Sample] = []
            while not observation.done:
                action = agent.act(observation) if expert else next(looks)
                started = clock()
                observation = env.step(action)
                core = clock() - started
                plain, spliced = timed(frames, observation)
                text = frames.observation_text(observation)  # the reply sent: the encoder moves on
                if text != plain_text(observation):
                    raise AssertionError(f"spliced frame differs from the plain encode: {task_id} seed {seed}")
                steps.append((len(text), core, plain, spliced))
            played.append(steps)
    return found


def row(label: str, samples: list[Sample]) -> str:
    """A table row of the medians of `samples`."""
    size, core, plain, spliced = (statistics.median(column) for column in zip(*samples, strict=True))
    return (
        f"| {label} | {len(samples)} | {size / 1024:.1f} | {core * 1e6:.0f} | {plain * 1e6:.1f} | {spliced * 1e6:.1f} "
        f"| {plain / core:.1%} | {spliced / core:.1%} |"
    )


COLUMNS = (
    "| frames | frame KB | core step | plain encode | spliced encode | plain / step | spliced / step |\n"
    "|---|---|---|---|---|---|---|---|"
)


def table(title: str, episodes: Episodes) -> None:
    by_step: dict[int, list[Sample]] = defaultdict(list)
    for steps in episodes:
        for number, sample in enumerate(steps, 1):
            by_step[number].append(sample)
    print(f"\n{title}: medians per step number (µs, CPU time)\n")
    print(f"| step {COLUMNS}")
    for number in sorted(by_step):
        print(row(str(number), by_step[number]))
    every = [sample for steps in episodes for sample in steps]
    core, plain, spliced = (sum(sample[i] for sample in every) for i in (1, 2, 3))
    print(f"| all | {len(every)} | | | | | {plain / core:.1%} | {spliced / core:.1%} |")
    print(f"\nSummed over every step: spliced encode {spliced / plain:.2f}x the plain encode's CPU time.")
    print(f"\n| each episode's {COLUMNS}")
    print(row("first step", [steps[0] for steps in episodes if steps]))
    print(row("last step", [steps[-1] for steps in episodes if steps]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=40, help="episodes (seeds), each played by both agents")
    parser.add_argument("--task", default="gen_expert", help="the task whose episodes are played")
    args = parser.parse_args()
    measure(args.task, 3)  # warm caches and the allocator
    expert, everything = measure(args.task, args.episodes)
    table(f"{args.task}, the expert agent, {args.episodes} episodes", expert)
    table(f"{args.task}, every inspection in turn, {args.episodes} episodes", everything)


if __name__ == "__main__":
    main()
