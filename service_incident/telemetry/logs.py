"""Logs: the last two minutes of lines from a service's pods, each written by a pod that existed then,
in its technology's words: the faults' evidence, failed calls to dependencies, red herrings, side
work, remedies' traces, periodic config syncs and routine chatter."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING

from ..faults import FAULTS, FaultType
from ..herrings import HERRINGS, MINOR_STRENGTH, HerringType, minor_fault
from ..incidents import Distraction, Incident
from ..topology import KINDS, OPERATIONS, PORTS, ROUTINE_BY_TECH
from ..world import Edge, World, distraction_onset, fault_lead, spread, unit
from .clock import clock, duration_h, duration_s, epoch_ms, format_time, parse_time, skew_s, stamp_ms
from .deploys import canary_version, version
from .endpoints import fails_writes, request_templates
from .escalation import provider_name
from .jobs import job_for, job_lines
from .phrases import (
    CONFIG_SYNC_MINUTES,
    DATASTORE_WORK,
    REMEDY_LOGS,
    ROUTINE_LINES,
    TECH_REMEDY_LOGS,
    TECH_WORK,
    incident_vocabulary,
)
from .pods import Pod, pods
from .schemas import blocker_pid, client_of, client_tables
from .templates import LEVELS, Rng, fill, pick, pick_fixed, rng_for

if TYPE_CHECKING:
    from .state import TelemetryState

LOG_WINDOW_S = 120
# Each level as a line prints it, padded to the widest and followed by the message's space.
_PADDED_LEVELS = {level: f"{level:<5} " for level in LEVELS}
# A log shipper's backlog drains: a service whose lines stopped arriving delivers them again from a
# step in this range (the page is step 0), so a later look reads what the first could not.
BACKLOG_DRAINS = (2, 4)
# The side work every service shows now and then, whether or not anything is wrong with it.
_EVERYDAY = tuple(herring for herring in HERRINGS.values() if herring.everyday)
# Lines only the pods whose containers crash write.
_CRASHING = "*crashing"
# Lines of an event at a fixed moment, which whichever look shows it shows from the same pod.
_KEYED = "*keyed"
# Lines, the span of the window they are written in, and who writes them (a pod's name, _CRASHING,
# _KEYED, or "": any pod).
LogGroup = tuple[list[str], int, int, str]
# Pods told to stop by name: when, and the pod that replaced them.
_Stops = dict[str, tuple[int, Pod]]


def logs(state: TelemetryState, service: str, step: int) -> str:
    world, incident = state.world, state.world.incident
    gap = incident.log_gaps.get(service)
    if in_backlog(incident, service, step):
        return f"(no log lines received from {service} in the last {LOG_WINDOW_S} s: log shipper backlog)"
    rng = rng_for(state.seed, incident.id, service, "logs", step)
    node = world.plan.by_name[service]
    end_ms = epoch_ms(clock(world, step))
    begin_ms = end_ms - LOG_WINDOW_S * 1000
    # Evidence comes in groups: a partial shipper drops lines at random but keeps one of each group.
    # Each group is written within a span of the window (a healed fault's lines stop at its fix, a
    # stopping pod's before it stopped), some only by the pods whose containers crash.
    groups = _kept(
        state, state.shared.evidence, service, step, lambda: _evidence(world, service, step, begin_ms, end_ms)
    )
    stops = _remedies(state, service, step, end_ms, groups)
    # Side work follows from the incident alone, remedies or not.
    groups += _kept(
        state, state.shared.side_work, service, step, lambda: _side_work(world, service, begin_ms, end_ms), True
    )
    routine = ROUTINE_BY_TECH.get(node.tech, KINDS[node.kind].routine_logs)
    # A service's routine chatter runs at its own rate whatever else it writes: failures add lines,
    # they do not crowd out the others.
    chatter = ROUTINE_LINES[0] + int(rng.random() * (ROUTINE_LINES[1] - ROUTINE_LINES[0] + 1))
    groups.append(([pick(rng, routine) for _ in range(chatter)], begin_ms, end_ms, ""))
    if gap == "partial":
        groups = [([line for line in g[0] if rng.random() < 0.5] or g[0][:1], *g[1:]) for g in groups]
    random_ = rng.random
    placed = sorted(
        [
            (lo + int(random_() * (hi - lo)), n, template, who)
            for n, (lines, lo, hi, who) in enumerate(groups)
            for template in lines
        ]
    )
    return _write(state, service, step, [(moment, template, who) for moment, _, template, who in placed], stops, rng)


def in_backlog(incident: Incident, service: str, step: int) -> bool:
    """Whether a service's log shipping still delivers nothing at a step (its backlog not drained)."""
    if incident.log_gaps.get(service) != "empty":
        return False
    low, high = BACKLOG_DRAINS
    return step < low + int(unit(incident.id, service, "backlog") * (high - low + 1))


