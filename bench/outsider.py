"""An outsider's fitted player, written from the README and docs alone: what a benchmark entrant with
an hour and scikit-learn would build, to check that the reference agents are a ceiling.

It plays a fixed investigation (traces at the paged entry points, then the logs and metrics of the
top suspects and the deploys of the top applications), turns what it saw of each service into a row
of features (trace origins, log templates, metric deltas over the history, release wording, alert
onsets against the page), and fits gradient-boosted models on training seeds: a ranker that says
which services are roots (it declares every one above a threshold tuned on held-back seeds), a fix
classifier and a severity classifier. It reads observations only; the training labels are the
incidents' published answers (`dataset.labels`), which any postmortem of a training episode shows.

The pager-only ranker is the same machinery over the first observation alone.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from bench_measure import _blamed, _paged, features
from sklearn.ensemble import HistGradientBoostingClassifier

from service_incident import dataset
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.generator import PRESETS
from service_incident.harness.agents import STALE_ALERT_S, _depends_on, own_trouble, trace_origins
from service_incident.models import (
    ACTIONS_BY_NAME,
    Action,
    Declare,
    InspectDeploys,
    InspectLogs,
    InspectMetrics,
    InspectTraces,
    Observation,
)
from service_incident.telemetry import parse_time

# Suspects whose logs and metrics the investigation reads, and how many of them get a deploy look.
SUSPECTS = 3
DEPLOY_LOOKS = 2
ENTRY_TRACES = 2
# What a release's note says when it is an everyday one.
ROUTINE_WORDING = "routine release"
# A release shipped this recently is a suspect (minutes).
RECENT_RELEASE_MIN = 3 * 60
# A memory rise over the metrics' history this large (points) is a leak's shape.
MEMORY_RISE_POINTS = 8.0
# A log template enters the vocabulary once it is seen on this many services in training.
TEMPLATE_MIN_COUNT = 10
TEMPLATE_VOCABULARY = 300
DATASTORES = ("database", "cache", "queue")
_SIGNALS = ("http_5xx_ratio", "p99_latency_ms", "cpu_pct", "memory_pct", "disk_pct")
# Ids, hashes, numbers and the hex tails of pod and job names: a whole run of hex digits with a digit in it.
_HEX = re.compile(r"(?<![A-Za-z0-9])(?=[0-9a-f]*\d)[0-9a-f]+(?![A-Za-z0-9])")
_DIGITS = re.compile(r"\d+")
THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(2, 19))


def _model() -> HistGradientBoostingClassifier:
    # No early stopping: its validation split is a random draw, and the bench is deterministic.
    return HistGradientBoostingClassifier(max_iter=150, learning_rate=0.1, early_stopping=False, random_state=0)


# -- the fixed investigation ----------------------------------------------------------------------


def entries(obs: Observation) -> list[str]:
    facing = [c.name for c in obs.topology if c.user_facing]
    paged = [s for s in _paged(obs) if s in facing]
    return (paged or [s for s in facing if s == "gateway"] or facing)[:ENTRY_TRACES]


# The views the investigation takes of each suspect.
LOOKS = (InspectLogs, InspectMetrics, InspectDeploys)


def remedy(name: str, target: str) -> Action:
    """A remedy action by its name."""
    return ACTIONS_BY_NAME[name](target=target)


def suspects(obs: Observation) -> list[str]:
    """Services most likely at the origin: trace origins first, then paged internal services, then
    services paging on memory."""
    origins: Counter[str] = Counter()
    for text in obs.visible_traces.values():
        origins.update(trace_origins(text))
    facing = {c.name for c in obs.topology if c.user_facing}
    paged = [s for s in _paged(obs) if s not in facing]
    memory = [a.service for a in obs.alerts if a.signal == "memory_pct"]
    ranked = [s for s, _ in origins.most_common()] + paged + memory
    return list(dict.fromkeys(ranked))[:SUSPECTS]


def investigate(env: ServiceIncidentEnvironment, obs: Observation, reserve: int) -> Observation:
    """The fixed policy, leaving `reserve` steps for remedies and the answer."""
    kinds = {c.name: c.kind for c in obs.topology}
    budget = obs.max_steps - reserve

    def look(action: InspectLogs | InspectMetrics | InspectDeploys | InspectTraces) -> None:
        nonlocal obs
        if obs.step_count < budget and not obs.done:
            obs = env.step(action)

    for entry in entries(obs):
        look(InspectTraces(target=entry))
    ranked = suspects(obs)
    for suspect in ranked:
        if suspect not in obs.visible_logs:
            look(InspectLogs(target=suspect))
        look(InspectMetrics(target=suspect))
    for suspect in [s for s in ranked if kinds[s] not in DATASTORES][:DEPLOY_LOOKS]:
        look(InspectDeploys(target=suspect))
    return obs


# -- what it saw, as features ---------------------------------------------------------------------


def template(line: str, services: Iterable[str]) -> str:
    """A log line without its stamp, pod and process, with ids, numbers and service names masked."""
    parts = line.split(maxsplit=3)
    text = parts[3] if len(parts) > 3 else line
    for name in sorted(services, key=len, reverse=True):
        # Whole names only: "web" is a service, "webhook" is not.
        text = re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", "<svc>", text)
    # Status codes stay: a 500 and a 200 are different lines.
    masked = _HEX.sub(lambda m: m.group() if text.endswith("status=", 0, m.start()) else "#", text)
    return _DIGITS.sub(lambda m: m.group() if masked.endswith("status=", 0, m.start()) else "#", masked)


def templates(obs: Observation, service: str) -> list[str]:
    return [template(line, obs.services) for line in obs.visible_logs.get(service, "").splitlines()]


def _minutes_before(obs: Observation, page: str, stamp: str) -> float:
    return (parse_time(page) - parse_time(stamp)).total_seconds() / 60


def first_on_their_paths(obs: Observation) -> frozenset[str]:
    """The pager's rule of thumb: services paged within the hour (chronic warnings left out) below
    which nothing was paged earlier or at once, read from the topology and the pages alone."""
    onset: dict[str, float] = {}
    for alert in obs.alerts:
        before = _minutes_before(obs, obs.clock, alert.since)
        if before * 60 < STALE_ALERT_S:
            onset[alert.service] = max(onset.get(alert.service, before), before)
    depends = {card.name: card.depends_on for card in obs.topology}
    return frozenset(s for s in onset if not any(onset[d] >= onset[s] and _depends_on(depends, s, d) for d in onset))


@dataclass
class Seen:
    """The facts about one service the outsider's features are made of, with names for the ratios."""

    flags: dict[str, bool] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)


