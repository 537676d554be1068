"""Reference policies. They read observations only (never the world), like any agent would.

- `ExpertAgent` investigates like an on-call engineer: traces from the paged user-facing services to
  find where failures and slowness originate, the suspect's own logs, then a second view (health,
  deploys, database diagnostics) to choose the fix; it fixes, watches the pages, looks again if users
  still suffer (a second fault may hide behind the first), and declares what it fixed; severity from
  the rubric applied to the pages' peaks.
- `StructuredInvestigator` follows the blame in log lines hop by hop and takes it at its word: fooled
  by wrong blame and by callers that do not name their upstream; it never remediates.
- `LoudestSignalAgent` (the symptom chaser) reads dashboards and blames the worst error rate.
- `RandomAgent` acts at random: the floor.
- `fitted.FittedAgent` investigates like `expert` but ranks suspects, fixes and severity with models
  fitted on training play: the top rung.

`REFERENCE_AGENTS` lists them as a skill ladder, weakest first; `AGENTS` adds the fitted one on top.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Protocol

from ..faults import RECORD_KINDS
from ..models import (
    ACTIONS_BY_NAME,
    Action,
    CheckHealth,
    Declare,
    DeclareRootCauses,
    InspectDeploys,
    InspectLogs,
    InspectMetrics,
    InspectTraces,
    Metrics,
    Observation,
    Resolve,
    RunDbQuery,
)
from ..telemetry import LOUD_LEVELS, level, parse_time
from ..world.rubric import rubric

# A page older than this was firing before the incident and is not part of it.
STALE_ALERT_S = 3600
_USER_SIGNALS = frozenset({"http_5xx_ratio", "p99_latency_ms"})
_LOUD = frozenset(LOUD_LEVELS)
# A caller's line about a dependency names it one of these ways (or not at all).
_BLAME = re.compile(r'\b(?:upstream=|host=)([\w.-]+?)(?:\.svc\.cluster\.local:\d+)?(?=[\s"]|$)')
_DEPENDENCY_WORDS = (
    "upstream=",
    "host=",
    'call="',
    "deadline exceeded",
    "circuit breaker",
    "connection refused",
    "connection reset",
    "rejected credentials",
    "returned nil",
    "handshake with upstream",
    "write failed",
    "upstream returned",
)
# Side work every service does now and then (batch jobs, exports, webhooks, backups, a throttled
# period): its failures are on paths no user request takes, so they say nothing about a page.
_SIDE_WORK_WORDS = (
    "job=",
    "webhook",
    "export job",
    "object storage",
    "scheduled snapshot",
    "audit stream",
    "cpu throttled",
)
_SPAN = re.compile(r" (\d+)ms (\S.*)$")
# A span spending this long in its own code is where a latency fault lives.
SLOW_SPAN_MS = 900
# Steps a fix is given to show on the pages before another cause is looked for.
RECOVERY_WATCH = 3
# A change shipped this recently is a suspect.
RECENT_CHANGE_S = 3 * 3600


class Agent(Protocol):
    name: str

    def act(self, observation: Observation) -> Action: ...


def paged_services(observation: Observation) -> list[str]:
    """Services paged during this incident, user-facing critical ones first (the order alerts arrive in)."""
    now = parse_time(observation.clock)
    seen: dict[str, None] = {}
    for alert in observation.alerts:
        if alert.signal != "disk_pct" and (now - parse_time(alert.since)).total_seconds() < STALE_ALERT_S:
            seen.setdefault(alert.service)
    return list(seen)


def user_impact(observation: Observation) -> tuple[float, float]:
    """The worst error rate and p99 latency users have seen, from the pages' peaks."""
    error_rate = max((a.peak for a in observation.alerts if a.signal == "http_5xx_ratio"), default=0.0)
    latency = max((a.peak for a in observation.alerts if a.signal == "p99_latency_ms"), default=0.0)
    return error_rate, latency


def _flagged(line: str) -> bool:
    return level(line) in _LOUD and not any(word in line for word in _SIDE_WORK_WORDS)


