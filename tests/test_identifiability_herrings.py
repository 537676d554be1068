"""Identifiability weighs red herrings: a herring's service may be a root as well, and a root may be
only a herring; the telemetry must contradict both, as it does the other hypotheses."""

from __future__ import annotations

from service_incident import dataset
from service_incident.faults import FAULTS
from service_incident.harness.identifiability import (
    HERRING_IS_ROOT,
    ROOT_IS_HERRING,
    SEEDS,
    Episode,
    contradicted,
    herring_alternatives,
    survivors,
    suspected,
)
from service_incident.incidents import Distraction, Incident


def _with_herrings(tier: str) -> Incident:
    for seed in range(50):
        incident = dataset.training_incident(tier, seed)
        if any(suspected(incident, d) for d in incident.distractions):
            return incident
    raise AssertionError(f"no {tier} incident with a herring that could be a root")


def test_each_herring_and_each_root_gets_its_hypothesis() -> None:
    incident = _with_herrings("hard")
    found = list(herring_alternatives(incident))
    as_root = [(kind, alt) for kind, alt, _ in found if kind.startswith(HERRING_IS_ROOT)]
    as_herring = [(kind, alt) for kind, alt, _ in found if kind.startswith(ROOT_IS_HERRING)]
    assert len(as_herring) == len(incident.faults)
    for _, alternative in as_herring:
        assert len(alternative.faults) == len(incident.faults) - 1
        assert alternative.distractions[-1].kind == "minor_fault"
    assert as_root
    for _, alternative in as_root:
        assert len(alternative.faults) == len(incident.faults) + 1
        assert len(alternative.distractions) == len(incident.distractions) - 1


def test_a_misleading_line_suspects_the_dependency_it_blames() -> None:
    incident = dataset.training_incident("hard", 0)
    caller = next(s for s in incident.services if s.depends_on and s.name not in {f.service for f in incident.faults})
    blamed = next(d for d in caller.depends_on if d not in {f.service for f in incident.faults})
    fault = suspected(incident, Distraction(kind="misleading_log", service=caller.name, blames=blamed))
    assert fault is not None and fault.service == blamed
    assert incident.service(blamed).kind in FAULTS[fault.type].kinds


def test_the_telemetry_contradicts_the_herring_hypotheses() -> None:
    incident = _with_herrings("expert")
    truth = (Episode(incident, SEEDS[0]), Episode(incident, SEEDS[1]))
    for _, alternative, first in herring_alternatives(incident):
        assert contradicted(truth, alternative, first)
    # The check can fail: the truth itself is not contradicted by its own telemetry.
    assert not contradicted(truth, incident, ())
    assert not [k for k in survivors(incident) if "herring" in k]
