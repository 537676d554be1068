"""Rewards against the score: every step's reward inside the declared range, every return equal to the score.

`check` plays episodes of every reference agent and of a player of random valid actions (every action
a task allows, remedies included, answers rarely so that episodes run long), on the given tasks and
seeds, in both reward modes, and tallies what it found per task and mode.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass

from ..environment import ServiceIncidentEnvironment
from ..models import ACTIONS_BY_NAME, Action, Declare, DeclareRootCauses, Observation, Resolve, RewardMode
from ..scoring import REWARD_MAX, REWARD_MIN
from .agents import REFERENCE_AGENTS, Agent

MODES: tuple[RewardMode, ...] = ("final", "dense")
# How far a return may be from the score: the rewards are rounded changes of potentials of four decimals.
RETURN_TOLERANCE = 1e-9


class RandomValidPlayer:
    """Any action the task allows on any service, answers rarely, so episodes run long."""

    name = "random_valid"

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"digest:{seed}")

    def act(self, observation: Observation) -> Action:
        rng = self._rng
        services = observation.services
        ending = [name for name in observation.available_actions if name in observation.terminal_actions]
        others = [name for name in observation.available_actions if name not in ending]
        name = rng.choice(ending if not others or rng.random() < 0.08 else others)
        action_type = ACTIONS_BY_NAME[name]
        rationale = f"look {rng.randrange(100)}" if rng.random() < 0.9 else None
        if action_type is Declare:
            extra = rng.sample(services, rng.randint(0, min(2, len(services))))
            return Declare(
                target=rng.choice(services),
                severity=rng.choice(("P0", "P1", "P2")),
                additional_targets=extra,
                rationale=rationale,
            )
        if action_type is DeclareRootCauses:
            return DeclareRootCauses(
                targets=rng.sample(services, rng.randint(1, min(3, len(services)))), rationale=rationale
            )
        if action_type is Resolve:
            return Resolve(target=rng.choice([None, *services]), rationale=rationale)
        return action_type(target=rng.choice(services), rationale=rationale)  # type: ignore[call-arg, return-value]


def players(seed: int) -> dict[str, Agent]:
    """Every reference agent and the random valid player, each new, for one episode's seed."""
    found: dict[str, Agent] = {name: factory(seed) for name, factory in REFERENCE_AGENTS.items()}
    found["random_valid"] = RandomValidPlayer(seed)
    return found


@dataclass(slots=True)
class Tally:
    """What the episodes of one task in one reward mode paid."""

    episodes: int = 0
    steps: int = 0
    lowest: float = math.inf
    highest: float = -math.inf
    out_of_range: int = 0  # rewards outside [REWARD_MIN, REWARD_MAX]
    paid_early: int = 0  # final mode: rewards other than 0 before the last step
    worst_gap: float = 0.0  # the largest |return - score|
    apart: int = 0  # episodes whose return is not their score

    def add(self, rewards: list[float], score: float, mode: RewardMode) -> None:
        self.episodes += 1
        self.steps += len(rewards)
        self.lowest = min(self.lowest, *rewards)
        self.highest = max(self.highest, *rewards)
        self.out_of_range += sum(not REWARD_MIN <= reward <= REWARD_MAX for reward in rewards)
        self.paid_early += sum(reward != 0.0 for reward in rewards[:-1]) if mode == "final" else 0
        gap = abs(math.fsum(rewards) - score)
        self.worst_gap = max(self.worst_gap, gap)
        self.apart += gap > RETURN_TOLERANCE

    def merge(self, other: Tally) -> None:
        self.episodes += other.episodes
        self.steps += other.steps
        self.lowest, self.highest = min(self.lowest, other.lowest), max(self.highest, other.highest)
        self.out_of_range += other.out_of_range
        self.paid_early += other.paid_early
        self.worst_gap = max(self.worst_gap, other.worst_gap)
        self.apart += other.apart

    @property
    def clean(self) -> bool:
        return not (self.out_of_range or self.paid_early or self.apart)


def play(
    env: ServiceIncidentEnvironment, agent: Agent, task_id: str, seed: int, mode: RewardMode
) -> tuple[list[float], float]:
    """One episode: every step's reward, and the score."""
    observation = env.reset(task_id=task_id, seed=seed, reward_mode=mode)
    rewards: list[float] = []
    while not observation.done:
        observation = env.step(agent.act(observation))
        rewards.append(observation.reward if observation.reward is not None else math.nan)
    assert observation.score is not None
    return rewards, observation.score


def check(tasks: Iterable[str], seeds: Iterable[int]) -> dict[tuple[str, RewardMode], Tally]:
    """Every player on every (task, seed) in both modes, tallied by (task, mode)."""
    env = ServiceIncidentEnvironment()
    tallies: dict[tuple[str, RewardMode], Tally] = {}
    seeds = list(seeds)
    for task_id in tasks:
        for mode in MODES:
            tally = tallies.setdefault((task_id, mode), Tally())
            for seed in seeds:
                for agent in players(seed).values():
                    tally.add(*play(env, agent, task_id, seed, mode), mode)
    return tallies
