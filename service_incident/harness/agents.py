"""Reference policies. They read observations only (never the world), like any agent would.

- `ExpertAgent` follows the evidence: from the paged user-facing services it follows the upstreams
  that logs blame, refutes blamed services whose own logs are clean, and declares the service whose
  trouble is its own; severity from the rubric applied to the alerts.
- `StructuredInvestigator` follows the dependency evidence but takes it at its word: fooled by red
  herrings, it never remediates.
- `LoudestSignalAgent` (the symptom chaser) reads dashboards and blames the worst error rate.
- `RandomAgent` acts at random: the floor.

`REFERENCE_AGENTS` lists them as a skill ladder, weakest first.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Protocol

from msgspec import Struct

from ..models import (
    Action,
    Declare,
    DeclareRootCauses,
    Escalate,
    InspectLogs,
    InspectMetrics,
    Metrics,
    Observation,
    Resolve,
    Restart,
    Rollback,
    ScaleUp,
)
from ..telemetry import ANOMALY_LEVELS, UPSTREAM, level, parse_time
from ..world import rubric

# A page older than this was firing before the incident and is not part of it.
STALE_ALERT_S = 3600
_DATASTORES = frozenset({"database", "queue"})
THOROUGH_BUDGET = 8
_USER_SIGNALS = frozenset({"http_5xx_ratio", "p99_latency_ms"})


class Agent(Protocol):
    name: str

    def act(self, observation: Observation) -> Action: ...


def read_log(text: str) -> tuple[bool, Counter[str]]:
    """Whether a service's log shows trouble of its own, and how strongly its lines blame each upstream.

    An error blames fully; a warning (a slow call that was retried) blames a quarter as much.
    """
    own, blames = False, Counter[str]()
    for line in filter(_flagged, text.splitlines()):
        blamed = UPSTREAM.search(line)
        if blamed:
            blames[blamed.group(1)] += 0.25 if level(line) == "WARN" else 1.0
        else:
            own = True
    return own, blames


def paged_services(observation: Observation) -> list[str]:
    """Services paged during this episode, user-facing critical ones first (the order alerts arrive in)."""
    now = parse_time(observation.clock)
    seen: dict[str, None] = {}
    for alert in observation.alerts:
        if (now - parse_time(alert.since)).total_seconds() < STALE_ALERT_S:
            seen.setdefault(alert.service)
    return list(seen)


def _long_paged(observation: Observation) -> set[str]:
    now = parse_time(observation.clock)
    return {
        a.service
        for a in observation.alerts
        if a.signal == "error_ratio" and (now - parse_time(a.since)).total_seconds() >= STALE_ALERT_S
    }


def user_impact(observation: Observation) -> tuple[float, float]:
    """The worst error rate and p99 latency users have seen, from the pages' peaks."""
    error_rate = max((a.peak for a in observation.alerts if a.signal == "http_5xx_ratio"), default=0.0)
    latency = max((a.peak for a in observation.alerts if a.signal == "p99_latency_ms"), default=0.0)
    return error_rate, latency


# An on-call runbook: what the root's own log lines suggest doing, first match wins.
RUNBOOK: tuple[tuple[str, str], ...] = (
    ("429 Too Many Requests", "escalate"),
    ("backends unreachable", "escalate"),
    ("certificate has expired", "escalate"),
    ("memory limit", "scale_up"),
    ("shedding load", "scale_up"),
    ("No space left on device", "scale_up"),
    ("maxmemory reached", "scale_up"),
    ("OutOfMemoryError", "rollback"),
    ("SerializationError", "rollback"),
    ("NullPointerException", "rollback"),
    ("audience mismatch", "rollback"),
    ("duration:", "rollback"),
)
_REMEDY_ACTIONS = {"restart": Restart, "rollback": Rollback, "scale_up": ScaleUp, "escalate": Escalate}


def runbook(log_text: str) -> str:
    """The remedy an SRE would reach for given a root's logs; restart when nothing more specific fits."""
    return next((remedy for marker, remedy in RUNBOOK if marker in log_text), "restart")


def _depends_on(topology: dict[str, list[str]], service: str, target: str) -> bool:
    stack, seen = [service], set()
    while stack:
        current = stack.pop()
        if current == target:
            return True
        if current not in seen:
            seen.add(current)
            stack.extend(topology.get(current, ()))
    return False


class _Need(Struct, frozen=True):
    """The walk cannot go on without the logs of `target`."""

    target: str


