"""Telemetry rendered from the world: log lines, metrics and alerts as an on-call engineer sees them.

Every rendering draws from its own RNG keyed by (episode seed, service, what, step), so a service's
text is the same whatever was inspected before it and whatever else runs in the process.
"""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import cache, cached_property, lru_cache

from .faults import FAULTS
from .models import Alert, Metrics
from .topology import KINDS
from .world import P1_ERROR_RATE, P1_LATENCY_MS, ServiceState, World

LOG_LINES = 8
LOG_WINDOW_S = 120
STEP_MINUTES = 1
ANOMALY_LEVELS = frozenset({"WARN", "ERROR", "CRIT"})
# What an engineer would call abnormal on a dashboard; also what earns the information reward.
ANOMALY_ERROR_RATE = 0.02
ANOMALY_CPU_PCT = 85.0
ANOMALY_MEMORY_PCT = 90.0
METRIC_NOISE = 0.04
NON_FACING_ERROR_ALERT = 0.10
CPU_ALERT_PCT = 90.0
RECENT_CHANGE_H = 6
FLAPPING_H = 2
# Failures rarer than this do not show up in a two-minute window of logs.
MIN_BLAMED_SHARE = 0.01
MEMORY_ALERT_PCT = 92.0

_FIELD = re.compile(r"\{(\w+)(?::([^{}]*))?\}")


def rng_for(seed: int, *key: object) -> random.Random:
    return random.Random(":".join(map(str, (seed, *key))))


def parse_time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def format_time(moment: datetime) -> str:
    date = f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
    return f"{date}T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}Z"


def clock(world: World, step: int) -> datetime:
    return parse_time(world.incident.started_at) + timedelta(minutes=STEP_MINUTES * step)


# A compiled template is a tuple of pieces, each drawing its text from the episode's RNG.
_Piece = Callable[[random.Random, dict[str, str]], str]


def _piece(name: str, arg: str | None) -> _Piece:
    if name == "int":
        low, high = map(int, (arg or "").split(":"))
        return lambda rng, _: str(low + int(rng.random() * (high - low + 1)))
    if name == "float":
        low_f, high_f = map(float, (arg or "").split(":"))
        return lambda rng, _: f"{low_f + rng.random() * (high_f - low_f):.1f}"
    if name == "hex":
        digits = int(arg or "0")
        return lambda rng, _: f"{rng.getrandbits(4 * digits):0{digits}x}"
    if name == "pick":
        options = tuple((arg or "").split("|"))
        return lambda rng, _: pick(rng, options)
    if name == "endpoint":
        return lambda rng, context: fill(context[name], rng, context)
    return lambda _, context: context[name]


@cache
def _compile(template: str) -> tuple[_Piece, ...]:
    """A template cut once into literal text and the fields to draw: rendering is then a join."""
    pieces: list[_Piece] = []
    position = 0
    for match in _FIELD.finditer(template):
        literal = template[position : match.start()]
        if literal:
            pieces.append(lambda _, __, text=literal: text)
        pieces.append(_piece(match.group(1), match.group(2)))
        position = match.end()
    if template[position:]:
        pieces.append(lambda _, __, text=template[position:]: text)
    return tuple(pieces)


def fill(template: str, rng: random.Random, context: dict[str, str]) -> str:
    """Expand a log template: {int:a:b}, {float:a:b}, {hex:n}, {pick:a|b} and named context fields."""
    return "".join(piece(rng, context) for piece in _compile(template))


def pick(rng: random.Random, options: tuple[str, ...] | list[str]) -> str:
    return options[int(rng.random() * len(options))]


def stamp_ms(epoch_ms: int) -> str:
    """An RFC 3339 UTC timestamp with milliseconds, from epoch milliseconds."""
    seconds, millis = divmod(epoch_ms, 1000)
    t = time.gmtime(seconds)
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{millis:03d}Z"


@lru_cache(maxsize=4096)
def identity(incident_id: str, service: str) -> tuple[str, str, int]:
    """Host, build and pid of a service: they belong to the system, so they are keyed without the seed."""
    rng = rng_for(0, incident_id, service, "identity")
    version = "v{}.{}.{}".format(*rng.choices(range(1, 20), k=3))
    return f"{service}-{rng.getrandbits(20):05x}", version, rng.randint(100, 9999)


