"""Whether a root's own signal stands out: its excursion over the history before the page, in one of its
golden signals, clears the largest everyday excursion any other service shows in that signal (its
everyday movement, its red herrings), both measured in units of the service's own baseline spread.

Metrics' measurement noise is a few percent of a value: the spread counts it, so a service whose
states wobble little is not credited with more than an engineer reading its dashboard could see.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache

import msgspec
from msgspec import structs

from ..incidents import Incident
from .course import HISTORY_MINUTES
from .episode import World
from .simulation import ServiceState, calm_states

# The early history, before a fault or herring shows, that an excursion is measured against.
BASELINE_MINUTES = 4
# The measurement noise of a metric, as a share of its value (telemetry's).
MEASUREMENT_NOISE = 0.03
# Each golden signal, and the floor under its baseline's spread (absolute, or for p99 a share of it).
SIGNALS: dict[str, tuple[Callable[[ServiceState], float], float, bool]] = {
    "error rate": (lambda s: s.error_rate, 0.002, False),
    "p99": (lambda s: s.p99_ms, 0.02, True),
    "cpu": (lambda s: s.cpu_pct, 0.5, False),
    "memory": (lambda s: s.memory_pct, 0.5, False),
}
# A margin of this many baseline spreads is one an engineer would not put down to noise.
CLEAR_MARGIN = 3.0


def excursion(values: Sequence[float], floor: float, relative: bool) -> float:
    """The largest rise after the baseline, in baseline spreads (noise and `floor` included)."""
    base, rest = values[:BASELINE_MINUTES], values[BASELINE_MINUTES:]
    mean = sum(base) / len(base)
    deviation = math.sqrt(sum((value - mean) ** 2 for value in base) / len(base))
    spread = max(deviation, floor * mean if relative else floor) + MEASUREMENT_NOISE * mean
    return (max(rest) - mean) / spread


def excursions(world: World, service: str) -> dict[str, float]:
    """A service's excursion in each golden signal over the history up to the page."""
    history = [states[service] for states in history_states(world)]
    return {name: excursion([value(s) for s in history], floor, rel) for name, (value, floor, rel) in SIGNALS.items()}


def history_states(world: World) -> list[dict[str, ServiceState]]:
    """Every service's states over the history up to the page. The calm world's come first, once per
    plan: every world of the plan then simulates only the services something touches."""
    minutes = range(-HISTORY_MINUTES, 1)
    for minute in minutes:
        calm_states(world.plan, minute)
    return [world.states_at(minute) for minute in minutes]


def margins(incident: Incident) -> dict[str, dict[str, float]]:
    """Per root, per signal: its own excursion less the largest everyday excursion of the other services
    in the same incident without faults."""
    roots = tuple(sorted({f.service for f in incident.faults}))
    worst = _everyday(msgspec.json.encode(structs.replace(incident, faults=[])), roots)
    sick = World(incident)
    return {root: {name: own - worst[name] for name, own in excursions(sick, root).items()} for root in roots}


# The generator tries several fault strengths on one draft of herrings: their everyday world is the same.
@lru_cache(maxsize=64)
def _everyday(calm: bytes, roots: tuple[str, ...]) -> dict[str, float]:
    """The largest excursion in each signal of the services other than `roots`, in a world without faults."""
    incident = msgspec.json.decode(calm, type=Incident)
    world = World(incident, shared=False)
    others = [excursions(world, s.name) for s in incident.services if s.name not in roots]
    return {name: max((o[name] for o in others), default=0.0) for name in SIGNALS}


def stands_out(incident: Incident) -> bool:
    """Whether every root clears the everyday excursions around it in at least one signal."""
    return all(max(signals.values()) >= CLEAR_MARGIN for signals in margins(incident).values())
