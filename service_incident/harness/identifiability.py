"""Whether every label of an incident follows from what can be observed, checked without any agent.

For an incident, every alternative hypothesis an engineer could hold is built as an incident of its
own — each fault moved to another service that could host it, each fault given another type its
service could have, each fault removed, each red herring's service a root as well (of the fault
type the herring's signals suggest), each root only a red herring (its fault as side work no user
request waits on) — and the episode's full telemetry at the page (every view of
every service, and the pages) is rendered under the truth and under the alternative. The hypothesis
is contradicted when some view differs in what an engineer can tell apart: a line that is there or
not, a word, a status, or a number in another order of magnitude (numbers are compared by magnitude,
so a hypothesis is not refuted by a guess at the fault's strength). Only stable features count: a
line refutes only if it shows in two renderings with different noise seeds under one hypothesis and
in neither under the other, so no hypothesis is refuted by sampling luck. An incident is
identifiable when every alternative is contradicted. This module uses the environment's world and
telemetry, and nothing of the reference agents.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator

from msgspec import structs

from ..faults import DATASTORE_KINDS, FAULTS
from ..incidents import Distraction, FaultSpec, Incident
from ..telemetry import Telemetry, View, level
from ..world import World

VIEWS: tuple[View, ...] = ("logs", "metrics", "health", "traces", "deploys", "db")
_TOKEN = re.compile(r"\d+(?:\.\d+)?|[0-9a-f]{5,}")
# Log lines start with a timestamp, a pod and a process id: identities, not evidence.
_LOG_PREFIX = re.compile(r"^\S+ \S+ \S+?\[\d+\]: ")
_QUOTED = re.compile(r'"[^"]*"')
_SPAN = re.compile(r" \d+ms (\S.*)$")


def _magnitude(match: re.Match[str]) -> str:
    text = match.group(0)
    try:
        value = float(text)
    except ValueError:
        return "#"
    return "0" if value == 0 else f"~{math.floor(math.log(abs(value), 4))}"


def shape(view: str, text: str) -> frozenset[str]:
    """What of a view an engineer can tell apart from noise: for logs the distinct lines at WARN or
    above with their numbers and quoted requests masked; for traces which service shows which status;
    elsewhere the distinct lines with numbers by magnitude."""
    lines = set()
    for line in text.splitlines():
        if view == "logs":
            if level(line) in ("INFO", "LOG", ""):
                continue
            line = _QUOTED.sub('"…"', _TOKEN.sub("#", _LOG_PREFIX.sub("", line)))
        elif view == "traces":
            span = _SPAN.search(line)
            line = "" if line.startswith("trace") or span is None else f"{line.split()[0]} {span.group(1)}"
        elif view == "deploys":
            line = _TOKEN.sub("#", line)
        else:
            line = _TOKEN.sub(_magnitude, line)
        lines.add(line)
    return frozenset(lines)


class Episode:
    """The full telemetry of an incident at the page, rendered on demand and kept."""

    def __init__(self, incident: Incident, seed: int) -> None:
        self.incident = incident
        self.telemetry = Telemetry(World(incident), seed)
        self._shapes: dict[tuple[View, str], frozenset[str]] = {}
        self._pages: frozenset[tuple[str, str, str]] | None = None

    def view(self, view: View, service: str) -> frozenset[str]:
        key = (view, service)
        if key not in self._shapes:
            telemetry = self.telemetry
            if view == "db" and self.incident.service(service).kind not in DATASTORE_KINDS:
                text = ""
            elif view == "metrics":
                metrics = telemetry.metrics(service, 0)
                text = "\n".join(
                    f"{p.p99_ms} {p.error_rate} {p.rps} {p.cpu_pct} {p.memory_pct}" for p in metrics.history
                )
            else:
                text = telemetry.look(view, service, 0).text
            self._shapes[key] = shape(view, text)
        return self._shapes[key]

    def pages(self) -> frozenset[tuple[str, str, str]]:
        if self._pages is None:
            self._pages = frozenset(
                (a.service, a.signal, _TOKEN.sub(_magnitude, f"{a.peak}")) for a in self.telemetry.alerts(0)
            )
        return self._pages


def alternatives(incident: Incident) -> Iterator[tuple[str, Incident, tuple[str, ...]]]:
    """(kind of hypothesis, the incident it describes, the services to compare first)."""
    kinds = {s.name: s.kind for s in incident.services}
    calls = {s.name: [kinds[d] for d in s.depends_on] for s in incident.services}
    roots = {f.service for f in incident.faults}
    for index, fault in enumerate(incident.faults):
        for other in incident.services:
            if other.name in roots or not FAULTS[fault.type].hosts(other.kind, calls[other.name]):
                continue
            moved = structs.replace(fault, service=other.name)
            faults = [moved if i == index else f for i, f in enumerate(incident.faults)]
            yield "another root", structs.replace(incident, faults=faults), (fault.service, other.name)
        fixes = _fixes(fault.type)
        for name, kind in FAULTS.items():
            if name == fault.type or not kind.hosts(kinds[fault.service], calls[fault.service]):
                continue
            changed = structs.replace(fault, type=name)
            faults = [changed if i == index else f for i, f in enumerate(incident.faults)]
            label = SAME_FIX if _fixes(name) == fixes else "another fault type"
            yield label, structs.replace(incident, faults=faults), (fault.service,)
        if len(incident.faults) > 1:
            fewer = [f for i, f in enumerate(incident.faults) if i != index]
            yield "one fault fewer", structs.replace(incident, faults=fewer), (fault.service,)
    yield from herring_alternatives(incident)


# The fault types a red herring's signals suggest, most likely first: the first its service can host
# is the hypothesis. A minor fault suggests its own type; a misleading line suggests a fault of the
# dependency it blames.
SUGGESTED: dict[str, tuple[str, ...]] = {
    "recent_deploy": ("bad_deployment",),
    "stale_alert": ("disk_full",),
    "flaky_errors": ("external_dependency_failure", "upstream_rate_limit", "connection_pool_exhaustion", "crash_loop"),
    "noisy_neighbour": ("traffic_spike", "connection_pool_exhaustion", "cache_eviction", "crash_loop"),
    "misleading_log": ("thread_pool_starvation", "slow_query", "cache_eviction", "crash_loop"),
    "minor_fault": (),
}
HERRING_IS_ROOT = "herring is also a root"
ROOT_IS_HERRING = "root is only a herring"


def suspected(incident: Incident, herring: Distraction) -> FaultSpec | None:
    """The fault an engineer might take a red herring for, on the service its signals point at, as
    strong as the incident's weakest root; None when that service cannot host such a fault."""
    service = herring.blames if herring.kind == "misleading_log" and herring.blames else herring.service
    kind = incident.service(service).kind
    types = (herring.fault,) if herring.kind == "minor_fault" and herring.fault else SUGGESTED[herring.kind]
    hosted = [t for t in types if t in FAULTS and kind in FAULTS[t].kinds]
    if not hosted or any(f.service == service for f in incident.faults):
        return None
    return FaultSpec(service=service, type=hosted[0], intensity=min(f.intensity for f in incident.faults))


