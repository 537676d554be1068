"""Deploy history: a service's releases and configuration changes, newest first, and the release it
runs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import lru_cache

from ..faults import CHANGED_FILES, FAULTS, changed_files
from ..herrings import HERRINGS
from ..world import World, distraction_onset, fault_lead, spread, unit
from .clock import clock, format_time, parse_time
from .phrases import RELEASE_NOTES


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
        change = FAULTS[fault.type].change
        if fault.service == service and change:
            lead = fault_lead(incident, fault, index)
            moment = started - timedelta(minutes=lead + spread(1, 8, incident.id, service, "ship"))
            # Release notes say what a change meant to do, not what it broke: often the fault's own
            # change, sometimes a note any release could carry.
            text = change.replace("{version}", current)
            draw = unit(incident.id, service, index, "notes")
            if text.startswith("deploy ") and draw >= 0.4:
                notes = (*RELEASE_NOTES, "routine release")
                text = f"deploy {current}: {notes[int((draw - 0.4) / 0.6 * len(notes))]}"
            touched = FAULTS[fault.type].touches
            files = _files(world, service, touched, index) if touched else ""
            entries.append((moment, f"{text} by ci-bot{files}"))
            changed = True
    for index, distraction in enumerate(incident.distractions):
        if distraction.service == service and HERRINGS[distraction.kind].ships and not changed:
            before = distraction_onset(incident.id, index) + spread(1, 8, incident.id, index)
            moment = started - timedelta(minutes=before)
            # A bystander's release touches what a shipped fault touches, noted the same way: the files
            # say what a change was about, not whether it is the one that broke.
            features = [entry for entry in CHANGED_FILES if entry[0]]
            note, touched = features[int(unit(incident.id, service, index, "vocab") * len(features))]
            draw = unit(incident.id, service, "notes")
            if draw >= 0.4:
                note = RELEASE_NOTES[int(draw * len(RELEASE_NOTES))]
            entries.append((moment, f"deploy {current}: {note} by ci-bot{_files(world, service, touched, index)}"))
            changed = True
    for event in world.history:
        if event.service == service and event.step <= step and event.remedy == "rollback":
            entries.append((clock(world, event.step), f"rollback to {previous} by on-call"))
    older = started - timedelta(days=spread(2, 12, incident.id, service, "old"))
    routine = f"routine release by ci-bot{_files(world, service, None, 'old')}"
    if changed:
        entries.append((older, f"deploy {previous}: {routine}"))
    else:
        entries.append((older, f"deploy {current}: {routine}"))
        entries.append(
            (
                older - timedelta(days=spread(3, 20, incident.id, service, "older")),
                f"deploy {previous}: routine release by ci-bot{_files(world, service, None, 'older')}",
            )
        )
    entries.sort(reverse=True)
    return "\n".join(f"{format_time(moment)} {text}" for moment, text in entries)


def _files(world: World, service: str, touched: Mapping[str, tuple[str, ...]] | None, *key: object) -> str:
    """The files a release touched: a shipped fault's own, or any release's from the shared vocabulary."""
    iid = world.incident.id
    table = touched or CHANGED_FILES[int(unit(iid, service, *key, "vocab") * len(CHANGED_FILES))][1]
    files = changed_files(table, world.plan.by_name[service].tech, unit(iid, service, *key, "files"))
    return f"; changed {files}" if files else ""
