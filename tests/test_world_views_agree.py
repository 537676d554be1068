"""Views of one world agree where an engineer compares them: a fresh pod has no crashes behind it, a
database's statement times are its spans' durations, a canary's pods are listed, a release's note says
what its files changed, and a cache answers its own diagnostics with each fault's evidence."""

from __future__ import annotations

import re

import pytest

from service_incident.faults import FAULTS, Remedy
from service_incident.generator import Knobs, generate
from service_incident.incidents import Incident
from service_incident.telemetry import Telemetry
from service_incident.telemetry.traces import sample
from service_incident.world import World

_POD = re.compile(r"^  pod (\S+) pid=\d+ status=(\S+) restarts=(\d+) age=(\S+)(.*)$")


def _incident(fault_type: str, seed: int, kind: str | None = None) -> Incident:
    """An incident of one fault type, on a service of `kind` if given."""
    for draw in range(seed, seed + 200):
        incident = generate(Knobs(services=(4, 7), fault_types=(fault_type,), intensity=(0.6, 1.0)), seed=draw)
        if kind is None or incident.service(incident.faults[0].service).kind == kind:
            return incident
    raise AssertionError(f"no {fault_type} on a {kind} drawn")


def _crash_fixes() -> list[tuple[str, Remedy]]:
    return [
        (name, remedy)
        for name, kind in sorted(FAULTS.items())
        if kind.termination
        for remedy in (kind.fix, *kind.acceptable)
        if remedy in ("restart", "rollback")
    ]


@pytest.mark.parametrize(("fault_type", "remedy"), _crash_fixes())
def test_pods_the_fixing_rollout_created_have_never_restarted(fault_type: str, remedy: Remedy) -> None:
    for seed in range(4):
        incident = _incident(fault_type, seed * 31)
        world = World(incident)
        telemetry = Telemetry(world, seed)
        service = incident.faults[0].service
        world.advance()
        assert world.remediate(remedy, service) == "heals"
        for step in (1, 2):
            if step == 2:
                world.advance()
            text = telemetry.health(service, step)
            listed = [m.groups() for line in text.splitlines() if (m := _POD.match(line))]
            assert listed, text
            for name, status, restarts, _, rest in listed:
                assert (restarts, status, "last_termination" in rest) == ("0", "Running", False), (name, text)


def _db_spans(telemetry: Telemetry, incident: Incident, database: str, step: int) -> list[float]:
    """The durations of the database's spans in every request its callers' trace samplers drew (not
    only those a view keeps, the slowest and failed); a span its caller gave up on took at least that."""
    return [
        float("inf") if status in ("timeout", "cancelled") else ms
        for caller in incident.services
        for request in sample(telemetry.state, caller.name, step)
        for _, name, _, ms, status in request.spans
        if name == database
    ]


@pytest.mark.parametrize("fault_type", ["slow_query", "bad_deployment"])
def test_a_databases_statement_mean_is_what_its_spans_in_traces_take(fault_type: str) -> None:
    """The statements' mean in run_db_query lies between the quartiles of the database's spans (a
    lognormal's mean is above its median, below its upper quartile), whether the database is the one
    slowed or a calm one."""
    checked = 0
    for seed in range(8):
        incident = _incident(fault_type, seed * 17)
        telemetry = Telemetry(World(incident), seed)
        for database in (s.name for s in incident.services if s.kind == "database"):
            stated = re.search(r"mean (\d+)ms", telemetry.db_query(database, 0))
            assert stated, telemetry.db_query(database, 0)
            spans = sorted(_db_spans(telemetry, incident, database, 0))
            if len(spans) < 30:
                continue
            lower, upper = spans[len(spans) // 4], spans[3 * len(spans) // 4]
            assert 0.8 * lower <= int(stated.group(1)) <= 1.25 * upper, (database, stated.group(0), lower, upper)
            checked += 1
    assert checked >= 4
