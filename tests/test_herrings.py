"""The red herring table (one row per kind, each herring standing where its row allows) and the label
principle the generator enforces: a herring alone in the world hurts no user, pages no one critically,
warns only chronically, and fails only background work no request waits on."""

from __future__ import annotations

import dataclasses
from typing import get_args

import pytest
from msgspec import structs

from service_incident import dataset
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.generator import HERRING_HORIZON, Knobs, generate, generation
from service_incident.herrings import HERRINGS, HerringKind
from service_incident.incidents import Distraction, Incident, IncidentError, validate
from service_incident.integrations.tools import TOOLS_BY_NAME
from service_incident.models import ERRORS_ONLY_FLOOR, InspectMetrics
from service_incident.tasks import GENERATED_BUDGETS
from service_incident.telemetry import Telemetry, parse_time
from service_incident.world import World, rubric


def test_every_herring_kind_has_one_row_in_the_kinds_order() -> None:
    assert tuple(HERRINGS) == get_args(HerringKind)
    assert all(name == herring.name for name, herring in HERRINGS.items())


def test_a_minor_fault_must_name_its_fault_type() -> None:
    incident = generate("hard", 3)
    bystander = next(s.name for s in incident.services if s.name not in {f.service for f in incident.faults})
    with pytest.raises(IncidentError, match="names no fault type of background work"):
        validate(structs.replace(incident, distractions=[Distraction("minor_fault", bystander)]))


@pytest.mark.parametrize("tier", ["medium", "hard", "expert"])
def test_generated_herrings_stand_where_their_row_allows(tier: str) -> None:
    seen: set[str] = set()
    for seed in range(40):
        incident = generate(tier, seed)
        roots = {f.service for f in incident.faults}
        for herring in incident.distractions:
            stands = HERRINGS[herring.kind].stands
            spec = incident.service(herring.service)
            seen.add(herring.kind)
            if stands in ("bystander", "host", "caller"):
                assert herring.service not in roots or stands == "caller", herring
            if stands == "internal":
                assert not spec.user_facing, herring
            if stands == "caller":
                assert herring.blames in spec.depends_on and herring.blames not in roots, herring
            assert (herring.fault is not None) == HERRINGS[herring.kind].minor_fault, herring
    assert seen == set(HERRINGS)


# -- the label principle: a herring alone in the world ---------------------------------------------

HERRING_TIERS = ("medium", "hard", "expert")
# Training draws per tier the principle is checked on, herrings alone (every fault removed).
DRAWS = 25
CHRONIC_S = 3600


def _alone(incident: Incident, kept: list[int] | None = None) -> Incident:
    herrings = incident.distractions if kept is None else [incident.distractions[i] for i in kept]
    return structs.replace(incident, faults=[], distractions=list(herrings))


@pytest.mark.parametrize("tier", HERRING_TIERS)
def test_herrings_alone_hurt_no_user_page_no_one_and_warn_only_chronically(tier: str) -> None:
    stale = 0
    for seed in range(DRAWS):
        drawn = dataset.training_incident(tier, seed)
        incident = _alone(drawn)
        world = World(incident, shared=False)
        telemetry = Telemetry(world, seed)
        # What the herrings cause is what the same world without them (the same per-minute noise) lacks.
        calm = World(_alone(drawn, []), shared=False)
        calm_pages = Telemetry(calm, seed)
        page = parse_time(incident.started_at)
        for step in range(GENERATED_BUDGETS[tier] + 1):
            graded = rubric(*world.user_facing_impact(step), world.data_at_risk(step))
            assert graded == rubric(*calm.user_facing_impact(step), False), (seed, step)
            assert graded == "P2", (seed, step)
            already = {(a.service, a.signal, a.level) for a in calm_pages.alerts(step)}
            for alert in telemetry.alerts(step):
                if (alert.service, alert.signal, alert.level) in already:
                    continue
                assert alert.level == "warning", (seed, alert)
                assert (page - parse_time(alert.since)).total_seconds() >= CHRONIC_S, (seed, alert)
                stale += alert.signal == "disk_pct"
                if alert.signal in _HISTORY:
                    # Chronic: at the same level over the whole history, since hours before the page.
                    series = [getattr(p, _HISTORY[alert.signal]) for p in telemetry.metrics(alert.service, 0).history]
                    assert max(series) <= 1.1 * min(series), (seed, alert, series)
    assert stale  # the stale disk warnings are there, chronic like any other


