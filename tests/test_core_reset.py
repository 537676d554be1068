"""The reset parameters are defined once, by `ResetRequest`: the keyword `reset()` is a facade over
`start(request)`, with the same fields and defaults, the same episodes and the same errors."""

from __future__ import annotations

import inspect

import msgspec
import pytest

from service_incident import tasks
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.incidents import Incident
from service_incident.models import InvalidReset, ResetRequest, Restart
from service_incident.telemetry.state import shared
from service_incident.world import HISTORY_MINUTES
from service_incident.world.steps import untouched_steps


def test_the_keyword_reset_takes_exactly_the_fields_of_a_reset_request() -> None:
    parameters = inspect.signature(ServiceIncidentEnvironment.reset).parameters
    keywords = {name: p.default for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    fields = {field.name: field.default for field in msgspec.structs.fields(ResetRequest)}
    assert keywords == fields


@pytest.mark.parametrize(
    "fields",
    [
        {"seed": 5, "episode_id": "ep-1"},
        {"task_id": "hard", "seed": 7, "episode_id": "ep-2"},
        {"task_id": "gen_medium", "seed": 11, "episode_id": "ep-3", "reward_mode": "dense"},
        {"incident_id": "hard_001", "seed": 3, "episode_id": "ep-4"},
    ],
)
def test_both_forms_start_the_same_episode(fields: dict[str, object]) -> None:
    by_keywords, by_request = ServiceIncidentEnvironment(), ServiceIncidentEnvironment()
    first = by_keywords.reset(**fields)  # type: ignore[arg-type]
    assert msgspec.json.encode(first) == msgspec.json.encode(by_request.start(ResetRequest(**fields)))  # type: ignore[arg-type]
    assert msgspec.json.encode(by_keywords.state) == msgspec.json.encode(by_request.state)


@pytest.mark.parametrize("fields", [{"task_id": "nightmare"}, {"seed": -1}, {"reward_mode": "sparse"}])
def test_both_forms_refuse_the_same_arguments_with_the_same_message(fields: dict[str, object]) -> None:
    with pytest.raises(InvalidReset) as by_keywords:
        ServiceIncidentEnvironment().reset(**fields)  # type: ignore[arg-type]
    with pytest.raises(InvalidReset) as by_request:
        ServiceIncidentEnvironment().start(ResetRequest(**fields))  # type: ignore[arg-type]
    assert str(by_keywords.value) == str(by_request.value)


def _incident_of(task_id: str, seed: int) -> Incident:
    return tasks.resolve_incident(tasks.TASKS[task_id], None, seed)


def test_rendering_ahead_keeps_what_episodes_show_from_the_incident_alone_through_the_budget() -> None:
    env = ServiceIncidentEnvironment()
    env.reset(task_id="gen_medium", seed=8_201)
    incident, budget = _incident_of("gen_medium", 8_201), tasks.TASKS["gen_medium"].max_steps
    assert budget not in untouched_steps(incident)
    env.render_ahead()
    kept, names = shared(incident), {spec.name for spec in incident.services}
    lagged = [max(0, step - incident.metrics_lag) for step in range(budget + 1)]  # the minute each step pages on
    assert set(range(budget + 1)) <= set(untouched_steps(incident)) and budget + 1 not in untouched_steps(incident)
    assert set(lagged) <= set(kept.pages)
    assert set(kept.minutes) == set(range(-HISTORY_MINUTES, lagged[-1] + 1))
    assert {key[0] for key in kept.pods} == names == set(kept.breakdowns)


def test_an_episode_remedied_already_renders_nothing_ahead() -> None:
    """From a remedy on, what an episode renders is partly its own: rendering ahead is for an episode
    that has only been reset, and renders nothing after one."""
    env = ServiceIncidentEnvironment()
    observation = env.reset(task_id="gen_medium", seed=8_202)
    env.step(Restart(target=observation.services[0]))
    incident = _incident_of("gen_medium", 8_202)
    kept = shared(incident)

    def rendered() -> tuple[set[object], ...]:
        return set(untouched_steps(incident)), set(kept.pages), set(kept.pods), set(kept.breakdowns), set(kept.minutes)

    before = rendered()
    env.render_ahead()
    assert rendered() == before
