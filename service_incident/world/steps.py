"""Simulated states by step, and the store that every episode of one incident shares.

Until the first remedy a world is its incident's alone, so the states of those steps are kept once
per incident, for every episode that plays it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

import msgspec

from ..incidents import Incident
from .simulation import ServiceState

States = dict[str, ServiceState]

_PREPAGE: OrderedDict[bytes, dict[int, States]] = OrderedDict()
# Incidents whose untouched steps are kept (states here, pages in telemetry), the oldest dropped first.
INCIDENTS_KEPT = 256

Kept = TypeVar("Kept")


def incident_store(stores: OrderedDict[bytes, Kept], key: bytes, new: Callable[[], Kept]) -> Kept:
    """The store of the incident encoded as `key`, `new()` if it had none; past INCIDENTS_KEPT incidents
    the oldest one's is dropped. Ordered: a plain dict's first key is found past every slot its dropped
    keys left, and the generator's candidates come and go by the hundred."""
    found = stores.get(key)
    if found is None:
        if len(stores) >= INCIDENTS_KEPT:
            stores.popitem(last=False)
        found = stores[key] = new()
    return found


class Steps(dict[int, States]):
    """Simulated states by step. Until the first remedy the world is the incident's alone, so those
    steps go to a store shared by every episode of the incident; later ones are this episode's."""

    def __init__(self, shared: dict[int, States], key: bytes) -> None:
        super().__init__()
        self.shared = shared
        self.key = key
        self.touched: int | None = None  # the step of the first remedy

    def owns(self, step: int) -> bool:
        """Whether a step's states are this episode's own: at or after its first remedy."""
        return self.touched is not None and step >= self.touched

    def get(self, step: int, default: None = None) -> States | None:  # type: ignore[override]
        # `owns` spelled out: every look at a step's states comes here.
        touched = self.touched
        return super().get(step) if touched is not None and step >= touched else self.shared.get(step)

    def __setitem__(self, step: int, states: States) -> None:
        if self.owns(step):
            super().__setitem__(step, states)
        else:
            self.shared[step] = states

    def forget_from(self, step: int) -> None:
        if self.touched is None:
            self.touched = step
        for later in [s for s in self if s >= step]:
            del self[later]


def incident_steps(incident: Incident) -> Steps:
    """States by step for an episode of the incident, its untouched steps in the incident's shared store."""
    key = msgspec.json.encode(incident)
    shared = incident_store(_PREPAGE, key, dict)
    return Steps(shared, key)


def untouched_steps(incident: Incident) -> dict[int, States]:
    """The states of the incident's steps no remedy reached, as simulated so far: what its episodes
    share (`incident_steps`), for another process to keep (`keep_untouched_steps`)."""
    return incident_store(_PREPAGE, msgspec.json.encode(incident), dict)


def keep_untouched_steps(incident: Incident, states: dict[int, States]) -> None:
    """Keep the states of the incident's untouched steps that another process simulated, unless this
    process keeps its own: the world is deterministic, so they are the ones it would simulate."""
    incident_store(_PREPAGE, msgspec.json.encode(incident), lambda: states)


def own_steps() -> Steps:
    """States by step for a world no episode plays (a calm world, a fault alone): shared with none."""
    return Steps({}, b"")