def _kept(
    state: TelemetryState,
    kept: dict[tuple[str, int], list[LogGroup]],
    service: str,
    step: int,
    render: Callable[[], list[LogGroup]],
    always: bool = False,
) -> list[LogGroup]:
    """A copy of what `render` gives for a service at a step, which follows from the incident alone
    before any remedy (or `always`): kept then, in `kept`, for every episode of the incident."""
    if state.world.history and not always:
        return render()
    found = kept.get((service, step))
    if found is None:
        found = kept[(service, step)] = render()
    return found.copy()


def _evidence(world: World, service: str, step: int, begin_ms: int, end_ms: int) -> list[LogGroup]:
    """The lines of what is wrong: the service's own faults, its failing calls, its red herrings."""
    incident = world.incident
    groups: list[LogGroup] = []
    for index, fault in enumerate(incident.faults):
        if fault.service != service:
            continue
        # A fixed fault writes until its fix lands, as strongly as in that minute: lines it wrote
        # before then stay in the window, and nothing of it comes after.
        healed = world.healed_at(index)
        last = healed if healed is not None and healed <= step else None
        strength = next(
            (s for k, s in world.fault_runs(service, step if last is None else last) if k.name == fault.type), 0.0
        )
        until = end_ms if last is None else epoch_ms(clock(world, last)) - 1
        if strength <= 0.0 or until <= begin_ms:
            continue
        kind = FAULTS[fault.type]
        who = _CRASHING if kind.termination else ""
        groups.append((fault_lines(world, kind, service, index, strength), begin_ms, until, who))
    node = world.plan.by_name[service]
    edges = {edge.dep: edge for edge in node.edges}
    for upstream, share, cause in world.states_at(step)[service].failing_upstreams:
        count = min(4, math.ceil(share * 8))
        writes = fails_writes(world.states_at(step)[upstream])
        calls = [_caller_line(world, edges[upstream], cause, share, writes) for _ in range(count)]
        groups.append((calls, begin_ms, end_ms, ""))
    for index, distraction in enumerate(incident.distractions):
        if distraction.service == service and step >= -distraction_onset(incident.id, index):
            groups.append((distraction_lines(world, distraction, index), begin_ms, end_ms, ""))
    return groups


def _remedies(state: TelemetryState, service: str, step: int, end_ms: int, groups: list[LogGroup]) -> _Stops:
    """Add the lines remedies of this minute and the last left, and return the pods a rolling restart
    told to stop."""
    world = state.world
    stops: _Stops = {}
    for event in world.history:
        if event.service != service or not step - 1 <= event.step <= step:
            continue
        done = epoch_ms(clock(world, event.step))
        if event.remedy == "restart":
            # A rolling restart: each pod says so as it goes and its replacement takes over from then.
            replacements = pods(state, service, event.step)
            for old, new in zip(pods(state, service, event.step - 1), replacements, strict=False):
                took_over = epoch_ms(new.created)
                stops[old.name] = (took_over, new)
                groups.append(([REMEDY_LOGS["restart"]], took_over - 1, took_over, old.name))
        else:
            # The change's own line comes from the pods after it.
            line = TECH_REMEDY_LOGS.get((event.remedy, world.plan.by_name[service].tech), REMEDY_LOGS[event.remedy])
            groups.append(([line], done, min(end_ms, done + 30_000), ""))
    return stops


