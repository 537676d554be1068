"""Gradient-boosted trees as plain data, evaluated in pure Python: the fitted agent plays without
scikit-learn, which only the build needs.

A tree is a dict of parallel lists: `feature` (-1 at a leaf), `threshold` (a row goes left when its
value is at most the threshold), `left`, `right` and `value` (a leaf's raw score). A model is a
baseline per class and, per boosting round, one tree per class (one in all for two classes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Tree = dict[str, list[Any]]


def leaf(tree: Tree, row: Sequence[float]) -> float:
    """The raw score of the leaf a row falls into."""
    feature, threshold, left, right = tree["feature"], tree["threshold"], tree["left"], tree["right"]
    node = 0
    while feature[node] >= 0:
        node = left[node] if row[feature[node]] <= threshold[node] else right[node]
    return float(tree["value"][node])


@dataclass(frozen=True)
class Forest:
    """A gradient-boosted classifier: its classes, baseline raw scores and rounds of trees."""

    classes: list[str]
    baseline: list[float]
    rounds: list[list[Tree]]

    def raw(self, row: Sequence[float]) -> list[float]:
        scores = list(self.baseline)
        for trees in self.rounds:
            for k, tree in enumerate(trees):
                scores[k] += leaf(tree, row)
        return scores

    def probabilities(self, row: Sequence[float]) -> dict[str, float]:
        """Each class's probability (a logistic for two classes, a softmax for more)."""
        scores = self.raw(row)
        if len(self.classes) == 2:
            p = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, scores[0]))))
            return {self.classes[0]: 1.0 - p, self.classes[1]: p}
        top = max(scores)
        weights = [math.exp(s - top) for s in scores]
        total = sum(weights)
        return {c: w / total for c, w in zip(self.classes, weights, strict=True)}

    def predict(self, row: Sequence[float]) -> str:
        found = self.probabilities(row)
        return max(self.classes, key=lambda c: found[c])

    def to_json(self) -> dict[str, Any]:
        return {"classes": self.classes, "baseline": self.baseline, "rounds": self.rounds}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Forest:
        return cls(list(data["classes"]), [float(b) for b in data["baseline"]], data["rounds"])
