"""The pages: alert rules, defined here once (the generator uses them too), which of them fire at a
step and on what value, and the alerts as the pager lists them, firing and resolved; with the pages
every episode of an incident shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Literal

from ..herrings import HERRINGS
from ..models import Alert
from ..world import (
    HISTORY_MINUTES,
    P1_LATENCY_MS,
    ServiceState,
    World,
    distraction_strength,
    fault_lead,
    pre_incident,
    spread,
    unit,
)
from ..world.decimals import round_to, significant
from .clock import clock, duration_min, format_time, parse_time
from .metrics import lagged

if TYPE_CHECKING:
    from .state import TelemetryState

Signal = Literal["http_5xx_ratio", "p99_latency_ms", "cpu_pct", "memory_pct"]
# An alert by the service it watches and its signal.
AlertKey = tuple[str, Signal]
# Which rules fire at a step, and on what value.
Readings = dict[AlertKey, float]
# A step's readings, and up to it: when each alert first fired, its peak since the page, when it last fired.
AlertHistory = tuple[Readings, dict[AlertKey, int], dict[AlertKey, float], dict[AlertKey, int]]
# A rule as a service's readings apply it: the reading's key, the value it reads, its threshold.
Watched = tuple[AlertKey, Callable[[ServiceState], float], float]


@dataclass(frozen=True, slots=True)
class AlertRule:
    """One paging rule: a signal on some services, firing at or above a threshold."""

    signal: Signal
    audience: Literal["user_facing", "any"]
    threshold: float
    # The field of the state it reads, by `attrgetter`: every minute of a history reads every rule of
    # every service, and a call to a lambda cost more than the read itself.
    value: Callable[[ServiceState], float]
    summary: str
    critical_at: float | None = None


# Pages watch symptoms: what users meet on the user-facing services (their errors against the SLO and
# their p99 against its objective), and saturation anywhere. An internal service's error rate is on its
# dashboard, not the pager: which dependency failed the paged requests is for the investigation to find.
ALERT_RULES: tuple[AlertRule, ...] = (
    # Every failed request counts, rejected credentials (401) as well as server errors: the summary says so.
    AlertRule(
        "http_5xx_ratio",
        "user_facing",
        0.02,
        attrgetter("error_rate"),
        "HTTP error ratio (5xx and 401) {value:.1%} over 1m, peak {peak:.1%} (SLO 99.5%)",
        critical_at=0.05,
    ),
    AlertRule(
        "p99_latency_ms",
        "user_facing",
        P1_LATENCY_MS,
        attrgetter("p99_ms"),
        "p99 latency {value:.0f} ms over 1m, peak {peak:.0f} ms (objective 800 ms)",
    ),
    AlertRule("cpu_pct", "any", 90.0, attrgetter("cpu_pct"), "CPU {value:.0f}% over 1m, peak {peak:.0f}%"),
    AlertRule("memory_pct", "any", 92.0, attrgetter("memory_pct"), "memory {value:.0f}% of limit, peak {peak:.0f}%"),
)


# The rules that watch a user-facing service (True) and an internal one (False), in ALERT_RULES' order.
_WATCHING: dict[bool, tuple[AlertRule, ...]] = {
    facing: tuple(rule for rule in ALERT_RULES if rule.audience == "any" or facing) for facing in (True, False)
}
_RULES = {rule.signal: rule for rule in ALERT_RULES}

# How long before the incident a chronic warning (a stale disk page, a signal over its threshold before
# anything of the incident began) has been firing, in hours: (least, most).
CHRONIC_HOURS = (2, 30)


def fired(user_facing: bool, state: ServiceState) -> list[tuple[AlertRule, float]]:
    """The rules a service's state trips, with the value each fires on."""
    return [(rule, value) for rule in _WATCHING[user_facing] if (value := rule.value(state)) >= rule.threshold]


