"""The fingerprint of the world a model was fitted on: a SHA-256 over what the survey shows on a few
training incidents per tier (every observation, as JSON) and over their answers. Any change to
generation, telemetry, observations or labels moves it, and the checked-in model must be rebuilt."""

from __future__ import annotations

import hashlib

import msgspec

from ... import dataset
from ...environment import ServiceIncidentEnvironment
from .agent import next_look
from .features import TIERS

# Training seeds the fingerprint plays: few, so that checking it is quick.
FINGERPRINT_SEEDS = (0, 1, 2)
_encoder = msgspec.json.Encoder(order="deterministic")


def surveyed(tier: str, seed: int) -> list[bytes]:
    """Every observation of the survey of one training incident, encoded."""
    env = ServiceIncidentEnvironment()
    # A fixed episode id: a drawn one would move the fingerprint with nothing in the world changed.
    obs = env.reset(task_id=f"gen_{tier}", seed=seed, episode_id=f"fingerprint-{tier}-{seed}")
    seen = [_encoder.encode(obs)]
    while (look := next_look(obs, tier)) is not None and not obs.done:
        obs = env.step(look)
        seen.append(_encoder.encode(obs))
    return seen


def fingerprint() -> str:
    digest = hashlib.sha256()
    for tier in TIERS:
        for seed in FINGERPRINT_SEEDS:
            for encoded in surveyed(tier, seed):
                digest.update(encoded)
            digest.update(_encoder.encode(dataset.labels(dataset.training_incident(tier, seed))))
    return digest.hexdigest()
