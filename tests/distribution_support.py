"""Whether two samples of generated incidents come from one distribution: each measure's mean agrees
within three standard errors of the difference. The frozen evaluation set is checked against
training with it, and the held-out tiers against their open tiers."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence

from service_incident import dataset
from service_incident.faults import FAULTS
from service_incident.incidents import Incident
from service_incident.telemetry import Telemetry
from service_incident.world import World


def _unpaged_root(incident: Incident) -> bool:
    paged = {a.service for a in Telemetry(World(incident), 0).alerts(0)}
    return any(f.service not in paged for f in incident.faults)


# Sizes, fault counts and mix, unpaged roots and severities.
MEASURES: Mapping[str, Callable[[Incident], float]] = {
    "services": lambda i: len(i.services),
    "faults": lambda i: len(i.faults),
    "unpaged root": _unpaged_root,
    "datastore fault": lambda i: any(i.service(f.service).kind in ("database", "cache", "queue") for f in i.faults),
    "change fault": lambda i: any(FAULTS[f.type].change for f in i.faults),
    "P0 at the page": lambda i: dataset.labels(i).severity_at_page == "P0",
    "P2 at the page": lambda i: dataset.labels(i).severity_at_page == "P2",
}


def disagreements(sample: Sequence[Incident], reference: Sequence[Incident]) -> list[str]:
    """The measures on which the two samples' means differ by more than three standard errors."""
    found = []
    for name, measure in MEASURES.items():
        a = [float(measure(i)) for i in sample]
        b = [float(measure(i)) for i in reference]
        spread = (statistics.pvariance(a) / len(a) + statistics.pvariance(b) / len(b)) ** 0.5
        if abs(statistics.mean(a) - statistics.mean(b)) > 3 * spread + 1e-9:
            found.append(f"{name}: {statistics.mean(a):.3f} vs {statistics.mean(b):.3f}")
    return found