def own_trouble(log_text: str) -> list[str]:
    """A service's loud lines that are about itself, not about a dependency it calls."""
    return [
        line for line in log_text.splitlines() if _flagged(line) and not any(word in line for word in _DEPENDENCY_WORDS)
    ]


# An on-call runbook: what the evidence of a service's own views suggests doing, first match wins. A
# status code is matched with its reason, so a timestamp's milliseconds never read as one.
RUNBOOK: tuple[tuple[str, str], ...] = (
    ("read_only=on", "failover"),
    ("read-only", "failover"),
    ("CLUSTERDOWN", "failover"),
    ("marked dead", "failover"),
    ("No space left", "expand_volume"),
    ("Disk is full", "expand_volume"),
    ("100% used", "expand_volume"),
    ("disk resource limit", "expand_volume"),
    ("certificate", "renew_certificate"),
    ("CERTIFICATE_VERIFY", "renew_certificate"),
    ("blocking session", "terminate_blocker"),
    ("eadlock", "terminate_blocker"),
    ("chronyd", "resync_clock"),
    ("ntp: time offset", "resync_clock"),
    ("clock unsynchronized", "resync_clock"),
    ("used before issued", "resync_clock"),
    ("not valid yet", "resync_clock"),
    ("429 Too Many", "escalate"),
    ("quota", "escalate"),
    ("unreachable", "escalate"),
    ("identity provider", "escalate"),
    ("health check failing", "escalate"),
    ("i/o timeout", "escalate"),
    ("deploy", "rollback"),
    ("migration", "rollback"),
    ("canary", "rollback"),
    ("maxmemory", "scale_up"),
    ("evictions", "scale_up"),
    ("queue depth", "scale_up"),
    ("accept queue", "scale_up"),
    ("too many requests in flight", "scale_up"),
    ("memory limit", "scale_up"),
    ("memory pressure", "scale_up"),
    ("working set", "scale_up"),
)


def runbook(evidence: str) -> str:
    """The remedy an SRE would reach for given a root's views; restart when nothing more specific fits."""
    return next((remedy for marker, remedy in RUNBOOK if marker in evidence), "restart")


def recent_change(deploys: str, now: str) -> bool:
    """Whether the deploy history lists a change (not a rollback) shipped in the last few hours."""
    clock = parse_time(now)
    for line in deploys.splitlines():
        stamp, _, text = line.partition(" ")
        # Release notes say what a change meant, not what it broke: any recent one is a suspect.
        if text.startswith("rollback"):
            continue
        if (clock - parse_time(stamp)).total_seconds() < RECENT_CHANGE_S:
            return True
    return False


def trace_origins(traces: str) -> Counter[str]:
    """Where failures and slowness start in sampled traces: a failing span none of whose children
    failed, and a span whose own time (its duration less its children's) dominates the request."""
    return Counter(service for trace in _split_traces(traces) for service, _ in _origins(trace))


def explained_failures(traces: str) -> dict[str, float]:
    """Trace origins, each failing one weighted by the failures it stands for: the failed requests the
    view's breakdown by endpoint counts, shared among the failed traces it shows. A service behind
    many of the sampled failures outranks one behind a few, though both show in two traces."""
    failed = sum(int(count) for count in _FAILED_ROW.findall(traces))
    split = _split_traces(traces)
    shown = sum(1 for trace in split if trace and trace[0][3] != "ok")
    weight = max(1.0, failed / shown) if shown else 1.0
    found: dict[str, float] = {}
    for trace in split:
        for service, failing in _origins(trace):
            found[service] = found.get(service, 0.0) + (weight if failing else 1.0)
    return found


_FAILED_ROW = re.compile(r"^endpoint .+: \d+ requests, (\d+) failed, ", re.MULTILINE)


