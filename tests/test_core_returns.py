"""Rewards and the score agree: every step's reward inside the declared range, every return equal to the
score, in both reward modes (tests/test_interop_validate.py keeps the manifest's range the declared one).
bench/bench_rewards.py plays 10,000 such episodes."""

from __future__ import annotations

import math

import pytest

from service_incident import scoring
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.returns import MODES, RETURN_TOLERANCE, check, players
from service_incident.models import Declare, InspectLogs, InspectMetrics, RewardMode, parse_action
from service_incident.tasks import TASKS


def test_every_player_on_every_task_in_both_modes_is_paid_its_score_within_the_range() -> None:
    tallies = check(TASKS, range(2))
    assert set(tallies) == {(task_id, mode) for task_id in TASKS for mode in MODES}
    for key, tally in tallies.items():
        assert tally.episodes == 2 * len(players(0)), key
        assert tally.clean, (key, tally)


@pytest.mark.parametrize("mode", MODES)
def test_the_readme_example_returns_its_score(mode: RewardMode) -> None:
    """It returned 0.95 with a score of 0.7287."""
    env = ServiceIncidentEnvironment()
    env.reset(task_id="hard", seed=7, reward_mode=mode)
    steps = [env.step(action) for action in (InspectLogs(target="cache"), InspectMetrics(target="cache"))]
    last = env.step(Declare(target="cache", severity="P1"))
    rewards = [step.reward or 0.0 for step in [*steps, last]]
    assert last.done and last.score is not None
    assert math.fsum(rewards) == pytest.approx(last.score, abs=RETURN_TOLERANCE)
    assert last.metadata["cumulative_reward"] == last.score


@pytest.mark.parametrize("mode", MODES)
def test_useless_remedies_until_the_budget_is_spent_stay_in_range(mode: RewardMode) -> None:
    """Repeated scale-ups that do nothing ended at -1.2 on rca_01."""
    env = ServiceIncidentEnvironment()
    obs = env.reset(task_id="rca_01", seed=0, reward_mode=mode)
    rewards = []
    while not obs.done:
        obs = env.step(parse_action({"action": "scale_up", "target": obs.services[0]}))
        rewards.append(obs.reward or 0.0)
    assert all(scoring.REWARD_MIN <= reward <= scoring.REWARD_MAX for reward in rewards)
    assert math.fsum(rewards) == pytest.approx(obs.score, abs=RETURN_TOLERANCE)
