"""The one entry point to an episode's telemetry: `Telemetry`, rendering each view and deciding whether
it changed since the last look."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Literal

from ..faults import CHANGED_FILES, FAULTS, FailureMode, FaultType, changed_files
from ..incidents import Distraction
from ..models import Alert, Metrics
from ..topology import KINDS, OPERATIONS, PORTS, ROUTINE_BY_TECH
from ..world import (
    HISTORY_MINUTES,
    Edge,
    Node,
    ServiceState,
    World,
    distraction_onset,
    fault_lead,
    spread,
    unit,
)
from . import metrics, pages
from .clock import age, clock, epoch_ms, format_time, parse_time, stamp_ms
from .metrics import metrics_text
from .pages import disk_used, full_volume
from .phrases import (
    CONFIG_SYNC_MINUTES,
    DATASTORE_WORK,
    DISTRACTION_LOGS,
    EVERYDAY_RATES,
    RELEASE_NOTES,
    REMEDY_LOGS,
    ROUTINE_LINES,
    TECH_WORK,
)
from .state import TelemetryState
from .templates import fill, hexkey, pick, pick_fixed, rng_for

View = Literal["logs", "metrics", "health", "deploys", "db", "traces"]
LOG_WINDOW_S = 120
TRACES_SAMPLED = 4
TRACE_CANDIDATES = 12
TRACE_DEPTH = 3
# A faulty service's own span status by how its requests fail; each wording is shared by several fault types.
SPAN_STATUS: dict[FailureMode, str] = {
    "error": "error(500)",
    "write": "error(500)",
    "refused": "error(503)",
    "rejected": "error(rejected)",
}


# How strongly a red herring's minor fault shows in its service's own views.
_MINOR_STRENGTH = 0.4
# Lines only the pods whose containers crash write.
_CRASHING = "*crashing"
# Lines of an event at a fixed moment, which whichever look shows it shows from the same pod.
_KEYED = "*keyed"


@lru_cache(maxsize=4096)
def version_of(incident_id: str, service: str) -> tuple[str, str]:
    """The release a service runs before any rollback, and the one before it."""
    major, minor = 1 + int(unit(incident_id, service, "major") * 9), int(unit(incident_id, service, "minor") * 30)
    patch = 1 + int(unit(incident_id, service, "patch") * 12)
    return f"v{major}.{minor}.{patch}", f"v{major}.{minor}.{patch - 1}"


@dataclass(frozen=True, slots=True)
class Pod:
    name: str
    pid: int
    ip: str
    created: datetime  # when the pod was created: its age
    started: datetime  # when its current container started: its uptime
    restarts: int
    status: str
    last_termination: str | None


@dataclass(frozen=True, slots=True)
class _SpanSource:
    """What every span of one service in one sample of traces is drawn from."""

    node: Node
    operations: tuple[str, ...]
    p50_ms: float
    sigma: float
    own_error: float
    failure: str
    # A red herring's minor fault fails requests of its own too, in its fault type's words.
    minor_error: float
    minor_failure: str
    call_error: float


@dataclass(frozen=True, slots=True)
class Look:
    """What one inspection showed, and whether any of it is new since the last look at that view."""

    view: View
    service: str
    text: str
    metrics: Metrics | None
    changed: bool


class Telemetry:
    """Renders what the agent can observe of one world, for one episode seed."""

    def __init__(self, world: World, seed: int) -> None:
        self.world = world
        self.seed = seed
        facing = frozenset(spec.name for spec in world.incident.services if spec.user_facing)
        self.state = TelemetryState(world, seed, facing, pages.shared_pages(world.incident))
        self._seen: dict[tuple[View, str], tuple[object, Look]] = {}
        # Pods by (service, step, remedies applied so far): a step's pods change only with a remedy. A
        # service whose containers do not crash keeps its pods until a remedy touches it: by (service,).
        self._pods: dict[tuple[str, int, int] | tuple[str], list[Pod]] = {}
        self._crash_of: dict[str, tuple[FaultType, int, Callable[[int], float]] | None] = {}
        self._releases: dict[str, datetime] = {}

    # -- the entry point ---------------------------------------------------------------------------

    def look(self, view: View, service: str, step: int) -> Look:
        """Render one view of one service now; a view whose inputs did not move since the last look
        at it is returned as it was, marked unchanged."""
        epoch = self._epoch(view, service, step)
        previous = self._seen.get((view, service))
        if previous is not None and previous[0] == epoch:
            old = previous[1]
            return Look(view, service, old.text, old.metrics, changed=False)
        metrics = self.metrics(service, step) if view == "metrics" else None
        text = _RENDER[view](self, service, step) if metrics is None else metrics_text(metrics)
        look = Look(view, service, text, metrics, changed=True)
        self._seen[(view, service)] = (epoch, look)
        return look

    def _epoch(self, view: View, service: str, step: int) -> object:
        """What a view is rendered from besides the clock: faults' strengths and demand, and the remedies applied."""
        world = self.world
        at = self.lagged(step) if view == "metrics" else step
        return world.strengths(at), world.demands(at), len(world.history), tuple(world.restarts(service, at))

    # -- views ---------------------------------------------------------------------------------------

    def _expired(self, service: str) -> str:
        """When a service's certificate expired: just before its handshakes began to fail."""
        world, incident = self.world, self.world.incident
        began = None
        for index, fault in enumerate(incident.faults):
            if fault.service == service and fault.type == "tls_cert_expired":
                began = -fault_lead(incident, fault, index)
        for index, distraction in enumerate(incident.distractions):
            if began is None and distraction.service == service and distraction.fault == "tls_cert_expired":
                began = -distraction_onset(incident.id, index)
        if began is None:
            return format_time(parse_time(incident.started_at) - timedelta(hours=spread(2, 90, incident.id, "cert")))
        return format_time(clock(world, began) - timedelta(seconds=spread(5, 55, incident.id, service, "cert")))

    def version(self, service: str, step: int) -> str:
        current, previous = version_of(self.world.incident.id, service)
        return previous if self.world.rolled_back(service, step) else current

    def pods(self, service: str, step: int) -> list[Pod]:
        """The pods running a service at a step: a rollout (restart, rollback) replaces them all, a
        scale-up adds new ones, and a crashing container restarts inside its pod with a new PID."""
        history = self.world.history
        if self._crash(service) is None and not any(e.service == service and e.step <= step for e in history):
            # Nothing has happened to its pods yet: they are the same at every such step.
            key: tuple[str, int, int] | tuple[str] = (service,)
        else:
            key = (service, step, len(history))
        found = self._pods.get(key)
        if found is None:
            found = self._pods[key] = self._new_pods(service, step)
        return found

    def _new_pods(self, service: str, step: int) -> list[Pod]:
        world, iid = self.world, self.world.incident.id
        node = world.plan.by_name[service]
        now = clock(world, step)
        rollouts = sorted(
            e.step
            for e in world.history
            if e.service == service and e.remedy in ("restart", "rollback") and e.step <= step
        )
        generation = len(rollouts)
        born = clock(world, rollouts[-1]) if rollouts else None
        scale_ups = sum(1 for e in world.history if e.service == service and e.remedy == "scale_up" and e.step <= step)
        replicas = node.replicas * 2**scale_ups
        # A restart is a new pod template (its restartedAt annotation), so a new ReplicaSet and hash; a
        # rollback returns to the previous release's template.
        restarted = sum(1 for e in world.history if e.service == service and e.remedy == "restart" and e.step <= step)
        template = hexkey(iid, service, "rs", self.version(service, step), *([restarted] if restarted else []))[:5]
        template += "9"
        crash = self._crash(service)
        sick: dict[int, int] = {}  # how many pods' containers crash, by step
        if crash is not None:
            # While any request succeeds some pod serves it: one stays up unless every request fails.
            most = replicas if crash[0].error_rate >= 1.0 else replicas - 1
            sick = {s: min(most, math.ceil(crash[2](s) * replicas)) for s in range(max(crash[1], step - 30), step + 1)}
        pods = []
        for index in range(replicas):
            scaled = index >= node.replicas
            suffix = hexkey(iid, service, generation, index)[:5]
            name = f"{service}-{template}-{suffix}"
            if born is not None:
                # A rollout replaces the pods one at a time in the seconds before it completes.
                started = born - timedelta(milliseconds=spread(500, 20_000, iid, service, rollouts[-1], index))
            elif scaled:
                since = min(e.step for e in world.history if e.service == service and e.remedy == "scale_up")
                started = clock(world, since)
            else:
                started = now - timedelta(hours=spread(20, 900, iid, service, index, "age"), minutes=step)
                # A pod is never older than the release it runs: the last rollout replaced every pod.
                shipped = self._released(service)
                started = max(started, shipped + timedelta(seconds=spread(20, 240, iid, service, index, "roll")))
            created = started
            # Replicas added this minute are still starting (see SCALE_JOINING).
            restarts, status, termination = 0, "ContainerCreating" if scaled and started == now else "Running", None
            if crash is not None:
                # The container has crashed since the fault began or the pod was created, whichever is later,
                # restarting inside the pod on the orchestrator's back-off (10 s doubling up to 5 min), until
                # the last minute it crashed in; its restarts stay counted after that.
                kind, began, _ = crash
                first = max(began, (epoch_ms(created) - epoch_ms(clock(world, 0))) // 60_000)
                last = next((s for s in range(step, first - 1, -1) if index < sick.get(s, 0)), None)
                if last is not None:
                    since = max(clock(world, began), created)
                    until = now if last == step else clock(world, last)
                    restarts = _backoff_restarts(
                        (until - since).total_seconds() * spread(0.8, 1.0, iid, service, index, "crash")
                    )
                if last is not None and restarts:
                    termination = kind.termination
                    if last == step:
                        status = "CrashLoopBackOff" if kind.health == "down" else "Running"
                        started = max(created, now - timedelta(seconds=spread(5, 90, iid, service, index, restarts)))
                    else:
                        started = until
            pid = 100 + int(unit(iid, service, generation, index, restarts, "pid") * 9800)
            ip = f"10.{int(unit(iid, service, 'net') * 250)}.{index}.{10 + int(unit(iid, name) * 200)}"
            pods.append(Pod(name, pid, ip, created, started, restarts, status, termination))
        return pods

    def _crash(self, service: str) -> tuple[FaultType, int, Callable[[int], float]] | None:
        """The fault that crashes a service's containers, the step it began, and its strength by step: a
        fault of the incident, or a red herring's minor fault, which crashes a container now and then
        (kept: it depends on the incident alone)."""
        if service not in self._crash_of:
            self._crash_of[service] = self._find_crash(service)
        return self._crash_of[service]

    def _find_crash(self, service: str) -> tuple[FaultType, int, Callable[[int], float]] | None:
        world, incident = self.world, self.world.incident
        for index, fault in enumerate(incident.faults):
            kind = FAULTS[fault.type]
            if fault.service == service and kind.termination:
                return kind, -fault_lead(incident, fault, index), lambda s, i=index: world.strengths(s)[i]
        for index, distraction in enumerate(incident.distractions):
            kind = FAULTS[distraction.fault] if distraction.kind == "minor_fault" and distraction.fault else None
            if distraction.service == service and kind and kind.termination:
                onset = -distraction_onset(incident.id, index)
                return kind, onset, lambda s, o=onset: _MINOR_STRENGTH if s >= o else 0.0
        return None

    def _pods_at(self, service: str, moment: datetime) -> list[Pod]:
        """The pods that were running at a moment: those of the step it falls in."""
        return self.pods(service, (epoch_ms(moment) - epoch_ms(clock(self.world, 0))) // 60_000)

    def logs(self, service: str, step: int) -> str:
        world, incident = self.world, self.world.incident
        gap = incident.log_gaps.get(service)
        if gap == "empty":
            return f"(no log lines received from {service} in the last {LOG_WINDOW_S} s: log shipper backlog)"
        rng = rng_for(self.seed, incident.id, service, "logs", step)
        node = world.plan.by_name[service]
        profile = KINDS[node.kind]
        state = world.states_at(step)[service]
        pods = self.pods(service, step)
        context = self._context(service, step, pods)
        window_ms = LOG_WINDOW_S * 1000
        end_ms = int(clock(world, step).timestamp() * 1000)
        begin_ms = end_ms - window_ms
        # Evidence comes in groups: a partial shipper drops lines at random but keeps one of each group.
        # Each group is written within a span of the window (a healed fault's lines stop at its fix, a
        # stopping pod's before it stopped), some only by the pods whose containers crash.
        groups: list[tuple[list[str], int, int, str]] = []  # lines, span, who writes them
        for index, fault in enumerate(incident.faults):
            if fault.service != service:
                continue
            # A fixed fault writes until its fix lands, as strongly as in that minute: lines it wrote
            # before then stay in the window, and nothing of it comes after.
            healed = world.healed_at(index)
            fixed = healed is not None and healed <= step
            strength = next(
                (s for k, s in world.fault_runs(service, healed if fixed else step) if k.name == fault.type), 0.0
            )
            until = epoch_ms(clock(world, healed)) - 1 if fixed else end_ms
            if strength <= 0.0 or until <= begin_ms:
                continue
            kind = FAULTS[fault.type]
            who = _CRASHING if kind.termination else ""
            groups.append((self._fault_lines(kind, service, index, strength), begin_ms, until, who))
        edges = {edge.dep: edge for edge in node.edges}
        for upstream, share, cause in state.failing_upstreams:
            count = min(4, math.ceil(share * 8))
            calls = [self._caller_line(edges[upstream], cause, share) for _ in range(count)]
            groups.append((calls, begin_ms, end_ms, ""))
        for index, distraction in enumerate(incident.distractions):
            if distraction.service == service and step >= -distraction_onset(incident.id, index):
                minor = FAULTS[distraction.fault] if distraction.kind == "minor_fault" and distraction.fault else None
                who = _CRASHING if minor and minor.termination else ""
                groups.append((self._distraction_lines(distraction.kind, distraction, index), begin_ms, end_ms, who))
        stops: dict[str, tuple[int, Pod]] = {}  # pods told to stop: when, and the pod that replaced them
        for event in world.history:
            if event.service != service or not step - 1 <= event.step <= step:
                continue
            done = epoch_ms(clock(world, event.step))
            if event.remedy == "restart":
                # A rolling restart: each pod says so as it goes and its replacement takes over from then.
                replacements = self.pods(service, event.step)
                for old, new in zip(self.pods(service, event.step - 1), replacements, strict=False):
                    stops[old.name] = (epoch_ms(new.created), new)
                    took_over = epoch_ms(new.created)
                    groups.append(([REMEDY_LOGS["restart"]], took_over - 1, took_over, old.name))
            else:
                # The change's own line comes from the pods after it.
                groups.append(([REMEDY_LOGS[event.remedy]], done, min(end_ms, done + 30_000), ""))
        for kind, rate in EVERYDAY_RATES.items():
            # Everyday noise is everyday: any service, at fault or not, shows it at its own keyed rate.
            if unit(incident.id, service, kind, "everyday") < rate:
                groups.append((self._side_work_lines(kind, service, (service, "everyday")), begin_ms, end_ms, ""))
        period_ms, phase_ms, line = self._config_sync(service)
        # Each periodic sync reloads the service's configuration at its own moment: the same moments on
        # every look, one period apart, and never a change, as deploy history lists none.
        first = begin_ms + (phase_ms - begin_ms) % period_ms
        groups += [([line], moment, moment + 1, _KEYED) for moment in range(first, end_ms, period_ms)]
        routine = ROUTINE_BY_TECH.get(node.tech, profile.routine_logs)
        # A service's routine chatter runs at its own rate whatever else it writes: failures add lines,
        # they do not crowd out the others.
        chatter = ROUTINE_LINES[0] + int(rng.random() * (ROUTINE_LINES[1] - ROUTINE_LINES[0] + 1))
        groups.append(([pick(rng, routine) for _ in range(chatter)], begin_ms, end_ms, ""))
        if gap == "partial":
            groups = [([line for line in g[0] if rng.random() < 0.5] or g[0][:1], *g[1:]) for g in groups]
        placed = sorted(
            (lo + int(rng.random() * (hi - lo)), n, template, who)
            for n, (lines, lo, hi, who) in enumerate(groups)
            for template in lines
        )
        page_ms = epoch_ms(clock(world, 0))
        by_step: dict[int, tuple[list[Pod], list[Pod], str]] = {step: (pods, [], context["version"])}
        rendered = []
        process = _process(node.tech, profile.process)
        for moment_ms, _, template, who in placed:
            # The pods and the release running when the line was written.
            at = (moment_ms - page_ms) // 60_000
            if at not in by_step:
                by_step[at] = (self.pods(service, at), [], self.version(service, at))
            running, crashing, version = by_step[at]
            if who == _CRASHING and not crashing:
                crashing.extend(p for p in running if p.restarts)
                if not crashing:
                    continue  # no container had crashed yet then
            pool = crashing if who == _CRASHING else running
            if who in ("", _CRASHING, _KEYED):
                # A pod writes only while it exists: after it was created and before it was told to stop.
                choices = [
                    p
                    for p in pool
                    if stops.get(p.name, (moment_ms + 1,))[0] > moment_ms and epoch_ms(p.created) <= moment_ms
                ]
                if who != _CRASHING:
                    # A rolling restart's replacements serve from the moment each took over.
                    choices += [new for when, new in stops.values() if when <= moment_ms and new not in choices]
                elif not choices:
                    continue  # every crashing container had been replaced by then
            else:
                choices = [p for p in running if p.name == who]
            choices = choices or pool
            draw = unit(incident.id, service, moment_ms) if who == _KEYED else rng.random()
            pod = choices[int(draw * len(choices))]
            context["version"] = version
            context["endpoint"] = _endpoint(template, profile.endpoints, rng)
            context["uptime"] = f"{max(0, moment_ms // 1000 - int(pod.started.timestamp())) // 3600}h"
            level_, _, message = fill(template, rng, context).partition(" ")
            rendered.append(f"{stamp_ms(moment_ms)} {pod.name} {process}[{pod.pid}]: {level_:<5} {message}")
        return "\n".join(rendered)

    def _config_sync(self, service: str) -> tuple[int, int, str]:
        """How often a service's config sync runs, a moment it ran at, and the line each run writes."""
        iid = self.world.incident.id
        period = 60_000 * CONFIG_SYNC_MINUTES[int(unit(iid, service, "sync") * len(CONFIG_SYNC_MINUTES))]
        phase = epoch_ms(clock(self.world, 0)) + int(unit(iid, service, "sync phase") * period)
        return period, phase, f"INFO config reloaded from configmap {service}-config (periodic sync, no changes)"

    def _context(self, service: str, step: int, pods: list[Pod]) -> dict[str, str]:
        incident = self.world.incident
        callers = [s.name for s in incident.services if service in s.depends_on] or [service]
        return {
            "svc": service,
            "version": self.version(service, step),
            "expired": self._expired(service),
            "host": f"{service}.internal",
            "canary": f"{service}-canary-{hexkey(incident.id, service, 'canary')[:5]}",
            "container": service,
            # Settings of the service: the same on every line and every pod.
            "max_conn": str(100 * (1 + int(unit(incident.id, service, "maxconn") * 4))),
            "maxmemory": f"{4 + int(unit(incident.id, service, 'maxmemory') * 5)}gb",
            "quota": str(100 + 50 * int(unit(incident.id, service, "quota") * 11)),
            "client": callers[int(unit(incident.id, service, "client") * len(callers))],
            "ip": pods[0].ip if pods else "10.0.0.1",
        }

    def _fault_lines(self, kind: FaultType, service: str, index: int, strength: float) -> list[str]:
        node = self.world.plan.by_name[service]
        options = kind.phrasings(node.tech)
        phrasing = options[int(unit(self.world.incident.id, service, index, "phrasing") * len(options))]
        # A weak fault writes a line now and then, a strong one more; how often a service logs a failure
        # differs too, so the count overlaps a minor fault's or a red herring's.
        count = min(5, math.ceil(12 * strength * spread(0.2, 1.0, self.world.incident.id, service, index, "rate")))
        return [phrasing[i % len(phrasing)] for i in range(count)]

    def _caller_line(self, edge: Edge, cause: str, share: float) -> str:
        """How a caller logs a failed call: its words depend on how the call failed and on the caller."""
        world = self.world
        dep_node = world.plan.by_name[edge.dep]
        dep_kind = dep_node.kind
        port = PORTS.get(dep_node.tech, 8080)
        severity = "ERROR" if share >= 0.03 else "WARN"
        ops = OPERATIONS.get(dep_kind)
        if ops:
            target = pick_fixed(ops[1] if cause == "write" else ops[0], edge.dep, edge.deadline_ms)
        else:
            endpoints = KINDS[dep_kind].endpoints
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
            # A caller turns a dependency's refusal of its credentials into a server error of its own.
            "rejected": ("502", "upstream rejected credentials (401)"),
            "write": ("500", f"write failed: {target} returned an error"),
            # A datastore answers a failed command in its own protocol, not with an HTTP status.
            "error": ("500", f"{target} failed: server error") if ops else ("503", "upstream returned 503"),
        }[cause]
        if severity == "WARN":
            then = f"retrying (attempt 2/{edge.retries + 1})" if edge.retries else "giving up"
            return f'WARN req={{hex:8}} "{{endpoint}}" {where} err="{error}", {then}'
        return f'ERROR req={{hex:8}} "{{endpoint}}" status={status} {where} err="{error}"'.replace("  ", " ")

    def _distraction_lines(self, kind: str, distraction: Distraction, index: int) -> list[str]:
        iid = self.world.incident.id
        options = DISTRACTION_LOGS[kind]
        if kind == "misleading_log":
            blamed = distraction.blames or ""
            node = self.world.plan.by_name[distraction.service]
            edge = next((e for e in node.edges if e.dep == blamed), None)
            deadline = f"{edge.deadline_ms:.0f}" if edge else "2000"
            level_ = "ERROR" if unit(iid, index, "blame") < 0.5 else "WARN"
            line = options[int(unit(iid, index, "line") * len(options))]
            count = 1 + int(unit(iid, index, "count") * 4)
            # Blamed in the words its technology would fail in, like a real failing call.
            datastore = blamed in self.world.plan.by_name and self.world.plan.by_name[blamed].kind in OPERATIONS
            status, failure = ("500", "command failed: server error") if datastore else ("503", "upstream returned 503")
            return [line.format(level=level_, blamed=blamed, deadline=deadline, status=status, failure=failure)] * count
        if kind == "minor_fault":
            fault = FAULTS[distraction.fault or "slow_query"]
            return self._fault_lines(fault, distraction.service, 100 + index, _MINOR_STRENGTH)
        return self._side_work_lines(kind, distraction.service, (index,))

    def _side_work_lines(self, kind: str, service: str, key: tuple[object, ...]) -> list[str]:
        """Lines of a service's side work (a batch job, a failing export), in words
        of its technology: a datastore has backups and snapshots, no webhooks."""
        iid = self.world.incident.id
        options = DISTRACTION_LOGS[kind]
        node = self.world.plan.by_name[service]
        if node.kind in OPERATIONS:
            options = DATASTORE_WORK.get(kind, options)
        options = TECH_WORK.get(node.tech, {}).get(kind, options)
        if not options:
            return []
        chosen = list(dict.fromkeys(options[int(unit(iid, *key, kind, n) * len(options))] for n in range(2)))
        # Side work that fails retries: its lines repeat as often as a real fault's.
        repeats = 1 + int(unit(iid, *key, kind, "repeats") * 3)
        return [line for line in chosen for _ in range(repeats)] if kind == "flaky_errors" else chosen

    def health(self, service: str, step: int) -> str:
        """What the orchestrator reports: the deployment, its pods, and the recent events."""
        world = self.world
        state = world.states_at(step)[service]
        pods = self.pods(service, step)
        now = clock(world, step)
        rng = rng_for(self.seed, world.incident.id, service, "health", step)
        # A pod whose container is crash-looping is not ready; the rest serve what the service still serves.
        ready = sum(1 for p in pods if p.status == "Running")
        image = f"{service}:{self.version(service, step)}"
        lines = [f"deployment {service} image {image} replicas={len(pods)} ready={ready}"]
        for pod in pods:
            old = age(now - pod.created)
            last = f" last_termination={pod.last_termination}" if pod.last_termination else ""
            lines.append(f"  pod {pod.name} pid={pod.pid} status={pod.status} restarts={pod.restarts} age={old}{last}")
        events = self._events(service, step, pods, state)
        lines.append("events (last 15m):" if events else "events (last 15m): none")
        lines += [f"  {age(now - at)} ago {text}" for at, text in sorted(events, reverse=True)[:6]]
        probe = "failed" if state.health == "down" else "passed"
        rt = "timeout" if probe == "failed" else f"{round(state.p50_ms * rng.uniform(0.5, 0.9))}ms"
        lines.append(f"probe GET /healthz: {probe} rt={rt}")
        return "\n".join(lines)

    def _events(self, service: str, step: int, pods: list[Pod], state: ServiceState) -> list[tuple[datetime, str]]:
        world = self.world
        now = clock(world, step)
        incident = world.incident
        found: list[tuple[datetime, str]] = []
        strengths = world.strengths(step)
        for index, fault in enumerate(incident.faults):
            kind = FAULTS[fault.type]
            healed = world.healed_at(index)
            fixed = healed is not None and healed <= step
            if fault.service != service or not (fixed or strengths[index] > 0):
                continue
            # Events fall between the fault's start and its fix, on pods that were running then; those
            # of a fixed fault stay listed for the window, none after the fix.
            began = clock(world, -fault_lead(incident, fault, index))
            until = clock(world, healed) - timedelta(seconds=1) if fixed else now
            if now - until > timedelta(minutes=15):
                continue
            for n, (reason, message) in enumerate(kind.events):
                ago = timedelta(seconds=spread(10, 400, incident.id, service, reason, step))
                at = max(began, min(until, now - ago))
                then = self._pods_at(service, at)
                if kind.termination:
                    then = [p for p in then if p.restarts]
                    if not then:
                        continue  # no container had crashed yet then
                pod = then[n % len(then)]
                at = max(at, pod.created)
                text = message.replace("{container}", service).replace("{ip}", pod.ip)
                text = fill(text, rng_for(0, incident.id, service, reason), {})
                found.append((at, f"Warning {reason} pod/{pod.name}: {text}"))
        slow = state.p99_ms > 1000 or state.error_rate > 0.2
        if state.health != "ok" and slow and not any("Unhealthy" in text for _, text in found):
            at = now - timedelta(seconds=spread(10, 300, incident.id, service, "probe", step))
            at = max([at, *(clock(world, s) for s in world.restarts(service, step))])
            probe = "Readiness probe failed: context deadline exceeded"
            pod = self._pods_at(service, at)[0]
            found.append((max(at, pod.created), f"Warning Unhealthy pod/{pod.name}: {probe}"))
        for event in world.history:
            if event.service == service and event.step <= step:
                at = clock(world, event.step)
                text = {
                    "restart": "Normal ScalingReplicaSet: rollout restart, all pods replaced",
                    "rollback": f"Normal ScalingReplicaSet: rolled back to {self.version(service, step)}",
                    "scale_up": f"Normal ScalingReplicaSet: scaled up to {len(pods)} replicas",
                }.get(event.remedy)
                if text and now - at <= timedelta(minutes=15):
                    found.append((at, text))
        return found

    def deploys(self, service: str, step: int) -> str:
        """Recent releases and configuration changes of a service, newest first."""
        world, incident = self.world, self.world.incident
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
                files = self._files(service, touched, index) if touched else ""
                entries.append((moment, f"{text} by ci-bot{files}"))
                changed = True
        for index, distraction in enumerate(incident.distractions):
            if distraction.service == service and distraction.kind == "recent_deploy" and not changed:
                before = distraction_onset(incident.id, index) + spread(1, 8, incident.id, index)
                moment = started - timedelta(minutes=before)
                # A bystander's release touches what a shipped fault touches, noted the same way: the files
                # say what a change was about, not whether it is the one that broke.
                features = [entry for entry in CHANGED_FILES if entry[0]]
                note, touched = features[int(unit(incident.id, service, index, "vocab") * len(features))]
                draw = unit(incident.id, service, "notes")
                if draw >= 0.4:
                    note = RELEASE_NOTES[int(draw * len(RELEASE_NOTES))]
                entries.append((moment, f"deploy {current}: {note} by ci-bot{self._files(service, touched, index)}"))
                changed = True
        for event in world.history:
            if event.service == service and event.step <= step and event.remedy == "rollback":
                entries.append((clock(world, event.step), f"rollback to {previous} by on-call"))
        older = started - timedelta(days=spread(2, 12, incident.id, service, "old"))
        routine = f"routine release by ci-bot{self._files(service, None, 'old')}"
        if changed:
            entries.append((older, f"deploy {previous}: {routine}"))
        else:
            entries.append((older, f"deploy {current}: {routine}"))
            entries.append(
                (
                    older - timedelta(days=spread(3, 20, incident.id, service, "older")),
                    f"deploy {previous}: routine release by ci-bot{self._files(service, None, 'older')}",
                )
            )
        entries.sort(reverse=True)
        return "\n".join(f"{format_time(moment)} {text}" for moment, text in entries)

    def _files(self, service: str, touched: Mapping[str, tuple[str, ...]] | None, *key: object) -> str:
        """The files a release touched: a shipped fault's own, or any release's from the shared vocabulary."""
        iid = self.world.incident.id
        table = touched or CHANGED_FILES[int(unit(iid, service, *key, "vocab") * len(CHANGED_FILES))][1]
        files = changed_files(table, self.world.plan.by_name[service].tech, unit(iid, service, *key, "files"))
        return f"; changed {files}" if files else ""

    def _released(self, service: str) -> datetime:
        """When the release the service runs before any remedy rolled out: the newest deploy listed
        (kept: it precedes every remedy, and every pod of every view asks)."""
        released = self._releases.get(service)
        if released is None:
            newest = self.deploys(service, -HISTORY_MINUTES).partition("\n")[0]
            released = self._releases[service] = parse_time(newest.partition(" ")[0])
        return released

    def db_query(self, service: str, step: int) -> str:
        """A datastore's own view (sessions, locks, statements, disk, replication)."""
        world, incident = self.world, self.world.incident
        rng = rng_for(self.seed, incident.id, service, "db", step)
        node = world.plan.by_name[service]
        pods = self.pods(service, step)
        context = self._context(service, step, pods)
        reports = []
        now = clock(world, step)
        for index, fault in enumerate(incident.faults):
            kind = FAULTS[fault.type]
            strength = world.strengths(step)[index]
            healed = world.healed_at(index)
            fixed = healed is not None and healed <= step
            if fault.service != service or not kind.db_report or strength <= 0 or fixed:
                continue
            # Nothing waits longer than the fault has been building, nor longer than the pods serving now.
            restarted = [clock(world, s) for s in world.restarts(service, step)]
            began = max([clock(world, -fault_lead(incident, fault, index)), *restarted])
            context["held"] = str(max(1, int((now - began).total_seconds() * rng.uniform(0.6, 0.95))))
            context["waiting"] = str(max(1, round(rng.uniform(30, 120) * min(1.0, strength))))
            context["volume"] = full_volume(world, service)
            reports.append(kind.db_report.get(node.tech) or kind.db_report["*"])
        if not reports:
            state = world.states_at(step)[service]
            busy = min(99, int(12 + state.cpu_pct * 0.6))
            disk = disk_used(world, service, step)
            promoted = world.remedied("failover", service, step) is not None
            role = "primary (promoted by on-call)" if promoted else "primary"
            reports = [
                f"connections: active={{int:{max(1, busy - 8)}:{busy}}} idle={{int:10:30}} max={{max_conn}} waiting=0; "
                f"locks waiting 0; slowest statement mean {{int:4:{max(5, int(state.self_p50_ms * 3))}}}ms; "
                f"disk {disk}% used; replication role={role} lag {{int:0:2}}s"
            ]
        return "\n".join(fill(report, rng, context) for report in reports)

    def metrics(self, service: str, step: int) -> Metrics:
        return metrics.metrics(self.state, service, step)

    def alerts(self, step: int) -> list[Alert]:
        return pages.alerts(self.state, step)

    def dashboard(self, step: int) -> dict[str, str]:
        return metrics.dashboard(self.state, step)

    def lagged(self, step: int) -> int:
        return metrics.lagged(self.world, step)

    def traces(self, service: str, step: int) -> str:
        """Sampled requests through a service, one line per span (service, operation, duration, status).

        The sampler keeps what an engineer searches for first: failed requests and the slowest, then
        ordinary ones.
        """
        world = self.world
        states = world.states_at(step)
        rng = rng_for(self.seed, world.incident.id, service, "traces", step)
        drawn = []
        # What a span of each service is drawn from, worked out once for all the candidates' spans.
        sources: dict[str, _SpanSource] = {}
        for _ in range(TRACE_CANDIDATES):
            spans: list[tuple[int, str, str, float, str]] = []
            total, status = self._span(service, states, sources, rng, 0, spans, None)
            drawn.append((total, status, rng.getrandbits(32), spans))
        failed = [t for t in drawn if t[1] != "ok"][:2]
        rest = sorted((t for t in drawn if t[1] == "ok"), key=lambda t: -t[0])
        kept = failed + rest[:1] + rest[-1:]
        lines: list[str] = []
        for total, status, trace_id, spans in kept[:TRACES_SAMPLED]:
            lines.append(f"trace {trace_id:08x} {total:.0f}ms {status}")
            lines += [f"{'  ' * (depth + 1)}{name} {op} {ms:.0f}ms {st}" for depth, name, op, ms, st in spans]
        return "\n".join(lines)

    def _span_source(self, service: str, states: dict[str, ServiceState]) -> _SpanSource:
        node = self.world.plan.by_name[service]
        state = states[service]
        ops = OPERATIONS.get(node.kind)
        operations = ops[0] if ops else KINDS[node.kind].endpoints
        sigma = max(math.log(max(state.self_p99_ms, state.self_p50_ms * 1.01) / state.self_p50_ms) / 2.326, 1e-6)
        upstream_ok = math.prod(1.0 - share for _, share, _ in state.failing_upstreams)
        own_error = 1.0 - (1.0 - state.error_rate + state.side_error) / max(upstream_ok, 1e-9)
        return _SpanSource(
            node=node,
            operations=operations,
            p50_ms=state.self_p50_ms,
            sigma=sigma,
            own_error=max(0.0, own_error),
            # What the service returns, in words several fault types share: a trace localizes, it does not classify.
            failure=SPAN_STATUS[state.mode] if state.fault_strength else "error(500)",
            minor_error=state.minor_error,
            minor_failure=SPAN_STATUS[state.minor_mode],
            call_error=max(0.0, state.call_failure - state.error_rate + state.side_error),
        )

    def _span(
        self,
        service: str,
        states: dict[str, ServiceState],
        sources: dict[str, _SpanSource],
        rng: random.Random,
        depth: int,
        spans: list[tuple[int, str, str, float, str]],
        edge: Edge | None,
    ) -> tuple[float, str]:
        source = sources.get(service)
        if source is None:
            source = sources[service] = self._span_source(service, states)
        random_ = rng.random
        op = pick(rng, source.operations)
        op = fill(op, rng, {})
        own = source.p50_ms * math.exp(rng.gauss(0.0, source.sigma))
        index = len(spans)
        spans.append((depth, service, op, 0.0, "ok"))
        status = "ok"
        total = own
        # One draw for both, so a service without a minor fault samples as it always has.
        draw = random_()
        own_error = source.own_error
        if draw < own_error:
            status = source.failure
        elif source.minor_error and edge is None and draw < own_error + source.minor_error * (1.0 - own_error):
            # A red herring's minor fault fails requests no caller sends (its callers do not suffer):
            # they show where a trace starts at the service, never inside a caller's request.
            status = source.minor_failure
        if depth < TRACE_DEPTH:
            for child in source.node.edges:
                if random_() >= child.share:
                    continue
                took, child_status = self._span(child.dep, states, sources, rng, depth + 1, spans, child)
                total += took
                if child_status != "ok" and status == "ok" and rng.random() < child.weight:
                    # A caller's span shows what it observed of the call, not why the call failed.
                    status = (
                        "error(upstream timeout)"
                        if child_status in ("timeout", "cancelled")
                        else ("error(upstream error)")
                    )
        if edge is not None:
            if total >= edge.deadline_ms:
                total, status = edge.deadline_ms, "timeout"
                # The caller gave up: work below it still running is cancelled then, never longer than it.
                for later in range(index + 1, len(spans)):
                    d, name, op_, ms, _ = spans[later]
                    if ms > total:
                        spans[later] = (d, name, op_, total, "cancelled")
            elif status == "ok" and rng.random() < source.call_error:
                status = "error(500)"
        spans[index] = (depth, service, op, total, status)
        return total, status


def _endpoint(template: str, endpoints: tuple[str, ...], rng: random.Random) -> str:
    """A caller's endpoint: a write fails on a write endpoint, never on a GET."""
    if "write failed" in template:
        writes = [e for e in endpoints if not e.startswith("GET")]
        return pick(rng, writes or ["POST /v1/items"])
    return pick(rng, endpoints)


def _backoff_restarts(seconds: float) -> int:
    """How often a crashing container restarted in this long: the back-off doubles from 10 s up to 5 min."""
    if seconds < 10.0:
        return 0
    restarts, elapsed, wait = 1, 10.0, 10.0
    while elapsed + min(2 * wait, 300.0) <= seconds:
        wait = min(2 * wait, 300.0)
        elapsed += wait
        restarts += 1
    return restarts


def _process(tech: str, default: str) -> str:
    return {"mysql": "mysqld", "memcached": "memcached", "kafka": "kafka", "envoy": "envoy"}.get(tech, default)


_RENDER: dict[str, Callable[[Telemetry, str, int], str]] = {
    "logs": Telemetry.logs,
    "health": Telemetry.health,
    "deploys": Telemetry.deploys,
    "db": Telemetry.db_query,
    "traces": Telemetry.traces,
}