def _origins(trace: list[tuple[int, str, float, str]]) -> list[tuple[str, bool]]:
    """The spans of one trace where something starts: (service, whether it is a failure, else slowness)."""
    found = []
    total = max((ms for _, _, ms, _ in trace), default=1.0) or 1.0
    for index, (depth, service, ms, status) in enumerate(trace):
        children = []
        for later in trace[index + 1 :]:
            if later[0] <= depth:
                break
            if later[0] == depth + 1:
                children.append(later)
        child_ms = sum(c[2] for c in children)
        if status != "ok" and not any(c[3] != "ok" for c in children):
            found.append((service, True))
        if ms - child_ms > 0.5 * total and ms - child_ms > SLOW_SPAN_MS:
            found.append((service, False))
    return found


def _depends_on(topology: dict[str, list[str]], service: str, target: str) -> bool:
    stack, seen = list(topology.get(service, ())), set()
    while stack:
        current = stack.pop()
        if current == target:
            return True
        if current not in seen:
            seen.add(current)
            stack.extend(topology.get(current, ()))
    return False


def _split_traces(traces: str) -> list[list[tuple[int, str, float, str]]]:
    found: list[list[tuple[int, str, float, str]]] = []
    for line in traces.splitlines():
        if line.startswith("trace "):
            found.append([])
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2 - 1
        span = _SPAN.search(line)
        if span is None or not found:
            continue
        found[-1].append((depth, line.split()[0], float(span.group(1)), span.group(2)))
    return found