def alert_facts(obs: Observation, service: str, page: str) -> Seen:
    seen = Seen()
    alerts = [a for a in obs.alerts if a.service == service]
    for signal in _SIGNALS:
        mine = [a for a in alerts if a.signal == signal]
        seen.values[f"alert {signal}"] = float(bool(mine))
        seen.values[f"alert {signal} critical"] = float(any(a.level == "critical" for a in mine))
        seen.values[f"alert {signal} peak"] = max((a.peak for a in mine), default=0.0)
        onset = min((_minutes_before(obs, page, a.since) for a in mine), default=-60.0)
        seen.values[f"alert {signal} onset before page (min)"] = max(-60.0, min(onset, 600.0))
    seen.flags["off-minute since"] = any(not a.since.endswith(":00Z") for a in alerts)
    seen.flags["paged, every since on the minute"] = bool(alerts) and all(a.since.endswith(":00Z") for a in alerts)
    seen.flags["alert older than an hour"] = any(
        _minutes_before(obs, page, a.since) * 60 >= STALE_ALERT_S for a in alerts
    )
    return seen


def view_facts(obs: Observation, service: str) -> Seen:
    """Facts of the views the investigation took of a service."""
    seen = Seen()
    origins: Counter[str] = Counter()
    for text in obs.visible_traces.values():
        origins.update(trace_origins(text))
    seen.values["trace origins"] = origins[service]
    seen.flags["failing span with no failing child"] = origins[service] > 0
    spans = [
        line.split()[0] for text in obs.visible_traces.values() for line in text.splitlines() if line.startswith(" ")
    ]
    seen.values["in traces"] = float(spans.count(service))
    logs = obs.visible_logs.get(service)
    seen.values["logs seen"] = float(logs is not None)
    seen.values["own loud lines"] = float(len(own_trouble(logs or "")))
    seen.values["blamed by callers"] = float(_blamed(obs).count(service))
    metrics = obs.visible_metrics.get(service)
    seen.values["metrics seen"] = float(metrics is not None)
    if metrics is not None and metrics.history:
        first, last = metrics.history[0], metrics.history[-1]
        seen.values["error rate"] = metrics.error_rate
        seen.values["error rate rise"] = last.error_rate - first.error_rate
        seen.values["p99 ratio"] = last.p99_ms / max(first.p99_ms, 1.0)
        seen.values["cpu rise"] = last.cpu_pct - first.cpu_pct
        seen.values["memory rise"] = last.memory_pct - first.memory_pct
        seen.values["rps ratio"] = last.rps / max(first.rps, 1e-6)
        seen.flags[f"memory rise >= {MEMORY_RISE_POINTS:.0f} points"] = (
            last.memory_pct - first.memory_pct >= MEMORY_RISE_POINTS
        )
    deploys = obs.visible_deploys.get(service)
    seen.values["deploys seen"] = float(deploys is not None)
    if deploys:
        stamp, _, note = deploys.splitlines()[0].partition(" ")
        age = _minutes_before(obs, obs.clock, stamp)
        seen.values["last release age (min)"] = min(age, 60 * 24 * 30)
        seen.flags["non-routine release wording"] = ROUTINE_WORDING not in note and not note.startswith("rollback")
        seen.flags["release in the last 3 h"] = age <= RECENT_RELEASE_MIN
    return seen


