"""What the fitted agent reads of an observation, as numbers: one row per service (is it a root, and
which fix fits it) and one row per incident (its severity).

Everything here is computed from a public observation: the topology, the pages, and the views the
agent opened. Log, health and database lines enter as templates (their stamps, pods, ids, numbers
and service names masked), counted against a vocabulary the build chose from training play.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from ...faults import RECORD_KINDS
from ...models import ACTIONS_BY_NAME, Observation
from ...telemetry import LOUD_LEVELS, level, parse_time
from ..agents import STALE_ALERT_S, own_trouble, recent_change, runbook, trace_origins

TIERS = ("easy", "medium", "hard", "expert")
KINDS = ("gateway", "database", "cache", "queue", "external", "search")
SIGNALS = ("http_5xx_ratio", "error_ratio", "p99_latency_ms", "cpu_pct", "memory_pct", "disk_pct")
# A release shipped this recently is a suspect (minutes).
RECENT_RELEASE_MIN = 180
# Ages are capped here (minutes), so a months-old release reads like a week-old one.
AGE_CAP_MIN = 7 * 24 * 60
_BLAME = re.compile(r"(?:upstream=|host=)([\w.-]+?)(?:\.svc\.cluster\.local:\d+)?(?=[\s\"]|$)")
# Ids, hashes and numbers: a run of hex digits with a digit in it, then any digits left.
_HEX = re.compile(r"(?<![A-Za-z0-9])(?=[0-9a-f]*\d)[0-9a-f]+(?![A-Za-z0-9])")
_DIGITS = re.compile(r"\d+")
_STATUS = re.compile(r"status=(\d{3})")
REMEDIES = tuple(name for name, action in ACTIONS_BY_NAME.items() if action.kind == "remedy")


def template(line: str, services: Iterable[str]) -> str:
    """A line without its stamp, pod and process, with service names, ids and numbers masked; HTTP
    status codes stay, since a 500 and a 200 are different lines."""
    parts = line.split(maxsplit=3)
    text = parts[3] if len(parts) > 3 and parts[0][:1].isdigit() else line
    for name in sorted(services, key=len, reverse=True):
        text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", "<svc>", text)
    codes = _STATUS.findall(text)
    text = _DIGITS.sub("#", _HEX.sub("#", text))
    for code in codes:
        text = text.replace("status=#", f"status={code}", 1)
    return text


def view_templates(obs: Observation, service: str) -> list[str]:
    """The templates of every line the agent saw of a service's logs, health and database views."""
    found = []
    for prefix, views in (("log", obs.visible_logs), ("health", obs.visible_health), ("db", obs.visible_db)):
        for line in views.get(service, "").splitlines():
            found.append(f"{prefix}: {template(line, obs.services)}")
    return found


def depths(obs: Observation) -> dict[str, int]:
    """How far each service lies from an entry point."""
    depends = {c.name: c.depends_on for c in obs.topology}
    called = {d for deps in depends.values() for d in deps}
    depth = {name: 0 for name in depends if name not in called}
    frontier = list(depth)
    while frontier:
        name = frontier.pop()
        for dep in depends[name]:
            if depth.get(dep, -1) < depth[name] + 1:
                depth[dep] = depth[name] + 1
                frontier.append(dep)
    return depth


def blamed(obs: Observation) -> Counter[str]:
    """How often the loud lines of the logs seen name each service as the dependency that failed."""
    found: Counter[str] = Counter()
    for text in obs.visible_logs.values():
        for line in text.splitlines():
            if level(line) in LOUD_LEVELS and (match := _BLAME.search(line)) and match.group(1) in obs.services:
                found[match.group(1)] += 1
    return found


def _minutes(later: str, earlier: str) -> float:
    return (parse_time(later) - parse_time(earlier)).total_seconds() / 60


def _alerts(obs: Observation, service: str) -> list[float]:
    mine = [a for a in obs.alerts if a.service == service]
    row = []
    for signal in SIGNALS:
        alerts = [a for a in mine if a.signal == signal]
        age = min((_minutes(obs.clock, a.since) for a in alerts), default=-60.0)
        row += [
            float(bool(alerts)),
            float(any(a.level == "critical" for a in alerts)),
            float(any(a.status == "firing" for a in alerts)),
            max((a.peak for a in alerts), default=0.0),
            max(-60.0, min(age, 600.0)),
        ]
    row.append(float(any(_minutes(obs.clock, a.since) * 60 >= STALE_ALERT_S for a in mine)))
    return row


def _traces(obs: Observation, service: str, origins: Counter[str]) -> list[float]:
    spans = [line.split() for text in obs.visible_traces.values() for line in text.splitlines()]
    mine = [s for s in spans if s and s[0] == service]
    failing = [s for s in mine if s[-1] != "ok"]
    return [float(origins[service]), float(len(mine)), float(len(failing))]