class ExpertAgent:
    """Localizes with traces, confirms with the suspect's own views, fixes, watches, declares.

    Each call re-derives everything from the observation, so the agent holds no hidden state.
    """

    name = "expert"

    def act(self, observation: Observation) -> Action:  # noqa: C901 (rules in priority order, read top to bottom)
        obs = observation
        left = obs.max_steps - obs.step_count
        facing = {c.name for c in obs.topology if c.user_facing}
        kinds = {c.name: c.kind for c in obs.topology}
        can_trace = "inspect_traces" in obs.available_actions
        paged = paged_services(obs)
        starts = [s for s in paged if s in facing] or paged or [obs.services[0]]
        hurting = self._hurting(obs)
        remedied = [r.target for r in obs.action_history if ACTIONS_BY_NAME[r.action].kind == "remedy" and r.target]
        # The last remedy's step: traces older than it describe the world before the fix.
        last_fix = max((r.step for r in obs.action_history if ACTIONS_BY_NAME[r.action].kind == "remedy"), default=-1)
        looked = {(r.action, r.target): r.step for r in obs.action_history}
        if left <= 1:
            return self._close(obs, self._roots(obs))
        # A fix takes a few minutes to show: watch the pages before looking for another cause.
        watch = [s for s in hurting if looked.get(("inspect_metrics", s), -1) < obs.step_count - 1]
        if remedied and watch and obs.step_count - last_fix < RECOVERY_WATCH and left > 2:
            return InspectMetrics(target=watch[0], rationale=f"watching {watch[0]} recover")
        if remedied and not hurting:
            return self._finish(obs)
        # 1. Localize: traces through the paged user-facing services (fresh ones after a fix).
        if can_trace:
            for start in hurting[:2] if remedied else starts[:2]:
                if looked.get(("inspect_traces", start), -2) <= last_fix and start not in remedied:
                    # After a fix, a service that still fails but is not slow: what still fails is the question.
                    failing_only = bool(remedied) and start not in self._slow(obs)
                    return InspectTraces(target=start, errors_only=failing_only, rationale=f"{start} is paged")
        suspects = self._suspects(obs, starts)
        # 2. Confirm each suspect from its own views and pick its fix.
        for suspect in suspects:
            if suspect in remedied:
                continue
            if suspect not in obs.visible_logs:
                return InspectLogs(target=suspect, rationale=f"the evidence points at {suspect}")
            if not can_trace and not own_trouble(obs.visible_logs[suspect]):
                continue
            # Logs shown at reset are no evidence of the investigator's own: confirm in another view.
            own_look = ("inspect_logs", suspect) in looked or suspect in obs.visible_metrics
            if not own_look and "inspect_metrics" in obs.available_actions:
                return InspectMetrics(target=suspect, rationale=_cite(obs, suspect))
            second = self._second_view(obs, suspect, kinds[suspect])
            if second is not None:
                return second
            if "restart" in obs.available_actions and left > 2:
                remedy = ACTIONS_BY_NAME[runbook(self._evidence(obs, suspect))]
                return remedy(target=suspect, rationale=_cite(obs, suspect))  # type: ignore[call-arg, return-value]
        # 3. Watch users recover; look again if they do not.
        if remedied and hurting and left > 2 and "inspect_metrics" in obs.available_actions:
            target = hurting[obs.step_count % len(hurting)]
            if looked.get(("inspect_metrics", target), -1) < obs.step_count - 1:
                return InspectMetrics(target=target, rationale=f"watching {target} recover")
        return self._finish(obs)

    def _finish(self, obs: Observation) -> Action:
        """Name the roots where that does not end the episode, then close it."""
        naming_only = "declare" not in obs.terminal_actions and "declare" in obs.available_actions
        if naming_only and not any(r.action == "declare" for r in obs.action_history):
            return self._declare(obs, self._roots(obs))
        return self._close(obs, self._roots(obs))

    @staticmethod
    def _hurting(obs: Observation) -> list[str]:
        return sorted({a.service for a in obs.alerts if a.status == "firing" and a.signal in _USER_SIGNALS})

    @staticmethod
    def _slow(obs: Observation) -> set[str]:
        return {a.service for a in obs.alerts if a.status == "firing" and a.signal == "p99_latency_ms"}

    def _suspects(self, obs: Observation, starts: list[str]) -> list[str]:
        """Services where trouble originates, most evidence first; without traces, a walk along the
        blame in the logs, which lists the services whose logs it still needs."""
        scores = _evidence_scores(obs)
        if scores:
            return _through_clients(obs, sorted(scores, key=lambda service: -scores[service]))
        topology = {card.name: card.depends_on for card in obs.topology}
        confirmed: list[str] = []
        pending: list[str] = []
        frontier, seen = list(starts), set()
        while frontier:
            service = frontier.pop(0)
            if service in seen:
                continue
            seen.add(service)
            logs = obs.visible_logs.get(service)
            if logs is None:
                # A page that a confirmed root already explains needs no look of its own.
                if not any(_depends_on(topology, service, root) for root in confirmed):
                    pending.append(service)
                continue
            own = own_trouble(logs)
            if own:
                confirmed.append(service)
            # A service in trouble of its own still follows errors (a second fault), not retried warnings.
            loud = [
                line
                for line in logs.splitlines()
                if _flagged(line) and line not in own and not (own and level(line) == "WARN")
            ]
            named = [m.group(1) for line in loud if (m := _BLAME.search(line)) and m.group(1) in topology]
            # Depth first: the blamed dependency is read before the next page.
            if named:
                frontier[:0] = sorted(set(named), key=named.index)
            elif loud or logs.startswith("(no log lines"):
                frontier[:0] = topology.get(service, [])
        return _through_clients(obs, confirmed + pending)

    def _second_view(self, obs: Observation, suspect: str, kind: str) -> Action | None:
        """The view that tells which fix fits: deploys for an app, diagnostics for a database."""
        logs = obs.visible_logs.get(suspect, "")
        evidence = " ".join(own_trouble(logs))
        if kind == "database" and "run_db_query" in obs.available_actions and suspect not in obs.visible_db:
            return RunDbQuery(target=suspect, rationale=_cite(obs, suspect))
        if kind == "database" and runbook(evidence + obs.visible_db.get(suspect, "")) == "restart":
            evidence = ""  # the diagnostics do not settle it: a schema change might
        can = obs.available_actions
        if (
            kind not in ("cache", "queue")
            and "inspect_deploys" in can
            and suspect not in obs.visible_deploys
            and runbook(evidence) in ("restart", "scale_up")
        ):
            return InspectDeploys(target=suspect, rationale=_cite(obs, suspect))
        if logs.startswith("(no log lines") and "check_health" in can and suspect not in obs.visible_health:
            return CheckHealth(target=suspect, rationale=f"no logs from {suspect}")
        return None

    @staticmethod
    def _evidence(obs: Observation, suspect: str) -> str:
        parts = [" ".join(own_trouble(obs.visible_logs.get(suspect, ""))), obs.visible_db.get(suspect, "")]
        if recent_change(obs.visible_deploys.get(suspect, ""), obs.clock):
            parts.append("deploy")
        parts.append(obs.visible_health.get(suspect, "").replace("deployment ", ""))
        return " ".join(parts)

    def _roots(self, obs: Observation) -> list[str]:
        fixed = [r.target for r in obs.action_history if ACTIONS_BY_NAME[r.action].kind == "remedy" and r.target]
        roots = list(dict.fromkeys(fixed))
        if not roots:
            starts = paged_services(obs)
            found = [s for s in self._suspects(obs, starts) if s in obs.visible_logs or obs.visible_traces]
            roots = found[:1] or starts[:1] or obs.services[:1]
        return roots

    def _close(self, obs: Observation, roots: list[str]) -> Action:
        if "resolve" in obs.terminal_actions:
            return Resolve(target=roots[0], rationale=_cite(obs, roots[0]))
        if "declare" not in obs.available_actions:
            return DeclareRootCauses(targets=roots, rationale=_cite(obs, roots[0]))
        return self._declare(obs, roots)

    @staticmethod
    def _declare(obs: Observation, roots: list[str]) -> Declare:
        kinds = {card.name: card.kind for card in obs.topology}
        writes = ("No space left", "Disk is full", "read-only", "read_only=on", "disk resource limit", "100% used")
        at_risk = any(
            kinds.get(root) in RECORD_KINDS
            and any(w in obs.visible_logs.get(root, "") + obs.visible_db.get(root, "") for w in writes)
            for root in roots
        )
        error_rate, latency = user_impact(obs)
        return Declare(
            target=roots[0],
            additional_targets=roots[1:],
            severity=rubric(error_rate, latency, at_risk),
            rationale=_cite(obs, roots[0]),
        )


