"""A drawn incident (a training or held-out incident generated from the seed) is kept for the next
episodes of the same draw: a group of rollouts of one seed, or a replayed reset, generates it once.
What is kept is bounded, and a held-out draw is kept apart per key."""

from __future__ import annotations

import msgspec
import pytest

from service_incident import dataset, generator, tasks
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.holdout import HoldoutKey
from service_incident.incidents import Incident

KEY, OTHER_KEY = "draws-test-key-0123456789", "draws-test-key-abcdefghij"


def _refuse(*args: object, **kwargs: object) -> Incident:
    raise AssertionError("generated again")


def test_a_seed_played_again_plays_the_incident_kept_and_the_same_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    env = ServiceIncidentEnvironment()
    first = msgspec.json.encode(env.reset(task_id="gen_hard", seed=41, episode_id="ep"))
    monkeypatch.setattr(generator, "generate", _refuse)
    monkeypatch.setattr(dataset, "generate", _refuse)
    assert msgspec.json.encode(env.reset(task_id="gen_hard", seed=41, episode_id="ep")) == first


def test_an_incident_kept_for_a_draw_is_the_one_its_reset_plays(monkeypatch: pytest.MonkeyPatch) -> None:
    task = tasks.TASKS["gen_medium"]
    kept = dataset.training_incident("medium", 7)
    tasks.keep_drawn(task, 8, None, kept)
    monkeypatch.setattr(dataset, "training_incident", _refuse)
    assert tasks.resolve_incident(task, None, 8) is kept


def test_the_draws_kept_are_bounded_the_least_recently_used_first_out(monkeypatch: pytest.MonkeyPatch) -> None:
    task = tasks.TASKS["gen_easy"]
    incident = dataset.training_incident("easy", 1)
    for seed in range(tasks.DRAWS_KEPT + 1):
        tasks.keep_drawn(task, 10_000 + seed, None, incident)
    generated: list[int] = []
    monkeypatch.setattr(dataset, "training_incident", lambda difficulty, seed: generated.append(seed) or incident)
    tasks.resolve_incident(task, None, 10_000 + tasks.DRAWS_KEPT)
    tasks.resolve_incident(task, None, 10_000)
    assert generated == [10_000]


def test_a_held_out_draw_kept_under_one_key_is_not_played_under_another() -> None:
    task = tasks.HELD_OUT["holdout_hard"]
    mine, theirs = HoldoutKey(KEY), HoldoutKey(OTHER_KEY)
    played = tasks.resolve_incident(task, None, 2, mine)
    assert tasks.resolve_incident(task, None, 2, HoldoutKey(KEY)) is played
    assert tasks.resolve_incident(task, None, 2, theirs).id != played.id


def test_curated_and_frozen_incidents_are_not_draws() -> None:
    assert not tasks.draws_incident(tasks.TASKS["hard"], None)
    assert not tasks.draws_incident(tasks.TASKS["gen_hard"], tasks.TASKS["gen_hard"].incidents[0])
    assert tasks.draws_incident(tasks.TASKS["gen_hard"], None)
    assert tasks.draws_incident(tasks.HELD_OUT["holdout_hard"], None)
