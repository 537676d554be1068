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