class _Walk:
    def __init__(self, observation: Observation) -> None:
        self.logs = observation.visible_logs
        self.topology = {card.name: card.depends_on for card in observation.topology}
        facing = {card.name for card in observation.topology if card.user_facing}
        self.paged = paged_services(observation)
        self.flapping = _long_paged(observation)
        self.starts = [s for s in self.paged if s in facing] or self.paged or list(observation.services)
        self.roots: list[str] = []
        self.refuted: set[str] = set()
        self.visited: set[str] = set()

    def explained(self, service: str) -> bool:
        return any(_depends_on(self.topology, service, root) for root in self.roots)

    def trace(self, service: str) -> str | _Need | None:
        """The root cause behind `service`, a service whose logs are needed first, or None."""
        if service in self.visited:
            return None
        if service not in self.logs:
            return _Need(service)
        self.visited.add(service)
        own, blames = self.read(service)
        if _silent(self.logs[service]):
            weak = sorted(self.topology.get(service, ()), key=lambda d: (d not in self.paged, d))
            suspects = [(d, 0.0) for d in weak]
        else:
            suspects = sorted(blames.items(), key=lambda item: (-item[1], item[0]))
        for upstream, strength in suspects:
            if upstream in self.refuted or upstream in self.visited or upstream not in self.topology:
                continue
            # Errors are followed even behind a known root (there may be a second one); hints are not.
            if strength < 1.0 and self.explained(upstream):
                continue
            if upstream not in self.logs:
                return _Need(upstream)
            upstream_own, upstream_blames = self.read(upstream)
            if not (upstream_own or upstream_blames or _silent(self.logs[upstream])):
                self.refuted.add(upstream)
                continue
            found = self.trace(upstream)
            if isinstance(found, _Need):
                return found
            if found is not None and found not in self.roots:
                self.roots.append(found)
        # Trouble of its own makes a service a root cause even when it also suffers an upstream's.
        return service if own else None

    def read(self, service: str) -> tuple[bool, Counter[str]]:
        own, blames = read_log(self.logs[service])
        # A service paged for hours has a known, older problem: its own errors are not this incident's.
        return own and service not in self.flapping, blames


class ExpertAgent:
    """Follows the evidence from the paged user-facing services to the services whose trouble is their own.

    A depth-first walk along blamed upstreams, errors before warnings; a blamed service whose own logs
    are clean is refuted; a service whose logs never arrived is walked through via its dependencies.
    Each call re-derives everything from the observation, so the agent holds no hidden state.
    """

    name = "expert"

    def act(self, observation: Observation) -> Action:
        walk = _Walk(observation)
        # Given a budget to spare, every paged service is read in case a second fault hides behind the first.
        thorough = observation.max_steps >= THOROUGH_BUDGET
        for start in walk.starts:
            if walk.explained(start) and not thorough:
                continue
            found = walk.trace(start)
            if isinstance(found, str):
                walk.roots.append(found)
            elif found is not None:
                return self._look(observation, found.target, walk.roots)
        return self._conclude(observation, walk.roots or walk.starts[:1])

    def _look(self, observation: Observation, service: str, roots: list[str]) -> Action:
        if observation.max_steps - observation.step_count > 1:
            return InspectLogs(target=service, rationale=_cite(observation, service))
        return self._close(observation, roots or [service])

    def _conclude(self, observation: Observation, roots: list[str]) -> Action:
        """Name the roots where that does not end the episode, remediate each once if the task allows and
        the budget leaves room, watch users recover, then close the episode."""
        history = observation.action_history
        left = observation.max_steps - observation.step_count
        naming_only = "declare" not in observation.terminal_actions and "declare" in observation.available_actions
        if naming_only and left >= 2 and not any(": declare(" in entry for entry in history):
            return self._declare(observation, roots)
        remedied = {
            entry.split("(target=", 1)[1].split(")")[0]
            for entry in history
            if any(f"{name}(target=" in entry for name in _REMEDY_ACTIONS)
        }
        pending = [root for root in roots if root not in remedied]
        can_fix = all(name in observation.available_actions for name in _REMEDY_ACTIONS)
        if can_fix and pending and left >= len(pending) + 2:
            root = pending[0]
            remedy = _REMEDY_ACTIONS[runbook(observation.visible_logs.get(root, ""))]
            return remedy(target=root, rationale=_cite(observation, root))
        hurting = sorted(
            {a.service for a in observation.alerts if a.status == "firing" and a.signal in _USER_SIGNALS}
        )
        if can_fix and remedied and hurting and left >= 2:
            # Watch what users see until the pages clear, one paged service after another.
            target = hurting[observation.step_count % len(hurting)]
            return InspectMetrics(target=target, rationale=_cite(observation, target))
        return self._close(observation, roots)

    def _close(self, observation: Observation, roots: list[str]) -> Action:
        """The action that ends this task's episode."""
        if "resolve" in observation.terminal_actions:
            return Resolve(target=roots[0], rationale=_cite(observation, roots[0]))
        if "declare" not in observation.available_actions:
            return DeclareRootCauses(targets=roots, rationale=_cite(observation, roots[0]))
        return self._declare(observation, roots)

    @staticmethod
    def _declare(observation: Observation, roots: list[str]) -> Declare:
        kinds = {card.name: card.kind for card in observation.topology}
        at_risk = any(
            kinds.get(root) in _DATASTORES and any(
                " CRIT " in line and "write" in line for line in observation.visible_logs.get(root, "").splitlines()
            )
            for root in roots
        )
        error_rate, latency = user_impact(observation)
        return Declare(
            target=roots[0],
            additional_targets=roots[1:],
            severity=rubric(error_rate, latency, at_risk),
            rationale=_cite(observation, roots[0]),
        )


