"""The fitted agent's model: its forests, the template vocabulary its rows count, the thresholds per
tier, and the fingerprint of the world it was fitted on. It is a JSON file in this package, loaded
with the standard library alone."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from .forest import Forest

MODEL_FILE = "model.json"


@dataclass(frozen=True)
class Model:
    """Root ranker, fix and severity classifiers, and what they were fitted on."""

    vocabulary: list[str]
    root: Forest
    fix: Forest
    severity: Forest
    # The probability above which a service is declared a root, and at most how many are, per tier.
    thresholds: dict[str, float]
    max_roots: dict[str, int]
    # The world fingerprint (see `world.fingerprint`) and the training seeds per tier.
    world: str
    seeds: int

    def to_json(self) -> dict[str, Any]:
        return {
            "world": self.world,
            "seeds": self.seeds,
            "thresholds": self.thresholds,
            "max_roots": self.max_roots,
            "vocabulary": self.vocabulary,
            "root": self.root.to_json(),
            "fix": self.fix.to_json(),
            "severity": self.severity.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Model:
        return cls(
            vocabulary=list(data["vocabulary"]),
            root=Forest.from_json(data["root"]),
            fix=Forest.from_json(data["fix"]),
            severity=Forest.from_json(data["severity"]),
            thresholds={k: float(v) for k, v in data["thresholds"].items()},
            max_roots={k: int(v) for k, v in data["max_roots"].items()},
            world=str(data["world"]),
            seeds=int(data["seeds"]),
        )


def model_path() -> Path:
    return Path(str(resources.files(__package__).joinpath(MODEL_FILE)))


@cache
def load() -> Model:
    """The checked-in model."""
    return Model.from_json(json.loads(model_path().read_text()))


def save(model: Model, path: Path | None = None) -> Path:
    target = path or model_path()
    target.write_text(json.dumps(model.to_json(), separators=(",", ":")) + "\n")
    return target