def _side_work(world: World, service: str, begin_ms: int, end_ms: int) -> list[LogGroup]:
    """Everyday noise, and the periodic config syncs."""
    groups: list[LogGroup] = []
    for herring in _EVERYDAY:
        # Everyday noise is everyday: any service, at fault or not, shows it at its own keyed rate.
        if unit(world.incident.id, service, herring.name, "everyday") < herring.everyday:
            groups.append((_side_work_lines(world, herring, service, (service, "everyday")), begin_ms, end_ms, ""))
    period_ms, phase_ms, line = _config_sync(world, service)
    # Each periodic sync reloads the service's configuration at its own moment: the same moments on
    # every look, one period apart, and never a change, as deploy history lists none.
    first = begin_ms + (phase_ms - begin_ms) % period_ms
    groups += [([line], moment, moment + 1, _KEYED) for moment in range(first, end_ms, period_ms)]
    return groups


def _write(
    state: TelemetryState,
    service: str,
    step: int,
    placed: list[tuple[int, str, str]],
    stops: _Stops,
    rng: Rng,
) -> str:
    """Each placed line as the pod that wrote it then wrote it: its stamp, pod, process, PID and level."""
    world, iid = state.world, state.world.incident.id
    node = world.plan.by_name[service]
    profile = KINDS[node.kind]
    now = pods(state, service, step)
    # Before a remedy, what lines name follows from the incident alone: kept for every episode of it.
    kept = {} if world.history else state.shared.contexts.setdefault((service, step), {})
    context = _Context(kept, world, service, step, now)
    page_ms = epoch_ms(clock(world, 0))
    by_step: dict[int, tuple[list[Pod], list[Pod], str, int]] = {step: _running(now, context["version"])}
    rendered = []
    process = _process(node.tech, profile.process)
    random_ = rng.random
    # What a line says before its level, by pod: a pod writes many lines of a view.
    heads: dict[tuple[str, int], str] = {}
    for moment_ms, template, who in placed:
        # The pods and the release running when the line was written.
        at = (moment_ms - page_ms) // 60_000
        if at not in by_step:
            by_step[at] = _running(pods(state, service, at), version(world, service, at))
        running, crashing, release, newest_ms = by_step[at]
        if who == _CRASHING and not crashing:
            crashing.extend(pod for pod in running if pod.restarts)
            if not crashing:
                continue  # no container had crashed yet then
        pool = crashing if who == _CRASHING else running
        if who in ("", _CRASHING, _KEYED) and not stops and moment_ms >= newest_ms:
            choices = pool  # every pod had been created by then, and none was told to stop
        elif who in ("", _CRASHING, _KEYED):
            # A pod writes only while it exists: after it was created and before it was told to stop.
            choices = [
                pod
                for pod in pool
                if pod.created_ms <= moment_ms and (not stops or stops.get(pod.name, (moment_ms + 1,))[0] > moment_ms)
            ]
            if who != _CRASHING:
                # A rolling restart's replacements serve from the moment each took over.
                choices += [new for when, new in stops.values() if when <= moment_ms and new not in choices]
            elif not choices:
                continue  # every crashing container had been replaced by then
        else:
            choices = [pod for pod in running if pod.name == who]
        choices = choices or pool
        canary, writes, uptime = _line_facts(template)
        if canary:
            # A canary's failures and its rollout's status are its own pod's lines: the stable pods never
            # served those requests, nor run that release.
            choices = [pod for pod in choices if pod.canary] or choices
        draw = unit(iid, service, moment_ms) if who == _KEYED else random_()
        pod = choices[int(draw * len(choices))]
        context["version"] = release
        context["endpoint"] = _endpoint(writes, profile.endpoints, rng)
        if uptime:
            context["uptime"] = f"{max(0, moment_ms // 1000 - pod.started_s) // 3600}h"
        level_, _, message = fill(template, rng, context).partition(" ")
        who_wrote = (pod.name, pod.pid)
        head = heads.get(who_wrote) or heads.setdefault(who_wrote, f" {pod.name} {process}[{pod.pid}]: ")
        padded = _PADDED_LEVELS.get(level_) or f"{level_:<5} "
        rendered.append(stamp_ms(moment_ms) + head + padded + message)
    return "\n".join(rendered)