def _cite(observation: Observation, service: str) -> str:
    """A rationale that quotes what was seen of a service: its loudest log lines, else its pages."""
    text = observation.visible_logs.get(service, "")
    lines = [line.split(": ", 1)[-1] for line in text.splitlines() if _flagged(line)]
    seen = lines[:2] or [f"{a.signal} {a.summary}" for a in observation.alerts if a.service == service][:2]
    return f"{service}: " + " | ".join(seen) if seen else f"{service} is on the path of the paged services"


def _silent(log_text: str) -> bool:
    """A log view with no lines at all: the service's story has to come from elsewhere."""
    return log_text.startswith("(no log lines")


def loudness(metrics: Metrics) -> tuple[float, float]:
    """How alarming a dashboard looks: the error rate first, latency to break ties."""
    return metrics.error_rate, metrics.latency_ms


class LoudestSignalAgent:
    name = "loudest_signal"

    def act(self, observation: Observation) -> Action:
        unseen = [s for s in dict.fromkeys([*paged_services(observation), *observation.services])
                  if s not in observation.visible_metrics]
        if unseen and observation.max_steps - observation.step_count > 1:
            return InspectMetrics(target=unseen[0])
        seen = observation.visible_metrics
        if not seen:
            return Declare(target=observation.services[0], severity="P1")
        loudest = max(seen, key=lambda name: loudness(seen[name]))
        return Declare(target=loudest, severity=rubric(seen[loudest].error_rate, seen[loudest].latency_ms, False))


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
    """Follows the dependency evidence, but takes every clue at face value, so red herrings fool it.

    From the first page it reads logs hop by hop: a service with any WARN/ERROR line of its own is
    declared at once (a noisy neighbour or old flaky errors will do), otherwise it follows the first
    upstream its log lines blame, warnings included, and never checks the blamed service's story
    against anything else. It never remediates and never looks at deploys or dashboards. Like the
    other agents it re-derives everything from the observation on each call.
    """

    name = "structured"

    def act(self, observation: Observation) -> Action:
        first = observation.alerts[0].service if observation.alerts else None
        service = first or next(iter(observation.visible_logs), observation.services[0])
        chain: list[str] = []
        while service in observation.visible_logs and service not in chain:
            chain.append(service)
            flagged = [line for line in observation.visible_logs[service].splitlines() if _flagged(line)]
            if any(UPSTREAM.search(line) is None for line in flagged):
                break
            blamed = next((match.group(1) for line in flagged if (match := UPSTREAM.search(line))), None)
            if blamed is None:
                break
            service = blamed
        else:  # the walk reached a service whose logs are not visible yet, or went round a cycle
            if service not in chain and observation.max_steps - observation.step_count > 1:
                return InspectLogs(target=service, rationale=_cite(observation, service))
        return self._close(observation, service)

    @staticmethod
    def _close(observation: Observation, service: str) -> Action:
        """Declare the suspect; where declaring does not end the episode, resolve right after."""
        rationale = _cite(observation, service)
        declared = any(": declare(" in entry for entry in observation.action_history)
        if "declare" in observation.available_actions and not declared:
            error_rate, latency = user_impact(observation)
            return Declare(target=service, severity=rubric(error_rate, latency, False), rationale=rationale)
        if "resolve" in observation.terminal_actions:
            return Resolve(target=service, rationale=rationale)
        return DeclareRootCauses(targets=[service], rationale=rationale)


def _flagged(line: str) -> bool:
    """Whether a log line is at WARN or above."""
    return level(line) in ANOMALY_LEVELS


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


# The skill ladder, weakest first: each agent is a new one per episode, built from the episode's seed.
REFERENCE_AGENTS: dict[str, AgentFactory] = {
    "random": _random,
    "symptom_chaser": _symptom_chaser,
    "structured": _structured,
    "expert": _expert,
}
