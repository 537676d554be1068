"""The frozen evaluation set of generated incidents: records with their labels, as JSON Lines.

`python data.py build` writes it from the generator; the generated tasks play it from the file, so
a change to the generator cannot silently change what a published score means.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources

import msgspec
from msgspec import Struct

from .faults import FAULTS
from .generator import PRESETS, generate
from .incidents import Distraction, Incident, validate
from .models import Severity
from .world import World

EVAL_FILE = "generated_eval.jsonl"
# Per difficulty: a hundred keep a tier's 95% interval near ±0.035, enough to tell the rungs apart.
EVAL_INCIDENTS = 100
# Evaluation incidents use generator seeds [0, EVAL_INCIDENTS); training draws start here, far above.
TRAIN_SEED_BASE = 1_000_000


class Labels(Struct, frozen=True):
    """The answers, for graders and analysis; never shown to an agent."""

    root_causes: list[str]
    fault_types: list[str]
    fixes: list[str]
    severity_at_page: Severity
    peak_severity: Severity
    red_herrings: list[Distraction]


class Record(Struct, frozen=True):
    id: str
    task: str
    difficulty: str
    seed: int
    incident: Incident
    labels: Labels


def eval_id(difficulty: str, index: int) -> str:
    return f"gen_{difficulty}-{index:04d}"


def labels(incident: Incident) -> Labels:
    world = World(incident)
    world.step = max([0, *(f.intensify_at or 0 for f in incident.faults)])
    return Labels(
        root_causes=sorted(world.root_causes),
        fault_types=[f.type for f in incident.faults],
        fixes=[FAULTS[f.type].fix for f in incident.faults],
        severity_at_page=World(incident).severity(),
        peak_severity=world.severity(),
        red_herrings=list(incident.distractions),
    )


def build() -> list[Record]:
    records = []
    for difficulty in PRESETS:
        for index in range(EVAL_INCIDENTS):
            incident = generate(difficulty, index, eval_id(difficulty, index))
            record_id = eval_id(difficulty, index)
            records.append(Record(record_id, f"gen_{difficulty}", difficulty, index, incident, labels(incident)))
    return records


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Record)


def encode(records: list[Record]) -> bytes:
    return b"".join(_encoder.encode(record) + b"\n" for record in records)


def decode(raw: bytes) -> list[Record]:
    return [_decoder.decode(line) for line in raw.splitlines() if line.strip()]


@cache
def frozen() -> dict[str, Incident]:
    """The checked-in evaluation incidents by id, validated."""
    raw = resources.files(__package__).joinpath("incidents", EVAL_FILE).read_bytes()
    return {record.id: validate(record.incident) for record in decode(raw)}


def eval_ids(difficulty: str) -> tuple[str, ...]:
    return tuple(eval_id(difficulty, index) for index in range(EVAL_INCIDENTS))


def training_id(difficulty: str, seed: int) -> str:
    """A training incident's id: stable for its seed, but not the seed itself, which with the public
    generator is the incident's labels: the id travels in every observation and result file."""
    return f"gen_{difficulty}-train-{hashlib.sha256(f'train:{difficulty}:{seed}'.encode()).hexdigest()[:16]}"


def training_incident(difficulty: str, seed: int) -> Incident:
    return generate(difficulty, TRAIN_SEED_BASE + seed, training_id(difficulty, seed))