class Telemetry:
    """Renders what the agent can observe of one world, for one episode seed."""

    def __init__(self, world: World, seed: int) -> None:
        self.world = world
        self.seed = seed
        self._alerts: dict[int, list[Alert]] = {}
        self._histories: dict[int, tuple[dict[tuple[str, str], int], dict[tuple[str, str], float]]] = {}
        self._readings_cache: dict[int, tuple[dict[str, ServiceState], dict[tuple[str, str], float]]] = {}

    @cached_property
    def _expired(self) -> str:
        started = parse_time(self.world.incident.started_at)
        return format_time(started - timedelta(days=rng_for(0, self.world.incident.id, "cert").randint(1, 4)))

    def logs(self, service: str, step: int) -> str:
        world, incident = self.world, self.world.incident
        gap = incident.log_gaps.get(service)
        if gap == "empty":
            return f"(no log lines received from {service} in the last {LOG_WINDOW_S} s: log shipper backlog)"
        rng = rng_for(self.seed, incident.id, service, "logs", step)
        profile = KINDS[incident.service(service).kind]
        state = world.states_at(step)[service]
        host, version, pid = identity(incident.id, service)
        context = {"svc": service, "version": version, "expired": self._expired}
        # Evidence comes in groups (the fault's own lines, the failures blamed on each upstream):
        # a partial shipper drops lines at random but leaves one line of every group.
        groups: list[list[str]] = []
        for fault in incident.faults:
            if fault.service == service and state.fault_strength > 0.0:
                templates = FAULTS[fault.type].logs
                count = max(2, round(2 + 3 * min(1.0, state.fault_strength)))
                groups.append([templates[i % len(templates)] for i in range(count)])
        for upstream, share in state.failing_upstreams:
            if share >= MIN_BLAMED_SHARE:
                caller_log = _caller_template(world, upstream, step).replace("{upstream}", upstream)
                groups.append([caller_log] * min(4, math.ceil(1 + share * 6)))
        for distraction in incident.distractions:
            if distraction.service == service:
                groups.append(_DISTRACTION_LOGS[distraction.kind](distraction.blames or ""))
        for event in world.history:
            if event.service == service and step - 1 <= event.step <= step:
                groups.append([_REMEDIATION_LOGS[event.remedy]])
        evidence = sum(len(group) for group in groups)
        groups.append([pick(rng, profile.routine_logs) for _ in range(max(2, LOG_LINES - evidence))])
        if gap == "partial":
            groups = [[line for line in group if rng.random() < 0.5] or group[:1] for group in groups]
        lines = [line for group in groups for line in group]
        rng.shuffle(lines)
        window_ms = LOG_WINDOW_S * 1000
        start_ms = int(clock(world, step).timestamp() * 1000) - window_ms
        offsets = sorted(int(rng.random() * window_ms) for _ in lines)
        rendered = []
        for offset, template in zip(offsets, lines, strict=True):
            context["endpoint"] = pick(rng, profile.endpoints)
            level, _, message = fill(template, rng, context).partition(" ")
            rendered.append(f"{stamp_ms(start_ms + offset)} {host} {profile.process}[{pid}]: {level:<5} {message}")
        return "\n".join(rendered)

    def metrics(self, service: str, step: int) -> Metrics:
        rng = rng_for(self.seed, self.world.incident.id, service, "metrics", step)
        state = self.world.states_at(self.lagged(step))[service]

        def jitter(value: float) -> float:
            return value * (1.0 + rng.uniform(-METRIC_NOISE, METRIC_NOISE))

        return Metrics(
            latency_ms=float(round(jitter(state.latency_ms))),
            error_rate=round(min(1.0, jitter(state.error_rate)), 3),
            cpu_pct=round(min(100.0, jitter(state.cpu_pct)), 1),
            memory_pct=round(min(100.0, jitter(state.memory_pct)), 1),
        )

    def health(self, service: str, step: int) -> str:
        """What the orchestrator reports: readiness, restarts, the last probe."""
        world = self.world
        rng = rng_for(self.seed, world.incident.id, service, "health", step)
        state = world.states_at(step)[service]
        replicas = round(3 * world.capacity(service))
        ready = {"ok": replicas, "degraded": replicas - 1, "down": 0}[state.health]
        restarts = sum(
            rng.randint(3, 9)
            for fault in world.incident.faults
            if fault.service == service and FAULTS[fault.type].restarts and state.fault_strength > 0
        )
        restarts += sum(1 for event in world.history if event.service == service and event.remedy == "restart")
        down = state.health == "down"
        probe = "timeout" if down else f"{round(state.latency_ms * rng.uniform(0.4, 0.6))}ms"
        return (
            f"status={state.health} ready={ready}/{replicas} restarts_1h={restarts} "
            f"probe=GET /healthz result={'failed' if down else 'passed'} rt={probe}"
        )

    def deploys(self, service: str, step: int) -> str:
        """Recent releases and configuration changes of a service, newest first."""
        world, incident = self.world, self.world.incident
        rng = rng_for(0, incident.id, service, "deploys")
        _, version, _ = identity(incident.id, service)
        started = parse_time(incident.started_at)
        entries: list[tuple[datetime, str]] = []
        for fault in incident.faults:
            change = FAULTS[fault.type].change
            if fault.service == service and change:
                moment = started - timedelta(minutes=rng.randint(8, 25))
                entries.append((moment, fill(change, rng, {"version": version}) + " by ci-bot"))
        for distraction in incident.distractions:
            if distraction.service == service and distraction.kind == "recent_deploy":
                moment = started - timedelta(minutes=rng.randint(10, 40))
                entries.append((moment, f"deploy {version}: dependency updates by ci-bot"))
        for event in world.history:
            if event.service == service and event.remedy == "rollback" and event.step <= step:
                entries.append((clock(world, event.step), "rollback to the previous release by on-call"))
        older = started - timedelta(days=rng.randint(3, 12), hours=rng.randint(0, 23))
        entries.append((older, f"deploy {version.rsplit('.', 1)[0]}.0: routine release by ci-bot"))
        entries.sort(reverse=True)
        return "\n".join(f"{format_time(moment)} {text}" for moment, text in entries)

    def db_query(self, service: str, step: int) -> str | None:
        """The database's own view (sessions, locks, disk); None for a service that is no database."""
        world, incident = self.world, self.world.incident
        if incident.service(service).kind != "database":
            return None
        rng = rng_for(self.seed, incident.id, service, "db", step)
        state = world.states_at(step)[service]
        reports = [
            report
            for fault in incident.faults
            if fault.service == service and state.fault_strength > 0 and (report := FAULTS[fault.type].db_report)
        ]
        return "\n".join(fill(report, rng, {}) for report in reports or [_HEALTHY_DB])

    def dashboard(self, step: int) -> dict[str, str]:
        """Every service's health as the status page shows it, as of what metrics show (lag included)."""
        states = self.world.states_at(self.lagged(step))
        return {spec.name: states[spec.name].health for spec in self.world.incident.services}

    def alerts(self, step: int) -> list[Alert]:
        """Firing alerts and those that fired earlier in the episode, as of what metrics show (lag included)."""
        return self._alerts_at(self.lagged(step))

    def _alerts_at(self, step: int) -> list[Alert]:
        if step not in self._alerts:
            unchanged = step > 0 and self._readings(step) == self._readings(step - 1)
            self._alerts[step] = self._alerts_at(step - 1) if unchanged else self._render_alerts(step)
        return self._alerts[step]

    def lagged(self, step: int) -> int:
        return max(0, step - self.world.incident.metrics_lag)

    def _history(self, step: int) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], float]]:
        """When each alert first fired and its peak, up to a step; built on the previous step's."""
        if step not in self._histories:
            first, peaks = (dict(part) for part in self._history(step - 1)) if step > 0 else ({}, {})
            for key, value in self._readings(step).items():
                first.setdefault(key, step)
                peaks[key] = max(peaks.get(key, 0.0), value)
            self._histories[step] = (first, peaks)
        return self._histories[step]

    def _readings(self, step: int) -> dict[tuple[str, str], float]:
        """Which alert rules fire at a step, and on what value."""
        states = self.world.states_at(step)
        cached = self._readings_cache.get(step)
        if cached is not None and cached[0] is states:
            return cached[1]
        fired: dict[tuple[str, str], float] = {}
        for spec in self.world.incident.services:
            state = states[spec.name]
            if spec.user_facing and state.error_rate >= ANOMALY_ERROR_RATE:
                fired[(spec.name, "http_5xx_ratio")] = state.error_rate
            elif not spec.user_facing and state.error_rate >= NON_FACING_ERROR_ALERT:
                fired[(spec.name, "error_ratio")] = state.error_rate
            if spec.user_facing and state.latency_ms >= P1_LATENCY_MS:
                fired[(spec.name, "p99_latency_ms")] = state.latency_ms
            if state.cpu_pct >= CPU_ALERT_PCT:
                fired[(spec.name, "cpu_pct")] = state.cpu_pct
            if state.memory_pct >= MEMORY_ALERT_PCT:
                fired[(spec.name, "memory_pct")] = state.memory_pct
        self._readings_cache[step] = (states, fired)
        return fired

    def _render_alerts(self, step: int) -> list[Alert]:
        incident = self.world.incident
        started = parse_time(incident.started_at)
        first, peaks = self._history(step)
        now = self._readings(step)
        # Side-path failures have been flapping for hours: their error alert is that old.
        flapping = {d.service for d in incident.distractions if d.kind == "flaky_errors"}
        alerts = []
        for (service, signal), peak in peaks.items():
            value = now.get((service, signal), 0.0)
            since = started - timedelta(minutes=5) + timedelta(minutes=STEP_MINUTES * first[(service, signal)])
            if signal == "error_ratio" and service in flapping:
                since = started - timedelta(hours=FLAPPING_H)
            critical = signal == "http_5xx_ratio" and peak >= P1_ERROR_RATE
            alerts.append(
                Alert(
                    service=service,
                    signal=signal,
                    level="critical" if critical else "warning",
                    status="firing" if (service, signal) in now else "resolved",
                    value=round(value, 4 if signal.endswith("ratio") else 1),
                    peak=round(peak, 4 if signal.endswith("ratio") else 1),
                    summary=_ALERT_TEXT[signal].format(value=value, peak=peak),
                    since=format_time(since),
                )
            )
        stale = format_time(started - timedelta(hours=3, minutes=12))
        for distraction in incident.distractions:
            if distraction.kind == "stale_alert":
                alerts.append(
                    Alert(
                        service=distraction.service, signal="disk_pct", level="warning", status="firing",
                        value=83.0, peak=83.0, summary="disk usage /var/log 83% (threshold 80%)", since=stale,
                    )
                )
        facing = {s.name for s in incident.services if s.user_facing}
        alerts.sort(key=lambda a: (a.status != "firing", a.level != "critical", a.service not in facing, a.service))
        return alerts

    def logs_anomalous(self, text: str) -> bool:
        return any(level(line) in ANOMALY_LEVELS for line in text.splitlines())

    def deploys_recent(self, text: str, step: int) -> bool:
        """Whether any change shipped within RECENT_CHANGE_H hours of now."""
        now = clock(self.world, step)
        return any(
            (now - parse_time(line.split(maxsplit=1)[0])).total_seconds() < RECENT_CHANGE_H * 3600
            for line in text.splitlines()
        )

    def db_anomalous(self, service: str, step: int) -> bool:
        state = self.world.states_at(step)[service]
        return state.fault_strength > 0 and any(
            f.service == service and FAULTS[f.type].db_report for f in self.world.incident.faults
        )

    def summarize(self, view: str, service: str, text: str, step: int) -> str:
        """A neutral digest of what a view showed: counts and values, never a conclusion."""
        if view == "logs":
            lines = text.splitlines()
            loud = [line for line in lines if level(line) in ANOMALY_LEVELS]
            named = sorted({m.group(1) for line in loud if (m := UPSTREAM.search(line))})
            blamed = f"; upstreams named in those lines: {', '.join(named)}" if named else ""
            return f"{len(lines)} lines in the last {LOG_WINDOW_S} s, {len(loud)} at WARN or above{blamed}"
        if view == "metrics":
            profile = KINDS[self.world.incident.service(service).kind]
            return (
                f"{text} (typical for a healthy {profile.process}: error_rate 0.00, latency_ms "
                f"{profile.latency_ms:.0f}, cpu_pct {profile.cpu_pct:.0f}, memory_pct {profile.memory_pct:.0f})"
            )
        if view == "deploys":
            recent = "some" if self.deploys_recent(text, step) else "none"
            return f"{len(text.splitlines())} changes listed, {recent} in the last {RECENT_CHANGE_H} h"
        return text.splitlines()[0] if text else "no output"

    def metrics_anomalous(self, service: str, metrics: Metrics) -> bool:
        baseline = KINDS[self.world.incident.service(service).kind].latency_ms
        return (
            metrics.error_rate >= ANOMALY_ERROR_RATE
            or metrics.latency_ms >= 3 * baseline + 200
            or metrics.cpu_pct >= ANOMALY_CPU_PCT
            or metrics.memory_pct >= ANOMALY_MEMORY_PCT
        )


