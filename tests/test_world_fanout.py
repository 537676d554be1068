"""A fault that acts through a dependency: a release that reads a row per item (N+1) sends its database
many times its usual queries, so the database saturates and pages while the release's service may not."""

from __future__ import annotations

import pytest
from msgspec import structs

from service_incident.faults import FAULTS
from service_incident.generator import Knobs, generate
from service_incident.incidents import Incident, IncidentError, validate
from service_incident.telemetry import Telemetry
from service_incident.telemetry.schemas import OWN_TABLES
from service_incident.world import World

FAULT = "n_plus_one_query"
SEEDS = range(6)


def _incident(seed: int) -> Incident:
    return generate(Knobs(services=(6, 9), fault_types=(FAULT,), intensity=(0.4, 0.8)), seed=seed)


def _database(incident: Incident) -> str:
    root = incident.service(incident.faults[0].service)
    return next(d for d in root.depends_on if incident.service(d).kind == "database")


@pytest.mark.parametrize("seed", SEEDS)
def test_the_database_a_release_reads_per_item_saturates_and_names_its_client(seed: int) -> None:
    incident = _incident(seed)
    root, database = incident.faults[0].service, _database(incident)
    world = World(incident)
    sick, calm = world.states_at(0)[database], world.plan.calm[database]
    assert sick.rps >= 1.5 * calm.rps and sick.cpu_pct > calm.cpu_pct + 20
    telemetry = Telemetry(world, seed)
    report = telemetry.look("db", database, 0).text
    own_table = OWN_TABLES.get(incident.service(root).kind, ("", ""))[1]
    assert f"client={root}," in report and own_table in report
    # Its calls a minute are the client's request rate on that edge, many times what it usually sends.
    calls, usual = (int(report.split(key)[1].split("/min")[0]) for key in ("calls=", "(usual "))
    assert calls >= 2 * usual
    # Its other datastores (a queue, a cache) get no extra calls and name no statement of it.
    for other in incident.service(root).depends_on:
        if incident.service(other).kind in ("queue", "cache"):
            assert "top statement" not in telemetry.look("db", other, 0).text
            assert world.states_at(0)[other].rps <= 1.1 * world.plan.calm[other].rps
    # Every view agrees: the database's own metrics carry the extra requests.
    assert telemetry.metrics(database, 0).history[-1].rps >= 1.5 * calm.rps * 0.8


@pytest.mark.parametrize("seed", SEEDS)
def test_rolling_the_release_back_frees_the_database_and_the_database_remedies_do_not(seed: int) -> None:
    incident = _incident(seed)
    root, database = incident.faults[0].service, _database(incident)
    calm = World(incident).plan.calm[database]
    for remedy in ("restart", "scale_up", "failover"):
        world = World(incident)
        world.advance()
        assert world.remediate(remedy, database) in ("no_effect", "disruption"), remedy
    world = World(incident)
    world.advance()
    assert world.remediate("rollback", root) == "heals"
    world.advance()
    world.advance()
    assert world.states[database].rps < 1.1 * calm.rps
    assert "client=" not in Telemetry(world, seed).look("db", database, world.step).text


def test_it_lands_only_on_a_service_that_calls_a_database() -> None:
    for seed in range(20):
        incident = _incident(seed)
        root = incident.service(incident.faults[0].service)
        assert any(incident.service(d).kind == FAULTS[FAULT].through for d in root.depends_on), seed
    checked = 0
    for seed in SEEDS:
        incident = _incident(seed)
        others = [
            s.name
            for s in incident.services
            if s.kind in FAULTS[FAULT].kinds and all(incident.service(d).kind != "database" for d in s.depends_on)
        ]
        for other in others:
            with pytest.raises(IncidentError, match="calls no database"):
                validate(structs.replace(incident, faults=[structs.replace(incident.faults[0], service=other)]))
            checked += 1
    assert checked