# A database's statistics ranking one client's statement first, at many times its usual calls.
_PUSHING_CLIENT = re.compile(r"top statement by calls: .*? client=([\w-]+),")


def _through_clients(obs: Observation, suspects: list[str]) -> list[str]:
    """Suspects with a database whose statistics show clients flooding it replaced by those clients: the
    database is saturated by their calls, not at fault itself unless its diagnostics say more."""
    found: list[str] = []
    for suspect in suspects:
        report = obs.visible_db.get(suspect, "").splitlines()
        clients = [m.group(1) for line in report if (m := _PUSHING_CLIENT.search(line))]
        found += clients
        # A database with trouble of its own besides (another line of its diagnostics) stays a suspect.
        if len(report) > len(clients) or not clients:
            found.append(suspect)
    return list(dict.fromkeys(found))


def _evidence_scores(obs: Observation) -> dict[str, float]:
    """How much of what the traces and pages show starts at each service."""
    scores: dict[str, float] = {}
    for text in obs.visible_traces.values():
        for service, score in explained_failures(text).items():
            scores[service] = scores.get(service, 0.0) + score
    for alert in obs.alerts:
        if alert.signal == "memory_pct" and alert.status == "firing":
            scores[alert.service] = scores.get(alert.service, 0.0) + 1
    return scores


def _cite(obs: Observation, service: str) -> str:
    """A rationale that quotes what was seen of a service: its own loud log lines, else its pages."""
    lines = [line.split(": ", 1)[-1] for line in own_trouble(obs.visible_logs.get(service, ""))]
    seen = lines[:2] or [f"{a.signal} {a.summary}" for a in obs.alerts if a.service == service][:2]
    return f"{service}: " + " | ".join(seen) if seen else f"{service} is on the path of the paged services"


def loudness(metrics: Metrics) -> tuple[float, float]:
    """How alarming a dashboard looks: the error rate first, latency to break ties."""
    return metrics.error_rate, metrics.p99_ms