def _metrics(obs: Observation, service: str) -> list[float]:
    metrics = obs.visible_metrics.get(service)
    if metrics is None or not metrics.history:
        return [0.0] * 9
    first, last = metrics.history[0], metrics.history[-1]
    return [
        1.0,
        metrics.error_rate,
        max(p.error_rate for p in metrics.history) - first.error_rate,
        last.p99_ms / max(first.p99_ms, 1.0),
        max(p.p99_ms for p in metrics.history) / max(first.p99_ms, 1.0),
        last.cpu_pct - first.cpu_pct,
        last.memory_pct - first.memory_pct,
        max(p.memory_pct for p in metrics.history) - min(p.memory_pct for p in metrics.history),
        last.rps / max(first.rps, 1e-6),
    ]


def _deploys(obs: Observation, service: str) -> list[float]:
    text = obs.visible_deploys.get(service)
    if text is None:
        return [0.0, AGE_CAP_MIN, 0.0, 0.0]
    ages = []
    rollbacks = 0
    for line in text.splitlines():
        stamp, _, note = line.partition(" ")
        try:
            ages.append(min(_minutes(obs.clock, stamp), AGE_CAP_MIN))
        except ValueError:
            continue
        rollbacks += note.startswith("rollback")
    recent = sum(age <= RECENT_RELEASE_MIN for age in ages)
    return [1.0, min(ages, default=AGE_CAP_MIN), float(recent), float(rollbacks)]


def runbook_fix(obs: Observation, service: str) -> str:
    """The fix an on-call runbook reads from a service's own views (see `agents.RUNBOOK`)."""
    parts = [" ".join(own_trouble(obs.visible_logs.get(service, ""))), obs.visible_db.get(service, "")]
    if recent_change(obs.visible_deploys.get(service, ""), obs.clock):
        parts.append("deploy")
    parts.append(obs.visible_health.get(service, "").replace("deployment ", ""))
    return runbook(" ".join(parts))


def service_rows(obs: Observation, tier: str, vocabulary: Sequence[str]) -> dict[str, list[float]]:
    """Everything the ranker and the fix classifier read of each service."""
    paged = {a.service for a in obs.alerts}
    origins: Counter[str] = Counter()
    for text in obs.visible_traces.values():
        origins.update(trace_origins(text))
    depth, blames = depths(obs), blamed(obs)
    rows = {}
    for card in obs.topology:
        service = card.name
        callers = [c.name for c in obs.topology if service in c.depends_on]
        logs = obs.visible_logs.get(service)
        counts = Counter(view_templates(obs, service))
        rows[service] = [
            float(card.user_facing),
            *(float(card.kind == kind) for kind in KINDS),
            float(depth.get(service, 0)),
            float(len(card.depends_on)),
            float(len(callers)),
            float(bool(paged & set(callers))),
            float(bool(paged & set(card.depends_on))),
            *_alerts(obs, service),
            *_traces(obs, service, origins),
            float(logs is not None),
            float(len(own_trouble(logs or ""))),
            float(sum(level(line) in LOUD_LEVELS for line in (logs or "").splitlines())),
            float(blames[service]),
            float(service in obs.visible_health),
            float(service in obs.visible_db),
            *_metrics(obs, service),
            *_deploys(obs, service),
            *(float(runbook_fix(obs, service) == r) for r in REMEDIES),
            *(float(counts[t]) for t in vocabulary),
            *(float(tier == t) for t in TIERS),
        ]
    return rows


def incident_row(obs: Observation, tier: str) -> list[float]:
    """What the severity is read from: the pages' peaks, critical pages, and the worst user-facing
    minute the metrics seen show."""
    facing = {c.name for c in obs.topology if c.user_facing}
    seen = [m for s, m in obs.visible_metrics.items() if s in facing]
    return [
        *(max((a.peak for a in obs.alerts if a.signal == s), default=0.0) for s in SIGNALS),
        *(max((a.peak for a in obs.alerts if a.signal == s and a.service in facing), default=0.0) for s in SIGNALS),
        float(sum(a.level == "critical" for a in obs.alerts)),
        # A system of record in trouble of its own may refuse writes, which the rubric grades apart.
        float(sum(len(own_trouble(obs.visible_logs.get(c.name, ""))) for c in obs.topology if c.kind in RECORD_KINDS)),
        max((p.error_rate for m in seen for p in m.history), default=0.0),
        max((p.p99_ms for m in seen for p in m.history), default=0.0),
        *(float(tier == t) for t in TIERS),
    ]