def facts(obs: Observation, service: str, page: str) -> Seen:
    alerts, views = alert_facts(obs, service, page), view_facts(obs, service)
    return Seen({**alerts.flags, **views.flags}, {**alerts.values, **views.values})


FLAG_NAMES = (
    "off-minute since",
    "paged, every since on the minute",
    "alert older than an hour",
    "failing span with no failing child",
    f"memory rise >= {MEMORY_RISE_POINTS:.0f} points",
    "non-routine release wording",
    "release in the last 3 h",
)
# The first flags are read from the pages alone.
ALERT_FLAGS = 3
VALUE_NAMES = tuple(
    [
        *(f"alert {s}{part}" for s in _SIGNALS for part in ("", " critical", " peak", " onset before page (min)")),
        "trace origins",
        "in traces",
        "logs seen",
        "own loud lines",
        "blamed by callers",
        "metrics seen",
        "error rate",
        "error rate rise",
        "p99 ratio",
        "cpu rise",
        "memory rise",
        "rps ratio",
        "deploys seen",
        "last release age (min)",
    ]
)


def row(obs: Observation, service: str, page: str, vocabulary: Sequence[str], tier: str) -> list[float]:
    """Everything the ranker reads of one service: the pager-only features, the facts of its views, and
    how often each template of the vocabulary appears in its logs."""
    seen = facts(obs, service, page)
    counts = Counter(templates(obs, service))
    return [
        *features(obs, service),
        *(float(seen.flags.get(name, False)) for name in FLAG_NAMES),
        *(seen.values.get(name, 0.0) for name in VALUE_NAMES),
        *(float(counts[t]) for t in vocabulary),
        *(float(tier == d) for d in PRESETS),
    ]


def pager_row(obs: Observation, service: str, tier: str) -> list[float]:
    """The first observation's features of one service: bench_measure's, whether the pager's rule of
    thumb names it, and each alert's onset against the page, its level and its `since` (the page is the
    reset's clock)."""
    seen = alert_facts(obs, service, obs.clock)
    return [
        *features(obs, service),
        float(service in first_on_their_paths(obs)),
        *(float(seen.flags.get(name, False)) for name in FLAG_NAMES[:ALERT_FLAGS]),
        *(seen.values[name] for name in VALUE_NAMES[: 4 * len(_SIGNALS)]),
        *(float(tier == d) for d in PRESETS),
    ]


# -- fitting ---------------------------------------------------------------------------------------


@dataclass
class Example:
    """One played training incident: its tier, what was seen, its answers."""

    tier: str
    rows: dict[str, list[float]]
    roots: frozenset[str]
    fixes: dict[str, str]
    severity: str
    incident: list[float]


class SetRanker:
    """Gradient-boosted root probabilities per service, and per tier the threshold above which every
    service is declared (at least the top one, at most the tier's largest fault count)."""

    def __init__(self) -> None:
        self.model = _model()
        self.thresholds: dict[str, float] = {}

    def fit(self, examples: Sequence[Example]) -> SetRanker:
        cut = len(examples) * 3 // 4
        tuning, held = examples[:cut], examples[cut:]
        self._fit(tuning)
        for tier in PRESETS:
            mine = [e for e in held if e.tier == tier]
            if mine:
                self.thresholds[tier] = max(THRESHOLDS, key=lambda t: sum(self.choose(e, t) == e.roots for e in mine))
        self._fit(examples)
        return self

    def _fit(self, examples: Sequence[Example]) -> None:
        x = [r for e in examples for r in e.rows.values()]
        y = [s in e.roots for e in examples for s in e.rows]
        self.model = _model().fit(x, y)

    def probabilities(self, rows: dict[str, list[float]]) -> dict[str, float]:
        names = list(rows)
        p = self.model.predict_proba([rows[s] for s in names])[:, 1]
        return dict(zip(names, map(float, p), strict=True))

    def choose(self, example: Example, threshold: float | None = None) -> frozenset[str]:
        cut = self.thresholds.get(example.tier, 0.5) if threshold is None else threshold
        scored = sorted(self.probabilities(example.rows).items(), key=lambda item: -item[1])
        chosen = [s for s, p in scored if p >= cut][: PRESETS[example.tier].faults[1]]
        return frozenset(chosen or [scored[0][0]])


