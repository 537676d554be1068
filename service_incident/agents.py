"""Reference policies. They read observations only (never the world), like any agent would.

- `ExpertAgent` follows the evidence: from the paged user-facing services it follows the upstreams
  that logs blame, refutes blamed services whose own logs are clean, and declares the service whose
  trouble is its own; severity from the rubric applied to the alerts.
- `LoudestSignalAgent` reads dashboards and blames the service with the worst error rate.
- `RandomAgent` acts at random: the floor.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Protocol

from .models import Action, Declare, InspectLogs, InspectMetrics, Metrics, Observation
from .telemetry import ANOMALY_LEVELS, parse_time
from .world import rubric

_BLAME = re.compile(r"\bupstream=([\w.-]+)")
_ERROR_RATIO = re.compile(r"5xx ratio ([\d.]+)%")
_P99 = re.compile(r"p99 latency ([\d.]+) ms")
# A page older than this was firing before the incident and is not part of it.
STALE_ALERT_S = 3600
_DATASTORES = frozenset({"database", "queue"})


class Agent(Protocol):
    name: str

    def act(self, observation: Observation) -> Action: ...


def read_log(text: str) -> tuple[bool, Counter[str]]:
    """Whether a service's log shows trouble of its own, and which upstreams its errors blame."""
    own, blames = False, Counter[str]()
    for line in text.splitlines():
        fields = line.split(maxsplit=4)
        if len(fields) < 4 or fields[3] not in ANOMALY_LEVELS:
            continue
        blamed = _BLAME.search(line)
        if blamed:
            blames[blamed.group(1)] += 1
        else:
            own = True
    return own, blames


def paged_services(observation: Observation) -> list[str]:
    """Services with live pages, user-facing critical ones first (the order alerts arrive in)."""
    now = parse_time(observation.clock)
    seen: dict[str, None] = {}
    for alert in observation.alerts:
        if (now - parse_time(alert.since)).total_seconds() < STALE_ALERT_S:
            seen.setdefault(alert.service)
    return list(seen)


def user_impact(observation: Observation) -> tuple[float, float]:
    error_rate = latency = 0.0
    for alert in observation.alerts:
        if match := _ERROR_RATIO.search(alert.summary):
            error_rate = max(error_rate, float(match.group(1)) / 100)
        if match := _P99.search(alert.summary):
            latency = max(latency, float(match.group(1)))
    return error_rate, latency


class ExpertAgent:
    name = "expert"

    def act(self, observation: Observation) -> Action:
        logs = observation.visible_logs
        services = set(observation.services)
        refuted: set[str] = set()
        guess: str | None = None
        starts = [*paged_services(observation), *observation.services]
        for start in dict.fromkeys(starts):
            current: str | None = start
            while current is not None:
                if current not in logs:
                    return self._inspect_or_guess(observation, current)
                own, blames = read_log(logs[current])
                following: str | None = None
                for upstream, _ in sorted(blames.items(), key=lambda item: (-item[1], item[0])):
                    if upstream in refuted or upstream not in services:
                        continue
                    if upstream not in logs:
                        return self._inspect_or_guess(observation, upstream)
                    upstream_own, upstream_blames = read_log(logs[upstream])
                    if upstream_own or set(upstream_blames) - refuted:
                        following = upstream
                        break
                    refuted.add(upstream)
                if following is None:
                    if own:
                        return self._declare(observation, current)
                    guess = guess or current
                current = following
        return self._declare(observation, guess or observation.services[0])

    def _inspect_or_guess(self, observation: Observation, service: str) -> Action:
        if observation.max_steps - observation.step_count > 1:
            return InspectLogs(target=service)
        return self._declare(observation, service)

    @staticmethod
    def _declare(observation: Observation, root: str) -> Declare:
        kinds = {card.name: card.kind for card in observation.topology}
        at_risk = kinds.get(root) in _DATASTORES and any(
            " CRIT " in line and "write" in line for line in observation.visible_logs.get(root, "").splitlines()
        )
        error_rate, latency = user_impact(observation)
        return Declare(target=root, severity=rubric(error_rate, latency, at_risk))


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
