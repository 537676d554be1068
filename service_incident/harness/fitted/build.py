"""Fits the fitted agent's model on training seeds and writes it to the package's JSON file.

Each training incident is played with the agent's own survey; at its end every service becomes a
row (`features.service_rows`) labelled with the incident's published answers (`dataset.labels`, what
a training episode's postmortem shows): whether it is a root and, for a root, its fix; the incident
becomes a row labelled with its peak severity. Gradient-boosted trees (scikit-learn, the `bench`
extra) are fitted to them and exported as plain data for `forest.Forest`. Per tier, the probability
above which services are declared roots is tuned on the last quarter of the seeds.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ... import dataset
from ...environment import ServiceIncidentEnvironment
from ...generator import PRESETS
from ...models import Observation
from .agent import next_look
from .features import TIERS, incident_row, service_rows, view_templates
from .forest import Forest, Tree
from .model import Model
from .world import fingerprint

SEEDS = 400
# A template enters the vocabulary once it shows on this many surveyed services in training.
TEMPLATE_MIN_COUNT = 8
TEMPLATE_VOCABULARY = 400
THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(2, 19))
# The shapes of the forests: enough for the ranker, small for the classifiers (the file stays small).
SHAPES = {"root": (200, 15), "fix": (60, 8), "severity": (60, 8)}


@dataclass
class Played:
    """One training incident surveyed: its tier, last observation and answers, and its rows once the
    vocabulary is chosen."""

    tier: str
    obs: Observation
    fixes: dict[str, str]
    severity: str
    rows: dict[str, list[float]] = field(default_factory=dict)


def play(tier: str, seed: int) -> Played:
    env = ServiceIncidentEnvironment()
    obs = env.reset(task_id=f"gen_{tier}", seed=seed)
    while (look := next_look(obs, tier)) is not None and not obs.done:
        obs = env.step(look)
    incident = dataset.training_incident(tier, seed)
    labels = dataset.labels(incident)
    fixes = dict(zip([f.service for f in incident.faults], labels.fixes, strict=True))
    return Played(tier, obs, fixes, labels.peak_severity)


def _sklearn(rows: Sequence[Sequence[float]], labels: Sequence[str], shape: tuple[int, int]) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits

    rounds, leaves = shape
    # No early stopping: its validation split is a random draw, and the build is deterministic. One
    # thread: OpenMP's spinning threads make a fit many times slower on a busy machine.
    with threadpool_limits(limits=1):
        return HistGradientBoostingClassifier(
            max_iter=rounds, max_leaf_nodes=leaves, learning_rate=0.1, early_stopping=False, random_state=0
        ).fit(rows, labels)


def _fit(rows: Sequence[Sequence[float]], labels: Sequence[str], shape: tuple[int, int]) -> Forest:
    """A gradient-boosted classifier fitted with scikit-learn and exported as plain trees, checked
    against scikit-learn's own probabilities."""
    if len(set(labels)) == 1:
        return Forest([labels[0]], [0.0], [])
    model = _sklearn(rows, labels, shape)
    forest = Forest(
        [str(c) for c in model.classes_],
        [float(b) for b in model._baseline_prediction.ravel()],
        [[_tree(p.nodes) for p in trees] for trees in model._predictors],
    )
    sample = list(rows[:: max(1, len(rows) // 200)])
    for row, want in zip(sample, model.predict_proba(sample), strict=True):
        got = forest.probabilities(row)
        assert all(abs(got[c] - float(w)) < 1e-6 for c, w in zip(forest.classes, want, strict=True)), "export"
    return forest


def _tree(nodes: Any) -> Tree:
    return {
        "feature": [-1 if n["is_leaf"] else int(n["feature_idx"]) for n in nodes],
        "threshold": [0.0 if n["is_leaf"] else float(n["num_threshold"]) for n in nodes],
        "left": [int(n["left"]) for n in nodes],
        "right": [int(n["right"]) for n in nodes],
        "value": [float(n["value"]) if n["is_leaf"] else 0.0 for n in nodes],
    }


def vocabulary(played: Sequence[Played]) -> list[str]:
    counts: Counter[str] = Counter()
    for p in played:
        for service in p.obs.services:
            counts.update(set(view_templates(p.obs, service)))
    return [t for t, n in counts.most_common(TEMPLATE_VOCABULARY) if n >= TEMPLATE_MIN_COUNT]


def _root_data(played: Sequence[Played]) -> tuple[list[list[float]], list[str]]:
    rows = [row for p in played for row in p.rows.values()]
    return rows, [str(s in p.fixes) for p in played for s in p.rows]


def thresholds(played: Sequence[Played]) -> dict[str, float]:
    """Per tier, the cut that gets the most root sets exactly right on the last quarter of the seeds,
    with the ranker fitted on the rest."""
    cut = len(played) * 3 // 4
    model = _sklearn(*_root_data(played[:cut]), SHAPES["root"])
    found = {}
    for tier in TIERS:
        held = [p for p in played[cut:] if p.tier == tier]
        most = PRESETS[tier].faults[1]
        scored = []
        for p in held:
            chances = model.predict_proba(list(p.rows.values()))[:, 1]
            ranked = sorted(zip(p.rows, map(float, chances), strict=True), key=lambda item: -item[1])
            scored.append((p, ranked))

        def right(t: float, scored: list[tuple[Played, list[tuple[str, float]]]] = scored, most: int = most) -> int:
            return sum(
                frozenset([s for s, c in ranked if c >= t][:most] or [ranked[0][0]]) == set(p.fixes)
                for p, ranked in scored
            )

        found[tier] = max(THRESHOLDS, key=right)
    return found


def build(seeds: int = SEEDS, progress: Callable[[str], None] = print) -> Model:
    started = time.monotonic()
    played = [play(tier, seed) for seed in range(seeds) for tier in TIERS]
    progress(f"played {len(played)} training incidents in {time.monotonic() - started:.0f} s")
    words = vocabulary(played)
    for p in played:
        p.rows = service_rows(p.obs, p.tier, words)
    cuts = thresholds(played)
    progress(f"thresholds {cuts} ({time.monotonic() - started:.0f} s)")
    root = _fit(*_root_data(played), SHAPES["root"])
    fix_rows = [(p.rows[s], f) for p in played for s, f in p.fixes.items()]
    fix = _fit([r for r, _ in fix_rows], [f for _, f in fix_rows], SHAPES["fix"])
    severity = _fit([incident_row(p.obs, p.tier) for p in played], [p.severity for p in played], SHAPES["severity"])
    progress(f"fitted in {time.monotonic() - started:.0f} s")
    return Model(
        vocabulary=words,
        root=root,
        fix=fix,
        severity=severity,
        thresholds=cuts,
        max_roots={tier: PRESETS[tier].faults[1] for tier in TIERS},
        world=fingerprint(),
        seeds=seeds,
    )
