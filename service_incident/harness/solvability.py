"""How recoverable the generated labels are: reference policies over many training seeds per difficulty.

This is an analysis tool: it grades declarations against the episode's own world, which no agent,
observation or endpoint ever sees.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..environment import ServiceIncidentEnvironment
from ..generator import PRESETS
from ..models import Declare
from .agents import Agent, ExpertAgent, LoudestSignalAgent


def grade(make_agent: Callable[[], Agent], task_id: str, seed: int) -> tuple[bool, bool, float]:
    """Play one episode: whether the declared root causes and severity were right, and the score."""
    env = ServiceIncidentEnvironment()
    agent = make_agent()
    observation = env.reset(task_id=task_id, seed=seed)
    declared: Declare | None = None
    while not observation.done:
        action = agent.act(observation)
        if isinstance(action, Declare):
            declared = action
        observation = env.step(action)
    episode = env._episode  # the truth, read here and nowhere an agent can reach
    assert episode is not None
    if declared is None:
        return False, False, observation.score or 0.0
    world = episode.world
    roots_right = frozenset([declared.target, *declared.additional_targets]) == world.root_causes
    assert episode.graded_through is not None
    severity_right = declared.severity == world.severity(episode.graded_through)
    return roots_right, severity_right, observation.score or 0.0


def accuracy(make_agent: Callable[[], Agent], task_id: str, seeds: int) -> tuple[float, float, float]:
    """Share of episodes with the root cause(s) right, with the severity right, and the mean score."""
    results = [grade(make_agent, task_id, seed) for seed in range(seeds)]
    return (
        sum(r[0] for r in results) / seeds,
        sum(r[1] for r in results) / seeds,
        sum(r[2] for r in results) / seeds,
    )


def solvability_table(seeds: int, progress: Callable[[str], None] = lambda note: None) -> str:
    """A Markdown table: per difficulty, the expert's root and severity accuracy and the loudest signal's.

    Playing thousands of episodes takes a while: `progress` hears after each policy and difficulty
    how far it got and about how long the rest will take.
    """
    rows = [
        "| difficulty | seeds | expert root | expert severity | expert score | loudest-signal root |",
        "|---|---|---|---|---|---|",
    ]
    runs = len(PRESETS) * 2
    progress(f"playing {runs * seeds} episodes: {seeds} seeds of {len(PRESETS)} difficulties, 2 policies")
    started = time.monotonic()

    def played(done: int, what: str) -> None:
        elapsed = time.monotonic() - started
        left = elapsed / done * (runs - done)
        progress(f"[{done}/{runs}] {what}: {elapsed:.0f} s so far, about {left:.0f} s left")

    for number, difficulty in enumerate(PRESETS):
        task_id = f"gen_{difficulty}"
        root, severity, score = accuracy(ExpertAgent, task_id, seeds)
        played(2 * number + 1, f"expert policy on {difficulty}")
        loud_root, _, _ = accuracy(LoudestSignalAgent, task_id, seeds)
        played(2 * number + 2, f"loudest-signal policy on {difficulty}")
        rows.append(f"| {difficulty} | {seeds} | {root:.1%} | {severity:.1%} | {score:.3f} | {loud_root:.1%} |")
    return "\n".join(rows)
