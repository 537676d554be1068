"""Deploy history: a service's releases and configuration changes, newest first, and the release it
runs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import lru_cache

from ..faults import APP_TECHS, CHANGED_FILES, FAULTS, PROXY_TECHS, changed_files
from ..herrings import HERRINGS
from ..world import World, distraction_onset, fault_lead, spread, unit
from .clock import clock, format_time, parse_time
from .phrases import CANARY_SHARE, RELEASE_AUTHORS, RELEASE_NOTES


@lru_cache(maxsize=4096)
def version_of(incident_id: str, service: str) -> tuple[str, str]:
    """The release a service runs before any rollback, and the one before it."""
    major, minor = 1 + int(unit(incident_id, service, "major") * 9), int(unit(incident_id, service, "minor") * 30)
    patch = 1 + int(unit(incident_id, service, "patch") * 12)
    return f"v{major}.{minor}.{patch}", f"v{major}.{minor}.{patch - 1}"


def version(world: World, service: str, step: int) -> str:
    current, previous = version_of(world.incident.id, service)
    return previous if world.rolled_back(service, step) else current


def deploys(world: World, service: str, step: int) -> str:
    """Recent releases and configuration changes of a service, newest first."""
    incident = world.incident
    current, previous = version_of(incident.id, service)
    started = parse_time(incident.started_at)
    entries: list[tuple[datetime, str]] = []
    changed = False
    for index, fault in enumerate(incident.faults):
        kind = FAULTS[fault.type]
        if fault.service == service and kind.change:
            lead = fault_lead(incident, fault, index)
            moment = started - timedelta(minutes=lead + spread(1, 8, incident.id, service, "ship"))
            entries.append((moment, _release(world, service, current, kind.change, kind.touches, index)))
            changed = True
    for index, distraction in enumerate(incident.distractions):
        if distraction.service == service and HERRINGS[distraction.kind].ships and not changed:
            before = distraction_onset(incident.id, index) + spread(1, 8, incident.id, index)
            moment = started - timedelta(minutes=before)
            entries.append((moment, _release(world, service, current, _form(world, service), None, index)))
            changed = True
    for event in world.history:
        if event.service == service and event.step <= step and event.remedy == "rollback":
            entries.append((clock(world, event.step), f"rollback to {previous} by on-call"))
    older = started - timedelta(days=spread(2, 12, incident.id, service, "old"))
    full = "migration" if _family(world, service) == "datastore" else "deploy"
    if changed:
        entries.append((older, _release(world, service, previous, full, None, "old")))
    else:
        entries.append((older, _release(world, service, current, full, None, "old")))
        oldest = older - timedelta(days=spread(3, 20, incident.id, service, "older"))
        entries.append((oldest, _release(world, service, previous, full, None, "older")))
    entries.sort(reverse=True)
    return "\n".join(f"{format_time(moment)} {text}" for moment, text in entries)


def _family(world: World, service: str) -> str:
    tech = world.plan.by_name[service].tech
    return "app" if tech in APP_TECHS else "proxy" if tech in PROXY_TECHS else "datastore"


def _form(world: World, service: str) -> str:
    """How a recent release that broke nothing shipped: a datastore's as a migration, an application's
    or a proxy's as a full deploy or, as often as shipped faults are canaries, a canary."""
    family = _family(world, service)
    if family == "datastore":
        return "migration"
    return "canary" if unit(world.incident.id, service, "canary") < CANARY_SHARE else "deploy"


def _release(
    world: World, service: str, version: str, form: str, touched: Mapping[str, tuple[str, ...]] | None, key: object
) -> str:
    """One release as the history lists it. Its note, author and form are drawn alike for every release,
    the one that shipped a fault included: only its timing and the files it touched tell that one apart."""
    iid = world.incident.id
    notes = RELEASE_NOTES[_family(world, service)]
    first = notes[int(unit(iid, service, key, "note") * len(notes))]
    second = notes[int(unit(iid, service, key, "second note") * len(notes))]
    note = first if second == first or unit(iid, service, key, "notes") < 0.5 else f"{first}, {second}"
    author = RELEASE_AUTHORS[int(unit(iid, service, "author") * len(RELEASE_AUTHORS))]
    head = f"canary {version} started at 10% of traffic" if form == "canary" else f"{form} {version}"
    return f"{head}: {note} by {author}{_files(world, service, touched, key)}"


def _files(world: World, service: str, touched: Mapping[str, tuple[str, ...]] | None, *key: object) -> str:
    """The files a release touched: a shipped fault's own, or any release's from the shared vocabulary."""
    iid = world.incident.id
    table = touched or CHANGED_FILES[int(unit(iid, service, *key, "vocab") * len(CHANGED_FILES))]
    files = changed_files(table, world.plan.by_name[service].tech, unit(iid, service, *key, "files"))
    return f"; changed {files}" if files else ""