class LoudestSignalAgent:
    name = "loudest_signal"

    def act(self, observation: Observation) -> Action:
        unseen = [
            s
            for s in dict.fromkeys([*paged_services(observation), *observation.services])
            if s not in observation.visible_metrics
        ]
        if unseen and observation.max_steps - observation.step_count > 1:
            return InspectMetrics(target=unseen[0])
        seen = observation.visible_metrics
        if not seen:
            return Declare(target=observation.services[0], severity="P1")
        loudest = max(seen, key=lambda name: loudness(seen[name]))
        return Declare(target=loudest, severity=rubric(seen[loudest].error_rate, seen[loudest].p99_ms, False))


class RandomAgent:
    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self._rng = random.Random(seed)

    def act(self, observation: Observation) -> Action:
        rng = self._rng
        target = rng.choice(observation.services)
        if observation.step_count >= observation.max_steps - 1 or rng.random() < 0.25:
            return Declare(target=target, severity=rng.choice(("P0", "P1", "P2")))
        return rng.choice((InspectLogs, InspectMetrics))(target=target)


class StructuredInvestigator:
    """Follows the blame in log lines from the first page, hop by hop, and takes it at face value.

    A service with a loud line of its own is declared at once (a noisy neighbour will do); otherwise
    it follows the first dependency an error names (a warning if no error does), or, where lines do
    not say which dependency failed, the first paged dependency. It never looks at traces, metrics,
    deploys or health, and never remediates.
    """

    name = "structured"

    def act(self, observation: Observation) -> Action:
        obs = observation
        topology = {card.name: card.depends_on for card in obs.topology}
        paged = paged_services(obs)
        service = paged[0] if paged else next(iter(obs.visible_logs), obs.services[0])
        chain: list[str] = []
        while service in obs.visible_logs and service not in chain:
            chain.append(service)
            logs = obs.visible_logs[service]
            if own_trouble(logs):
                break
            loud = [line for line in logs.splitlines() if _flagged(line)]
            named = [
                m.group(1)
                for line in sorted(loud, key=lambda line: level(line) == "WARN")
                if (m := _BLAME.search(line)) and m.group(1) in topology
            ]
            deps = [d for d in topology.get(service, []) if d not in chain]
            if named:
                service = named[0]
            elif (loud or logs.startswith("(no log lines")) and deps:
                service = sorted(deps, key=lambda d: d not in paged)[0]
            else:
                break
        else:
            if service not in chain and obs.max_steps - obs.step_count > 1:
                return InspectLogs(target=service, rationale=_cite(obs, service))
        return self._close(obs, service)

    @staticmethod
    def _close(observation: Observation, service: str) -> Action:
        rationale = _cite(observation, service)
        declared = any(r.action == "declare" for r in observation.action_history)
        if "declare" in observation.available_actions and not declared:
            error_rate, latency = user_impact(observation)
            return Declare(target=service, severity=rubric(error_rate, latency, False), rationale=rationale)
        if "resolve" in observation.terminal_actions:
            return Resolve(target=service, rationale=rationale)
        return DeclareRootCauses(targets=[service], rationale=rationale)


class AgentFactory(Protocol):
    def __call__(self, seed: int) -> Agent: ...


def _random(seed: int) -> Agent:
    return RandomAgent(seed)


def _symptom_chaser(seed: int) -> Agent:
    return LoudestSignalAgent()


def _structured(seed: int) -> Agent:
    return StructuredInvestigator()


def _expert(seed: int) -> Agent:
    return ExpertAgent()


def _fitted(seed: int) -> Agent:
    # The fitted agent builds on this module's rules, so it is imported when first asked for.
    from .fitted import FittedAgent

    return FittedAgent()


# The skill ladder, weakest first: each agent is a new one per episode, built from the episode's seed.
REFERENCE_AGENTS: dict[str, AgentFactory] = {
    "random": _random,
    "symptom_chaser": _symptom_chaser,
    "structured": _structured,
    "expert": _expert,
}
# Above the ladder: agents fitted on training play of the generated tiers (elsewhere they play as
# `expert` does), so they rank with the ladder on those tiers only.
FITTED_AGENTS: dict[str, AgentFactory] = {"fitted": _fitted}
AGENTS: dict[str, AgentFactory] = {**REFERENCE_AGENTS, **FITTED_AGENTS}