def _caller_template(world: World, upstream: str, step: int) -> str:
    """What a caller logs when calls to `upstream` fail: the fault's own symptom, or a plain 5xx/timeout."""
    state = world.states_at(step)[upstream]
    if state.fault_strength > 0.0:
        for fault in world.incident.faults:
            if fault.service == upstream:
                return FAULTS[fault.type].caller_log
    if state.latency_ms >= 600:
        return 'ERROR req={hex:8} "{endpoint}" status=504 upstream={upstream} err="deadline exceeded after 2000ms"'
    return 'ERROR req={hex:8} "{endpoint}" status=503 upstream={upstream} err="upstream returned 503"'


_DISTRACTION_LOGS = {
    "noisy_neighbour": lambda _: [
        "INFO batch job reindex-{hex:4} running, processed {int:10000:90000} rows",
        "INFO background compaction in progress ({int:20:80}% done)",
    ],
    "recent_deploy": lambda _: ["INFO deployment {version} rolled out: 3/3 pods ready, health checks passing"],
    "misleading_log": lambda blamed: [
        f"WARN slow response from upstream={blamed} rt={{int:300:700}}ms, retrying (attempt 2/3)",
        f"WARN slow response from upstream={blamed} rt={{int:300:700}}ms, retrying (attempt 2/3)",
    ],
    "flaky_errors": lambda _: [
        "ERROR partner webhook delivery failed: x509: certificate signed by unknown authority host=hooks.partner.io",
        "ERROR partner webhook delivery failed: x509: certificate signed by unknown authority host=hooks.partner.io",
        "WARN nightly export job retry {int:2:5}/5",
    ],
    "stale_alert": lambda _: [],
}