def alerts(state: TelemetryState, step: int) -> list[Alert]:
    """Firing alerts and those that fired earlier, as of what metrics show (lag included)."""
    state.follow()
    world = state.world
    at = lagged(world, step)
    # A step no remedy has reached yet is the incident's alone.
    # Pages of untouched steps follow the incident's states alone, not an episode's seed.
    shared = state.shared.pages if not world.history or at < world.history[0].step else None
    if shared is not None and at in shared:
        return shared[at]
    now = readings(state, at)
    cached = state.pages.get(at)
    if cached is None:
        # The pages last rendered for the step before, even those a remedy outdated since.
        previous = state.pages.get(at - 1, state.outdated_pages.get(at - 1))
        # Nothing new fired and no value moved: the pages are the previous step's.
        if previous is not None and now == previous[0] and at > 0 and _history(state, at) == _history(state, at - 1):
            cached = (now, previous[1])
        else:
            cached = (now, _render(state, at))
        state.pages[at] = cached
        state.outdated_pages.pop(at, None)
    if shared is not None:
        shared[at] = cached[1]
    return cached[1]


def _watch(state: TelemetryState) -> tuple[tuple[str, tuple[Watched, ...]], ...]:
    """Per service, the rules that watch it: every minute of the history reads them all. Built once per
    incident, and not for one whose pages an episode rendered already."""
    shared = state.shared
    if shared.watch is None:
        shared.watch = tuple(
            (spec.name, tuple(((spec.name, rule.signal), rule.value, rule.threshold) for rule in watching))
            for spec in state.world.incident.services
            for watching in (_WATCHING[spec.user_facing],)
        )
    return shared.watch


def readings(state: TelemetryState, step: int) -> Readings:
    """Which alert rules fire at a step, and on what value; kept until a remedy changes that step."""
    state.follow()
    found = state.readings.get(step)
    if found is not None:
        return found
    states = state.world.states_at(step)
    found = {}
    for name, rules in _watch(state):
        service_state = states[name]
        for key, value_of, threshold in rules:
            if (value := value_of(service_state)) >= threshold:
                found[key] = value
    state.readings[step] = found
    return found


def _history(state: TelemetryState, step: int) -> tuple[dict[AlertKey, int], dict[AlertKey, float]]:
    """When each alert first fired (since the start of the history) and its peak since the page,
    up to a step."""
    _, first, peaks, _ = _history_of(state, step)
    return first, peaks


def _history_of(state: TelemetryState, step: int) -> AlertHistory:
    """The readings of a step, and up to it when each alert first fired, its peak since the page, and
    when it last fired; built on the previous step's."""
    now = readings(state, step)
    cached = state.histories.get(step)
    if cached is not None:
        return cached
    if step > -HISTORY_MINUTES:
        _, first_before, peaks_before, last_before = _history_of(state, step - 1)
        first, peaks, last = dict(first_before), dict(peaks_before), dict(last_before)
    else:
        first, peaks, last = {}, {}, {}
    for key, value in now.items():
        first.setdefault(key, step)
        last[key] = step
        if step >= 0 or key not in peaks:
            peaks[key] = max(peaks.get(key, 0.0), value)
    found = state.histories[step] = (now, first, peaks, last)
    return found


def _since(state: TelemetryState, service: str, signal: str, began: int) -> str:
    """When an alert began, as pages print it, on the minute it first fired (faults and herrings share
    this clock); kept, since every step renders every alert."""
    since = state.since.get((service, signal, began))
    if since is None:
        world = state.world
        fired_at = began
        if began == -HISTORY_MINUTES:
            # Firing since the start of the history: it began when it first fired before that, or, if
            # it fired before anything of the incident began, hours ago (a chronic warning).
            first = pre_incident(world.incident)
            while fired_at > first and (service, signal) in readings(state, fired_at - 1):
                fired_at -= 1
        moment = clock(world, fired_at)
        if fired_at == pre_incident(world.incident):
            moment -= duration_min(_chronic_minutes(world.incident.id, service, signal))
        since = state.since[(service, signal, began)] = format_time(moment)
    return since


def _chronic_minutes(*key: object) -> int:
    """How long before the incident a chronic warning had been firing: hours, on the minute."""
    return int(spread(CHRONIC_HOURS[0] * 60, CHRONIC_HOURS[1] * 60, *key, "chronic"))


def _stale_alerts(state: TelemetryState) -> list[Alert]:
    """Warnings left firing from before the incident: the same on every page."""
    if state.stale_alerts is None:
        world, incident = state.world, state.world.incident
        started = parse_time(incident.started_at)
        found = []
        for index, distraction in enumerate(incident.distractions):
            if HERRINGS[distraction.kind].stale_page:
                strength = distraction_strength(distraction, incident.id, index)
                value = round_to(80.0 + 12.0 * strength, 1)
                since = started - duration_min(_chronic_minutes(incident.id, index, "stale"))
                found.append(_disk_alert(world, distraction.service, value, value, since, "firing"))
        state.stale_alerts = found
    return state.stale_alerts


