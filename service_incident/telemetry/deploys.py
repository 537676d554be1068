"""Deploy history: a service's releases and configuration changes, newest first, and the release it
runs."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from operator import itemgetter

from ..faults import FAULTS, RELEASE_CHANGES, Changes, change_text, release_family
from ..herrings import HERRINGS
from ..world import World, distraction_onset, fault_lead, spread, unit
from .clock import clock, duration_d, duration_min, format_time, parse_time
from .phrases import CANARY_SHARE, RELEASE_AUTHORS


@lru_cache(maxsize=4096)
def version_of(incident_id: str, service: str) -> tuple[str, str]:
    """The release a service runs before any rollback, and the one before it."""
    major, minor = 1 + int(unit(incident_id, service, "major") * 9), int(unit(incident_id, service, "minor") * 30)
    patch = 1 + int(unit(incident_id, service, "patch") * 12)
    return f"v{major}.{minor}.{patch}", f"v{major}.{minor}.{patch - 1}"


def version(world: World, service: str, step: int) -> str:
    """The release the service's stable pods run: the previous one while a canary of the current one
    takes its share of traffic, or once rolled back."""
    current, previous = version_of(world.incident.id, service)
    return previous if world.rolled_back(service, step) or recent_form(world, service) == "canary" else current


def canary_version(world: World, service: str, step: int) -> str | None:
    """The release the service's canary pods run, while a canary is live (not rolled back)."""
    if recent_form(world, service) != "canary" or world.rolled_back(service, step):
        return None
    return version_of(world.incident.id, service)[0]


def recent_form(world: World, service: str) -> str | None:
    """How the service's release of the last hours shipped (deploy, migration, canary), if it had one."""
    incident = world.incident
    for fault in incident.faults:
        if fault.service == service and FAULTS[fault.type].change:
            return FAULTS[fault.type].change
    for distraction in incident.distractions:
        if distraction.service == service and HERRINGS[distraction.kind].ships:
            return _form(world, service)
    return None


def deploys(world: World, service: str, step: int) -> str:
    """Recent releases and configuration changes of a service, newest first."""
    previous = version_of(world.incident.id, service)[1]
    return "\n".join(
        f"{format_time(moment)} "
        + (_release(world, service, shipped, *written) if written else f"rollback to {previous} by on-call")
        for moment, shipped, written in entries(world, service, step)
    )


# A deploy history's entry: when, the release it shipped ("" for a rollback), and what `_release` writes
# of it (its form, the changes it may touch, its draws' key), or None for a rollback.
Entry = tuple[datetime, str, tuple[str, Changes | None, object] | None]


def entries(world: World, service: str, step: int) -> list[Entry]:
    """The deploy history's entries, newest first, their texts not written: a pod's age asks only when
    its release shipped. No two share a moment (a recent release is minutes before the page, a rollback
    after it, the older ones days before), so the moments alone order them."""
    incident = world.incident
    current, previous = version_of(incident.id, service)
    started = parse_time(incident.started_at)
    found: list[Entry] = []
    changed = False
    for index, fault in enumerate(incident.faults):
        kind = FAULTS[fault.type]
        if fault.service == service and kind.change:
            lead = fault_lead(incident, fault, index)
            moment = started - duration_min(lead + spread(1, 8, incident.id, service, "ship"))
            found.append((moment, current, (kind.change, kind.touches, index)))
            changed = True
    for index, distraction in enumerate(incident.distractions):
        if distraction.service == service and HERRINGS[distraction.kind].ships and not changed:
            before = distraction_onset(incident.id, index) + spread(1, 8, incident.id, index)
            moment = started - duration_min(before)
            found.append((moment, current, (_form(world, service), None, index)))
            changed = True
    for event in world.history:
        if event.service == service and event.step <= step and event.remedy == "rollback":
            found.append((clock(world, event.step), "", None))
    older = started - duration_d(spread(2, 12, incident.id, service, "old"))
    full = "deploy" if release_family(world.plan.by_name[service].tech) in ("app", "proxy") else "migration"
    if changed:
        found.append((older, previous, (full, None, "old")))
    else:
        found.append((older, current, (full, None, "old")))
        oldest = older - duration_d(spread(3, 20, incident.id, service, "older"))
        found.append((oldest, previous, (full, None, "older")))
    found.sort(key=itemgetter(0), reverse=True)
    return found


def _form(world: World, service: str) -> str:
    """How a recent release that broke nothing shipped: a datastore's as a migration, an application's
    or a proxy's as a full deploy or, as often as shipped faults are canaries, a canary."""
    if release_family(world.plan.by_name[service].tech) not in ("app", "proxy"):
        return "migration"
    return "canary" if unit(world.incident.id, service, "canary") < CANARY_SHARE else "deploy"


def _release(world: World, service: str, version: str, form: str, touched: Changes | None, key: object) -> str:
    """One release as the history lists it: the one or two changes it merged, their titles and the files
    they touched, from the family's one vocabulary. The release that shipped a fault merges one of the
    changes that can ship it; its author, its form and how many changes it merges are drawn alike for
    every release: only its timing and what it touched tell that one apart."""
    iid = world.incident.id
    tech = world.plan.by_name[service].tech
    vocabulary = RELEASE_CHANGES[release_family(tech)]
    own = (touched or {}).get(release_family(tech)) or vocabulary
    changes = [own[int(unit(iid, service, key, "files") * len(own))]]
    other = vocabulary[int(unit(iid, service, key, "second change") * len(vocabulary))]
    if other not in changes and unit(iid, service, key, "changes") < 0.5:
        # Which of the two the note names first is drawn too.
        changes.insert(int(unit(iid, service, key, "order") * 2), other)
    texts = [change_text(change, tech) for change in changes]
    note = ", ".join(title for title, _ in texts)
    files = ", ".join(dict.fromkeys(f for _, paths in texts for f in paths.split(", ")))
    author = RELEASE_AUTHORS[int(unit(iid, service, "author") * len(RELEASE_AUTHORS))]
    head = f"canary {version} started at 10% of traffic" if form == "canary" else f"{form} {version}"
    return f"{head}: {note} by {author}; changed {files}"