_REMEDIATION_LOGS = {
    "restart": "INFO received SIGTERM, shutting down; new process started and passed readiness",
    "rollback": "INFO rollout to the previous release complete: 3/3 pods ready",
    "scale_up": "INFO horizontal scale-out complete: replicas doubled",
    "escalate": "INFO incident ticket opened with the owning team",
}

_ALERT_TEXT = {
    "http_5xx_ratio": "HTTP 5xx ratio {value:.1%} over 5m, peak {peak:.1%} (SLO 99.5%)",
    "error_ratio": "error ratio {value:.1%} over 5m, peak {peak:.1%}",
    "p99_latency_ms": "p99 latency {value:.0f} ms over 5m, peak {peak:.0f} ms (objective 800 ms)",
    "cpu_pct": "CPU {value:.0f}% for 10m, peak {peak:.0f}%",
    "memory_pct": "memory {value:.0f}% of limit, peak {peak:.0f}%",
}
UPSTREAM = re.compile(r"\bupstream=([\w.-]+)")


def level(line: str) -> str:
    """The level word of a rendered log line (INFO, WARN, ERROR, CRIT), or "" for a line without one."""
    fields = line.split(maxsplit=4)
    return fields[3] if len(fields) > 3 else ""


_HEALTHY_DB = (
    "connections: active={int:12:40} idle={int:10:30} max=100 waiting=0; locks waiting 0; "
    "slowest statement mean {int:4:30}ms; disk 4{int:0:9}% used; replication lag 0s"
)
