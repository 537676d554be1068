"""What the held-out tests share: the test keys, and what no reply of a held-out episode may name."""

from __future__ import annotations

from service_incident import holdout
from service_incident.faults import FAULTS
from service_incident.holdout import HoldoutKey

KEY = "a held-out key for these tests only"
OTHER_KEY = "another held-out key, not the first"
# Names only the postmortem uses; the fault types and the rubric's wording are checked as well.
POSTMORTEM_WORDS = ("root_causes", "severity_basis", "declared_severity", "red_herrings", "Rubric:")


def generator_seeds(key: str) -> set[str]:
    """Every generator seed a run of these tests plays, as text."""
    return {str(HoldoutKey(key).generator_seed(tier, index)) for tier in holdout.TIERS for index in range(60)}


def leaks(texts: list[str]) -> list[str]:
    """What of a held-out incident's seed or answers the texts name."""
    seeds = generator_seeds(KEY)
    found = []
    for text in texts:
        found += [f"seed {s}" for s in seeds if s in text]
        found += [f"fault {name}" for name in FAULTS if name in text]
        found += [f"postmortem {word}" for word in POSTMORTEM_WORDS if word in text]
        found += ["the key"] if KEY in text else []
    return found
