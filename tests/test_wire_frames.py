"""A session's frames, encoded with earlier views spliced in, are byte for byte a plain encode's."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import ExpertAgent
from service_incident.models import InspectMetrics, MetricPoint, Observation
from service_incident.wire import (
    SPLICED_VIEWS,
    FrameEncoder,
    ObservationFrame,
    Resumed,
    ResumedFrame,
    http_step_payload,
    step_payload,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_wire import every_look  # the agent whose frames grow the most, the bench's too

TASKS = ("gen_expert", "gen_hard", "hard", "easy", "rca_01")


def plain(observation: Observation) -> bytes:
    return msgspec.json.encode(ObservationFrame(step_payload(observation)))


def episodes(env: ServiceIncidentEnvironment, task_id: str, seeds: range) -> Iterator[tuple[str, Observation]]:
    """("reset" | "step", observation) over whole episodes, each seed played by the expert and by every_look."""
    for seed in seeds:
        for expert in (True, False):
            observation = env.reset(task_id=task_id, seed=seed)
            yield "reset", observation
            agent, looks = ExpertAgent(), every_look(observation)
            while not observation.done:
                observation = env.step(agent.act(observation) if expert else next(looks))
                yield "step", observation


@pytest.mark.parametrize("task_id", TASKS)
def test_spliced_frames_are_the_plain_encoding_over_real_episodes(task_id: str) -> None:
    # One encoder for all the episodes, as one socket plays many: what it keeps from one must not leak into the next.
    frames, http, env = FrameEncoder(), FrameEncoder(), ServiceIncidentEnvironment()
    spliced = 0
    for kind, observation in episodes(env, task_id, range(3)):
        if kind == "reset":
            reply = frames.reset_text(observation, "ep-1").encode()
            expected = msgspec.json.encode(ObservationFrame(http_step_payload(observation, "ep-1")))
        else:
            reply, expected = frames.observation_text(observation).encode(), plain(observation)
        assert reply == expected
        assert http.http_body(observation, "ep-1") == msgspec.json.encode(http_step_payload(observation, "ep-1"))
        spliced += sum(len(getattr(observation, name)) for name in SPLICED_VIEWS)
    last = frames.resumed_text(observation, 7).encode()
    assert last == msgspec.json.encode(ResumedFrame(Resumed(7, step_payload(observation))))
    assert spliced > 0, "the episodes showed no view that is spliced: the comparison proved nothing"


def test_a_view_is_spliced_from_the_bytes_kept_not_encoded_again() -> None:
    """What makes the splice pay is also why it relies on views being fixed once taken: a view the
    core changed in place would go out as it was. (The core replaces views; the test above checks it.)"""
    env, frames = ServiceIncidentEnvironment(), FrameEncoder()
    observation = env.reset(task_id="gen_expert", seed=1)
    observation = env.step(InspectMetrics(target=observation.services[0]))
    first = frames.observation_text(observation)
    assert first.encode() == plain(observation)
    view = next(iter(observation.visible_metrics.values()))
    view.history.append(MetricPoint("23:59", 1.0, 0.0, 1.0, 1.0, 1.0))  # what the core never does
    assert frames.observation_text(observation) == first
    assert plain(observation) != first.encode()
    assert FrameEncoder().observation_text(observation).encode() == plain(observation)