def _render(state: TelemetryState, step: int) -> list[Alert]:
    world = state.world
    now, first, peaks, last = _history_of(state, step)
    found = []
    for (service, signal), peak in peaks.items():
        rule = _RULES[signal]
        value = now.get((service, signal))
        if value is None:
            # A resolved page shows the reading it resolved on, below its threshold: the minute after
            # it last fired.
            value = rule.value(world.states_at(last[(service, signal)] + 1)[service])
        began = first[(service, signal)]
        firing = (service, signal) in now
        # A page that did not move since it was last rendered (a resolved one, mostly) is that one again.
        key = (service, signal, began, firing, value, peak)
        alert = state.rendered.get(key)
        if alert is None:
            critical = rule.critical_at is not None and peak >= rule.critical_at
            shown = significant if signal.endswith("ratio") else _tenths
            alert = state.rendered[key] = Alert(
                service=service,
                signal=signal,
                level="critical" if critical else "warning",
                status="firing" if firing else "resolved",
                value=shown(value),
                peak=shown(peak),
                summary=rule.summary.format(value=value, peak=peak),
                since=_since(state, service, signal, began),
            )
        found.append(alert)
    found += _stale_alerts(state)
    found += _full_volumes(world, step)
    facing = state.facing
    found.sort(key=lambda a: (a.status != "firing", a.level != "critical", a.service not in facing, a.service))
    return found


def _full_volumes(world: World, step: int) -> list[Alert]:
    """The pages of volumes a fault fills: on disk usage, with values overlapping a stale log-volume warning's."""
    incident = world.incident
    started = parse_time(incident.started_at)
    found = []
    for index, fault in enumerate(incident.faults):
        if fault.type != "disk_full" or step < -fault_lead(incident, fault, index):
            continue
        healed = world.healed_at(index)

        def filled(at: int, index: int = index, healed: int | None = healed) -> float:
            # The volume has room from the minute its fix lands, as the database's diagnostics say.
            strength = world.strengths(at)[index] if healed is None or at < healed else 0.0
            return round_to(min(100.0, 84.0 + 16.0 * strength), 1) if strength > 0.0 else 0.0

        value = filled(step)
        # The peak since the page never falls; a freed volume reads what the database reports.
        peak = max(filled(at) for at in range(min(0, step), step + 1))
        status: Literal["firing", "resolved"] = "firing" if value else "resolved"
        if not value:
            value = float(disk_used(world, fault.service, step))
        since = started - duration_min(fault_lead(incident, fault, index))
        found.append(_disk_alert(world, fault.service, value, peak, since, status))
    return found


# Where a volume fills: the log volume of any service, or a datastore's data directory.
_DATA_DIRS = {
    "postgres": "/var/lib/postgresql",
    "mysql": "/var/lib/mysql",
    "kafka": "/var/lib/kafka/data",
    "rabbitmq": "/var/lib/rabbitmq/mnesia",
}


def full_volume(world: World, service: str) -> str:
    """The volume of a service that fills: its log volume, or a datastore's data directory. Its page and
    its database's diagnostics name the same one."""
    data = _DATA_DIRS.get(world.plan.by_name[service].tech)
    return data if data and unit(world.incident.id, service, "volume") < 0.5 else "/var/log"


def disk_used(world: World, service: str, step: int) -> int:
    """A volume's usage in percent when nothing fills it, less once it has been expanded."""
    if world.remedied("expand_volume", service, step) is not None:
        return 30 + int(unit(world.incident.id, service, "disk2") * 20)
    return 40 + int(unit(world.incident.id, service, "disk") * 38)


def _disk_alert(
    world: World,
    service: str,
    value: float,
    peak: float,
    since: datetime,
    status: Literal["firing", "resolved"],
) -> Alert:
    return Alert(
        service=service,
        signal="disk_pct",
        level="warning",
        status=status,
        value=value,
        peak=peak,
        summary=f"disk usage {full_volume(world, service)} {value:.0f}% (threshold 80%)",
        since=format_time(since),
    )


def _tenths(value: float) -> float:
    return round_to(value, 1)