class Label:
    """A gradient-boosted classifier of one label (a fix, a severity) from a row."""

    def __init__(self, rows: list[list[float]], labels: list[str]) -> None:
        self.constant = labels[0] if len(set(labels)) == 1 else None
        self.model = None if self.constant is not None else _model().fit(rows, labels)

    def __call__(self, x: list[float]) -> str:
        if self.model is None:
            return self.constant or ""
        return str(self.model.predict([x])[0])


def incident_row(obs: Observation, tier: str) -> list[float]:
    """What the severity is read from: the pages' peaks and the worst user-facing metrics seen."""
    facing = [c.name for c in obs.topology if c.user_facing]
    seen = [obs.visible_metrics[s] for s in facing if s in obs.visible_metrics]
    peaks = {s: max((a.peak for a in obs.alerts if a.signal == s), default=0.0) for s in _SIGNALS}
    return [
        *peaks.values(),
        float(sum(a.level == "critical" for a in obs.alerts)),
        max((p.error_rate for m in seen for p in m.history), default=0.0),
        max((p.p99_ms for m in seen for p in m.history), default=0.0),
        *(float(tier == d) for d in PRESETS),
    ]


@dataclass
class Outsider:
    """The fitted script: ranker, fix and severity classifiers, and the vocabulary its rows use."""

    vocabulary: list[str]
    ranker: SetRanker
    fix: Label
    severity: Label

    def answer(self, example: Example) -> tuple[frozenset[str], dict[str, str], str]:
        roots = self.ranker.choose(example)
        return roots, {s: self.fix(example.rows[s]) for s in roots}, self.severity(example.incident)


def _reserve(tier: str) -> int:
    return PRESETS[tier].faults[1] + 1


def observe(env: ServiceIncidentEnvironment, obs: Observation, tier: str) -> tuple[Observation, str]:
    """The investigation, and the page's clock."""
    page = obs.clock
    return investigate(env, obs, _reserve(tier)), page


def example(
    obs: Observation, page: str, tier: str, vocabulary: Sequence[str], truth: dict[str, str], severity: str
) -> Example:
    return Example(
        tier=tier,
        rows={s: row(obs, s, page, vocabulary, tier) for s in obs.services},
        roots=frozenset(truth),
        fixes=truth,
        severity=severity,
        incident=incident_row(obs, tier),
    )


def fit(train: int, tiers: Sequence[str] = tuple(PRESETS)) -> Outsider:
    """Play the investigation on `train` training seeds per tier and fit the models."""
    played = []
    for seed in range(train):
        for tier in tiers:
            env = ServiceIncidentEnvironment()
            obs, page = observe(env, env.reset(task_id=f"gen_{tier}", seed=seed), tier)
            labels = dataset.labels(dataset.training_incident(tier, seed))
            truth = dict(
                zip([f.service for f in dataset.training_incident(tier, seed).faults], labels.fixes, strict=True)
            )
            played.append((obs, page, tier, truth, labels.peak_severity))
    counts: Counter[str] = Counter()
    for obs, *_ in played:
        for service in obs.visible_logs:
            counts.update(set(templates(obs, service)))
    vocabulary = [t for t, n in counts.most_common(TEMPLATE_VOCABULARY) if n >= TEMPLATE_MIN_COUNT]
    examples = [example(obs, page, tier, vocabulary, truth, sev) for obs, page, tier, truth, sev in played]
    ranker = SetRanker().fit(examples)
    fix_rows = [(e.rows[s], e.fixes[s]) for e in examples for s in e.roots]
    return Outsider(
        vocabulary,
        ranker,
        Label([r for r, _ in fix_rows], [f for _, f in fix_rows]),
        Label([e.incident for e in examples], [e.severity for e in examples]),
    )


def play(
    outsider: Outsider, env: ServiceIncidentEnvironment, obs: Observation, tier: str
) -> tuple[Observation, frozenset[str]]:
    """Investigate, fix every declared root with the predicted fix, and declare. Returns the last
    observation and the roots declared."""
    obs, page = observe(env, obs, tier)
    roots, fixes, severity = outsider.answer(example(obs, page, tier, outsider.vocabulary, {}, ""))
    ordered = sorted(roots)
    for service in ordered:
        if not obs.done and fixes[service] in obs.available_actions and obs.max_steps - obs.step_count > 1:
            obs = env.step(remedy(fixes[service], service))
    if not obs.done:
        obs = env.step(Declare(target=ordered[0], additional_targets=ordered[1:], severity=severity))
    return obs, roots