def _running(running: list[Pod], release: str) -> tuple[list[Pod], list[Pod], str, int]:
    """The pods running at a step, those of them whose containers crashed (filled when first asked),
    the release they run, and when the newest of them was created."""
    return running, [], release, max([pod.created_ms for pod in running], default=0)


def _config_sync(world: World, service: str) -> tuple[int, int, str]:
    """How often a service's config sync runs, a moment it ran at, and the line each run writes."""
    iid = world.incident.id
    period = 60_000 * CONFIG_SYNC_MINUTES[int(unit(iid, service, "sync") * len(CONFIG_SYNC_MINUTES))]
    phase = epoch_ms(clock(world, 0)) + int(unit(iid, service, "sync phase") * period)
    return period, phase, f"INFO config reloaded from configmap {service}-config (periodic sync, no changes)"


# What templates name besides their draws: the service, its release, its settings, a caller. Each is
# worked out only for a view whose lines name it: a view writes a few lines, and most name none.
ContextField = Callable[[World, str, int, list[Pod]], str]
_FIELDS: dict[str, ContextField] = {
    "svc": lambda world, service, step, pods: service,
    "version": lambda world, service, step, pods: version(world, service, step),
    "expired": lambda world, service, step, pods: _expired(world, service),
    "host": lambda world, service, step, pods: f"{service}.internal",
    # The canary pod health lists, and the release it runs.
    "canary": lambda world, service, step, pods: next((p.name for p in pods if p.canary), f"{service}-canary"),
    "canary_version": lambda world, service, step, pods: (
        canary_version(world, service, step) or version(world, service, step)
    ),
    "container": lambda world, service, step, pods: service,
    # Settings of the service: the same on every line and every pod.
    "max_conn": lambda world, service, step, pods: str(100 * (1 + _setting(world, service, "maxconn", 4))),
    "maxmemory": lambda world, service, step, pods: f"{4 + _setting(world, service, 'maxmemory', 5)}gb",
    "quota": lambda world, service, step, pods: str(100 + 50 * _setting(world, service, "quota", 11)),
    "client": lambda world, service, step, pods: client_of(world, service),
    "provider": lambda world, service, step, pods: provider_name(world, service),
    "failing_min": lambda world, service, step, pods: str(_failing_minutes(world, service, step)),
    "skew": lambda world, service, step, pods: f"{skew_s(world.incident.id, service):.3f}",
    "skew_s": lambda world, service, step, pods: str(int(skew_s(world.incident.id, service))),
    "table": lambda world, service, step, pods: client_tables(world, service)[0],
    "other_table": lambda world, service, step, pods: client_tables(world, service)[1],
    "blocker": lambda world, service, step, pods: blocker_pid(world, service),
    "ip": lambda world, service, step, pods: pods[0].ip if pods else "10.0.0.1",
}


def _setting(world: World, service: str, name: str, choices: int) -> int:
    """Which of `choices` values a setting of a service takes."""
    return int(unit(world.incident.id, service, name) * choices)


def line_context(world: World, service: str, step: int, pods: list[Pod]) -> dict[str, str]:
    """Every field templates name besides their draws, for a service at a step."""
    return {name: field(world, service, step, pods) for name, field in _FIELDS.items()}


