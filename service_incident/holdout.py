"""Held-out incidents: generated like the open tiers', at generator seeds only the holder of a key can derive.

Incident `index` of tier `difficulty` is `generate(difficulty, seed)` with the seed drawn from
HMAC-SHA256(key, "difficulty:index") into [SEED_BASE, SEED_BASE + 2**64): above every public seed
(evaluation incidents use [0, 50), training draws [1_000_000, 1_000_000 + 2**63)), so no open
episode ever plays a held-out incident and no public seed leads to one. The same key gives the same
incidents on any machine; without it, an index names nothing that can be generated.

An episode shows an incident id derived from the key as well (a second HMAC, of another message),
so neither the id nor anything else an episode shows leads back to the generator seed.
"""

from __future__ import annotations

import hashlib
import hmac

from .generator import generate
from .incidents import Incident

# The generated tiers offered held out: the hardest, whose open incidents are most worth memorising.
TIERS: tuple[str, ...] = ("hard", "expert")
# Where the key comes from: the server setting, and the environment of an in-process run.
KEY_SETTING = "HOLDOUT_KEY"
SEED_BASE = 2**64
# A shorter key could be found from its published fingerprint by trying keys.
MIN_KEY_CHARS = 16
FINGERPRINT_CHARS = 16
_ID_CHARS = 16
_SEED_BYTES = 8


def task_id(difficulty: str) -> str:
    return f"holdout_{difficulty}"


def fingerprint(key: str) -> str:
    """What a host publishes beside its scores: names the key (`sha256sum` of it), reveals nothing of it."""
    return hashlib.sha256(key.encode()).hexdigest()[:FINGERPRINT_CHARS]


class HoldoutKey:
    """A host's secret key and the held-out incidents it derives. Its repr never shows the key."""

    __slots__ = ("_key", "fingerprint")

    def __init__(self, key: str) -> None:
        if len(key) < MIN_KEY_CHARS:
            raise ValueError(f"a holdout key needs at least {MIN_KEY_CHARS} characters, got {len(key)}")
        self._key = key.encode()
        self.fingerprint = fingerprint(key)

    def __repr__(self) -> str:
        return f"HoldoutKey(fingerprint={self.fingerprint!r})"

    def _mac(self, message: str) -> bytes:
        return hmac.new(self._key, message.encode(), hashlib.sha256).digest()

    def generator_seed(self, difficulty: str, index: int) -> int:
        return SEED_BASE + int.from_bytes(self._mac(f"{difficulty}:{index}")[:_SEED_BYTES], "big")

    def incident_id(self, difficulty: str, index: int) -> str:
        return f"{task_id(difficulty)}-{self._mac(f'incident-id:{difficulty}:{index}').hex()[:_ID_CHARS]}"

    def incident(self, difficulty: str, index: int) -> Incident:
        incident_id = self.incident_id(difficulty, index)
        try:
            return generate(difficulty, self.generator_seed(difficulty, index), incident_id)
        except ValueError:
            # The generator's message names the seed, which must not reach the episode.
            raise ValueError(f"no recoverable incident for {incident_id}") from None
