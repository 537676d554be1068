"""The red herring table: one row per kind, and generated herrings stand where their row allows."""

from __future__ import annotations

from typing import get_args

import pytest
from msgspec import structs

from service_incident.generator import generate
from service_incident.herrings import HERRINGS, HerringKind
from service_incident.incidents import Distraction, IncidentError, validate


def test_every_herring_kind_has_one_row_in_the_kinds_order() -> None:
    assert tuple(HERRINGS) == get_args(HerringKind)
    assert all(name == herring.name for name, herring in HERRINGS.items())


def test_a_minor_fault_must_name_its_fault_type() -> None:
    incident = generate("hard", 3)
    bystander = next(s.name for s in incident.services if s.name not in {f.service for f in incident.faults})
    with pytest.raises(IncidentError, match="names no fault type"):
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