_HISTORY = {
    "cpu_pct": "cpu_pct",
    "memory_pct": "memory_pct",
    "p99_latency_ms": "p99_ms",
    "http_5xx_ratio": "error_rate",
}


@pytest.mark.parametrize("tier", HERRING_TIERS)
def test_a_herrings_failures_are_background_work_its_callers_never_meet(tier: str) -> None:
    checked = 0
    for seed in range(DRAWS):
        incident = dataset.training_incident(tier, seed)
        for index, herring in enumerate(incident.distractions):
            if not (HERRINGS[herring.kind].side_errors or HERRINGS[herring.kind].minor_fault):
                continue
            alone = _alone(incident, [index])
            world = World(alone, shared=False)
            calm = World(_alone(incident, []), shared=False)
            telemetry = Telemetry(world, seed)
            shown = telemetry.metrics(herring.service, 0)
            worst = max(shown.endpoints, key=lambda row: row.error_rate)
            assert worst.work == "job" and worst.error_rate > 0.004, (seed, herring, shown.endpoints)
            assert all(row.error_rate < 0.01 for row in shown.endpoints if row.work == "request"), (seed, herring)
            # Its service's requests, and every caller's, fare as they would without it.
            for name, state in world.states_at(0).items():
                assert state.error_rate == pytest.approx(calm.states_at(0)[name].error_rate, abs=1e-9), (seed, name)
            # Its traces fail at that job: a request span fails only as it would without the herring.
            jobs = {row.endpoint for row in shown.endpoints if row.work == "job"}
            before = Telemetry(calm, seed).traces(herring.service, 0).splitlines()
            for line in telemetry.traces(herring.service, 0).splitlines():
                words = line.split()
                if words[0] == herring.service and words[-1].startswith("error(") and words[1] not in jobs:
                    assert line in before, line
            checked += 1
    assert checked >= 5


def test_a_draw_whose_herrings_page_is_redrawn_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch job that would hold its service's CPU over the page from minutes before it: every draw
    # with one breaks the principle, so none survives generation, and the redraws are counted.
    loud = dataclasses.replace(HERRINGS["noisy_neighbour"], busy_cpu=(95.0, 0.0))
    monkeypatch.setitem(HERRINGS, "noisy_neighbour", loud)  # type: ignore[index]
    knobs = Knobs(services=(6, 8), red_herrings=3)
    drawn = [generation(knobs, seed, f"loud-herrings-{seed}") for seed in range(6)]
    assert sum(d.herring_redraws for d in drawn) >= 3
    assert not [h for d in drawn for h in d.incident.distractions if h.kind == "noisy_neighbour"]


def test_every_page_starts_on_the_minute() -> None:
    for tier in ("medium", "hard", "expert"):
        for seed in range(15):
            incident = dataset.training_incident(tier, seed)
            telemetry = Telemetry(World(incident), seed)
            for alert in telemetry.alerts(0):
                assert alert.since.endswith(":00Z"), (tier, seed, alert)


def test_the_metrics_breakdown_filters_to_one_endpoint_or_the_failing_rows() -> None:
    env = ServiceIncidentEnvironment()
    obs = env.reset(task_id="gen_hard", seed=4)
    service = obs.services[0]
    obs = env.step(InspectMetrics(target=service))
    rows = obs.visible_metrics[service].endpoints
    assert {row.work for row in rows} == {"request", "job"}
    assert all("{int" not in row.endpoint and "?" not in row.endpoint for row in rows)
    one = rows[-1].endpoint
    obs = env.step(InspectMetrics(target=service, endpoint=one))
    assert [row.endpoint for row in obs.visible_metrics[service].endpoints] == [one]
    obs = env.step(InspectMetrics(target=service, errors_only=True))
    failing = obs.visible_metrics[service].endpoints
    assert all(row.error_rate >= ERRORS_ONLY_FLOOR for row in failing)
    assert len(failing) == sum(row.error_rate >= ERRORS_ONLY_FLOOR for row in rows)
    schema = TOOLS_BY_NAME["inspect_metrics"].input_schema["properties"]
    assert schema["endpoint"]["description"] and schema["errors_only"]["description"]


def test_the_herring_check_covers_every_generated_tasks_budget() -> None:
    assert max(GENERATED_BUDGETS.values()) <= HERRING_HORIZON
