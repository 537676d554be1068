"""The Incident spec (pure data) and the loading of curated incident files."""

from __future__ import annotations

import re
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Literal

import msgspec
from msgspec import Struct

from .faults import FAULTS, TECHNOLOGIES
from .herrings import HERRINGS, HerringKind, in_background
from .topology import KINDS, dependency_order

LogGap = Literal["partial", "empty"]


class ServiceSpec(Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    kind: str
    depends_on: list[str] = []
    user_facing: bool = False
    # The technology it runs on (see faults.TECHNOLOGIES); drawn from the incident when absent.
    tech: str | None = None


class FaultSpec(Struct, frozen=True, forbid_unknown_fields=True):
    """A fault: where, what, how hard, and when it starts and worsens (steps from the page)."""

    service: str
    type: str
    intensity: float = 1.0
    onset: int = 0
    intensify_at: int | None = None
    peak: float = 1.0
    # Minutes the fault had been building before the page; drawn from its type when absent.
    lead: int | None = None


class Distraction(Struct, frozen=True, forbid_unknown_fields=True):
    """A red herring: a real but unrelated signal, labelled so that tests and analysis can find it."""

    kind: HerringKind
    service: str
    blames: str | None = None
    # How strong the red herring is, in [0, 1]; drawn from the incident when absent.
    strength: float | None = None
    # The fault type a minor fault shows (required by the kinds that are one, see herrings.HERRINGS).
    fault: str | None = None


class Incident(Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    services: list[ServiceSpec]
    faults: list[FaultSpec]
    initial_visible: str
    distractions: list[Distraction] = []
    started_at: str = "2026-03-29T14:00:00Z"
    # Telemetry imperfections: metrics that trail the world by `metrics_lag` steps, and services
    # whose log shipping drops lines or delivers none.
    metrics_lag: int = 0
    log_gaps: dict[str, LogGap] = {}

    def service(self, name: str) -> ServiceSpec:
        for spec in self.services:
            if spec.name == name:
                return spec
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        return [spec.name for spec in self.services]


# When an incident started: a UTC time to the second, the clock every view prints (with its "Z").
_UTC_STAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


class IncidentError(ValueError):
    """An incident file that does not describe a well-formed incident."""


def validate(incident: Incident) -> Incident:  # noqa: C901 (a flat list of checks, each read on its own)
    """Check the references inside an incident; raise IncidentError naming the first problem."""
    names = set(incident.names)
    if len(names) != len(incident.services):
        raise IncidentError(f"{incident.id}: duplicate service names")
    for spec in incident.services:
        if spec.kind not in KINDS:
            raise IncidentError(f"{incident.id}: {spec.name} has unknown kind {spec.kind!r}")
        if spec.tech is not None and spec.tech not in TECHNOLOGIES[spec.kind]:
            raise IncidentError(f"{incident.id}: {spec.name} cannot run {spec.tech!r}")
        missing = set(spec.depends_on) - names
        if missing:
            raise IncidentError(f"{incident.id}: {spec.name} depends on unknown {sorted(missing)}")
    try:
        dependency_order({spec.name: spec.depends_on for spec in incident.services})
    except ValueError as exc:
        raise IncidentError(f"{incident.id}: {exc}") from None
    if not incident.faults:
        raise IncidentError(f"{incident.id}: no fault")
    for fault in incident.faults:
        if fault.service not in names:
            raise IncidentError(f"{incident.id}: fault on unknown service {fault.service!r}")
        fault_type = FAULTS.get(fault.type)
        if fault_type is None:
            raise IncidentError(f"{incident.id}: unknown fault type {fault.type!r}")
        host = incident.service(fault.service)
        if not fault_type.hosts(host.kind, [incident.service(d).kind for d in host.depends_on]):
            raise IncidentError(
                f"{incident.id}: {fault.type} cannot occur on a {host.kind}"
                + (f" that calls no {fault_type.through}" if fault_type.through else "")
            )
        if not (0.0 < fault.intensity <= 1.0 and 0.0 < fault.peak <= 1.0):
            raise IncidentError(f"{incident.id}: intensity and peak must be in (0, 1]")
    for distraction in incident.distractions:
        if distraction.fault is not None and distraction.fault not in FAULTS:
            raise IncidentError(f"{incident.id}: unknown fault type {distraction.fault!r} in a distraction")
        background = distraction.fault is not None and in_background(FAULTS[distraction.fault])
        if HERRINGS[distraction.kind].minor_fault and not background:
            raise IncidentError(f"{incident.id}: a {distraction.kind} names no fault type of background work")
        if distraction.service not in names or (distraction.blames and distraction.blames not in names):
            raise IncidentError(f"{incident.id}: distraction names an unknown service")
    if set(incident.log_gaps) - names:
        raise IncidentError(f"{incident.id}: log gap on an unknown service")
    if incident.initial_visible not in names:
        raise IncidentError(f"{incident.id}: initial_visible is not a service")
    if not _UTC_STAMP.fullmatch(incident.started_at) or not _is_time(incident.started_at[:-1]):
        raise IncidentError(f"{incident.id}: started_at must be a UTC time as YYYY-MM-DDTHH:MM:SSZ")
    return incident


def _is_time(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


@cache
def load_suite(name: str) -> tuple[Incident, ...]:
    """The curated incidents of one suite, from `incidents/<name>.json`, validated."""
    raw = resources.files(__package__).joinpath("incidents", f"{name}.json").read_bytes()
    incidents = msgspec.json.decode(raw, type=list[Incident])
    return tuple(validate(incident) for incident in incidents)