class _Context(dict):
    """What a view's lines name: each field worked out when a line first names it (`_FIELDS`), and
    kept in `kept` for the other views of the service at that step; the lines' own fields (release,
    endpoint, uptime) set on this copy alone."""

    __slots__ = ("_kept", "_pods", "_service", "_step", "_world")

    def __init__(self, kept: dict[str, str], world: World, service: str, step: int, pods: list[Pod]) -> None:
        super().__init__(kept)
        self._kept, self._world, self._service, self._step, self._pods = kept, world, service, step, pods

    def __missing__(self, name: str) -> str:
        value = self[name] = self._kept[name] = _FIELDS[name](self._world, self._service, self._step, self._pods)
        return value


def _failing_minutes(world: World, service: str, step: int) -> int:
    """How long the first fault of a service has been running at a step: a count that moves with the clock."""
    incident = world.incident
    lead = next((fault_lead(incident, f, i) for i, f in enumerate(incident.faults) if f.service == service), 0)
    return max(1, lead + step)


def fault_lines(world: World, kind: FaultType, service: str, index: int, strength: float) -> list[str]:
    node = world.plan.by_name[service]
    options = kind.phrasings(node.tech)
    phrasing = options[int(unit(world.incident.id, service, index, "phrasing") * len(options))]
    # A weak fault writes a line now and then, a strong one more; how often a service logs a failure
    # differs too, so the count overlaps a minor fault's or a red herring's.
    count = min(5, math.ceil(12 * strength * spread(0.2, 1.0, world.incident.id, service, index, "rate")))
    return [phrasing[i % len(phrasing)] for i in range(count)]


def _caller_line(world: World, edge: Edge, cause: str, share: float, writes: bool) -> str:
    """How a caller logs a failed call: its words depend on how the call failed and on the caller."""
    dep_node = world.plan.by_name[edge.dep]
    dep_kind = dep_node.kind
    port = PORTS.get(dep_node.tech, 8080)
    severity = "ERROR" if share >= 0.03 else "WARN"
    ops = OPERATIONS.get(dep_kind)
    if ops:
        target = pick_fixed(ops[1] if cause == "write" else ops[0], edge.dep, edge.deadline_ms)
    else:
        endpoints = KINDS[dep_kind].endpoints
        if writes:
            # A dependency whose own failures fall on its writes fails the calls that write.
            written = request_templates(dep_kind)[1]
            endpoints = tuple(e for e in endpoints if e in written) or endpoints
        target = endpoints[int(unit(edge.dep, edge.deadline_ms) * len(endpoints))]
    where = {
        "named": f"upstream={edge.dep}",
        "host": f"host={edge.dep}.svc.cluster.local:{port}",
        "endpoint": f'call="{target}"',
        "bare": "",
    }[edge.style]
    status, error = {
        "timeout": ("504", f"deadline exceeded after {edge.deadline_ms:.0f}ms"),
        "breaker": ("503", "circuit breaker open, failing fast"),
        "refused": ("502", "connection refused" if edge.style != "bare" else "connection reset by peer"),
        # A caller turns a dependency's refusal of its credentials, or a datastore's missing key (an
        # evicted session), into a server error of its own.
        "rejected": ("500", f"{target} returned nil (key not found)")
        if ops
        else ("502", "upstream rejected credentials (401)"),
        "handshake": ("502", "tls handshake with upstream failed: x509: certificate has expired or is not yet valid"),
        "write": ("500", f"write failed: {target} returned an error"),
        # A datastore answers a failed command in its own protocol, not with an HTTP status.
        "error": ("500", f"{target} failed: server error") if ops else ("503", "upstream returned 503"),
    }[cause]
    if severity == "WARN":
        then = f"retrying (attempt 2/{edge.retries + 1})" if edge.retries else "giving up"
        return f'WARN req={{hex:8}} "{{endpoint}}" {where} err="{error}", {then}'
    return f'ERROR req={{hex:8}} "{{endpoint}}" status={status} {where} err="{error}"'.replace("  ", " ")