def herring_alternatives(incident: Incident) -> Iterator[tuple[str, Incident, tuple[str, ...]]]:
    """Each red herring a root as well (in place of the herring), and each root only a herring: its
    fault as a minor fault on side work, as strong as the fault was."""
    for index, herring in enumerate(incident.distractions):
        fault = suspected(incident, herring)
        if fault is not None:
            others = [d for i, d in enumerate(incident.distractions) if i != index]
            alternative = structs.replace(incident, faults=[*incident.faults, fault], distractions=others)
            yield f"{HERRING_IS_ROOT} ({herring.kind})", alternative, (fault.service,)
    for index, fault in enumerate(incident.faults):
        strength = round(min(1.0, max(0.2, fault.intensity)), 2)
        side = Distraction(kind="minor_fault", service=fault.service, fault=fault.type, strength=strength)
        fewer = [f for i, f in enumerate(incident.faults) if i != index]
        alternative = structs.replace(incident, faults=fewer, distractions=[*incident.distractions, side])
        yield f"{ROOT_IS_HERRING} ({fault.type})", alternative, (fault.service,)


SEEDS = (0, 1)
# Another fault type that the same remedies fix: telling them apart changes no decision the grade
# depends on (root, severity, fix), so it is reported apart as well as counted.
SAME_FIX = "another fault type with the same fixes"


def _fixes(fault: str) -> frozenset[str]:
    kind = FAULTS[fault]
    return frozenset((kind.fix, *kind.acceptable))


def contradicted(truth: tuple[Episode, Episode], alternative: Incident, first: tuple[str, ...]) -> bool:
    """Whether some stable view of some service, or the pages, differ between the truth and an alternative."""
    other = (Episode(alternative, SEEDS[0]), Episode(alternative, SEEDS[1]))
    names = [*first, *(s.name for s in truth[0].incident.services if s.name not in first)]
    for service in names:
        for view in VIEWS:
            if _apart(
                (truth[0].view(view, service), truth[1].view(view, service)),
                (other[0].view(view, service), other[1].view(view, service)),
            ):
                return True
    return _apart((truth[0].pages(), truth[1].pages()), (other[0].pages(), other[1].pages()))


Pair = tuple[frozenset[object], frozenset[object]]


def _apart(truth: Pair, other: Pair) -> bool:
    """A feature both renderings of one hypothesis show and neither of the other's."""
    return bool((truth[0] & truth[1]) - (other[0] | other[1]) or (other[0] & other[1]) - (truth[0] | truth[1]))


def survivors(incident: Incident) -> list[str]:
    """The kinds of the alternative hypotheses nothing observable contradicts (empty: identifiable)."""
    truth = (Episode(incident, SEEDS[0]), Episode(incident, SEEDS[1]))
    return [kind for kind, alternative, first in alternatives(incident) if not contradicted(truth, alternative, first)]


def survey(incidents: list[Incident]) -> tuple[float, float, Counter[str]]:
    """The share of incidents that are identifiable (no alternative survives), the share when only
    same-fix types survive too, and how often each kind of hypothesis survived."""
    failures: Counter[str] = Counter()
    strict = loose = 0
    for incident in incidents:
        left = survivors(incident)
        strict += not left
        loose += all(kind == SAME_FIX for kind in left)
        failures.update(set(left))
    count = max(1, len(incidents))
    return strict / count, loose / count, failures