def distraction_lines(world: World, distraction: Distraction, index: int) -> list[str]:
    iid = world.incident.id
    herring = HERRINGS[distraction.kind]
    if herring.writes == "blame":
        blamed = distraction.blames or ""
        node = world.plan.by_name[distraction.service]
        edge = next((e for e in node.edges if e.dep == blamed), None)
        deadline = f"{edge.deadline_ms:.0f}" if edge else "2000"
        level_ = "ERROR" if unit(iid, index, "blame") < 0.5 else "WARN"
        line = herring.lines[int(unit(iid, index, "line") * len(herring.lines))]
        count = 1 + int(unit(iid, index, "count") * 4)
        # Blamed in the words its technology would fail in, like a real failing call.
        datastore = blamed in world.plan.by_name and world.plan.by_name[blamed].kind in OPERATIONS
        status, failure = ("500", "command failed: server error") if datastore else ("503", "upstream returned 503")
        return [line.format(level=level_, blamed=blamed, deadline=deadline, status=status, failure=failure)] * count
    fault = minor_fault(distraction.kind, distraction.fault)
    if herring.writes == "fault" and fault is not None:
        # Its failures are a background job's: a line naming an endpoint names that job.
        job = job_for(world, distraction.service, index).name
        lines = fault_lines(world, fault, distraction.service, 100 + index, MINOR_STRENGTH)
        return [line.replace('"{endpoint}"', f'"{job}"') for line in lines]
    return _side_work_lines(world, herring, distraction.service, (index,))


def _side_work_lines(world: World, herring: HerringType, service: str, key: tuple[object, ...]) -> list[str]:
    """Lines of a service's side work: a failing background job's, or busy work in the words of its
    technology (a datastore compacts, a proxy rotates its access logs)."""
    if herring.side_errors is not None:
        return job_lines(world, service, *key)
    iid, kind = world.incident.id, herring.name
    options = herring.lines
    node = world.plan.by_name[service]
    if node.kind in OPERATIONS:
        options = DATASTORE_WORK.get(kind, options)
    options = incident_vocabulary(iid, kind, TECH_WORK.get(node.tech, {}).get(kind, options))
    if not options:
        return []
    return list(dict.fromkeys(options[int(unit(iid, *key, kind, n) * len(options))] for n in range(2)))


def _expired(world: World, service: str) -> str:
    """When a service's certificate expired: just before its handshakes began to fail."""
    incident = world.incident
    began = None
    for index, fault in enumerate(incident.faults):
        if fault.service == service and fault.type == "tls_cert_expired":
            began = -fault_lead(incident, fault, index)
    for index, distraction in enumerate(incident.distractions):
        if began is None and distraction.service == service and distraction.fault == "tls_cert_expired":
            began = -distraction_onset(incident.id, index)
    if began is None:
        return format_time(parse_time(incident.started_at) - duration_h(spread(2, 90, incident.id, "cert")))
    return format_time(clock(world, began) - duration_s(spread(5, 55, incident.id, service, "cert")))


@cache
def _line_facts(template: str) -> tuple[bool, bool, bool]:
    """What writing a line of a template takes, once per template: whether it is a canary's own line,
    whether it tells of a failed write, and whether it names the pod's uptime."""
    return "{canary}" in template or "{canary_version}" in template, "write failed" in template, "{uptime}" in template


def _endpoint(writes: bool, endpoints: tuple[str, ...], rng: Rng) -> str:
    """A caller's endpoint: a write fails on a write endpoint, never on a GET."""
    if writes:
        written = [e for e in endpoints if not e.startswith("GET")]
        return pick(rng, written or ["POST /v1/items"])
    return pick(rng, endpoints)


# The process a technology's pods run, where it is not its kind's.
_PROCESSES = {"mysql": "mysqld", "memcached": "memcached", "kafka": "kafka", "envoy": "envoy"}


def _process(tech: str, default: str) -> str:
    return _PROCESSES.get(tech, default)
