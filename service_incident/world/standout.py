"""Whether a root's own signal stands out: its excursion over the history before the page, in one of its
golden signals, clears the largest everyday excursion any other service shows in that signal (its
everyday movement, its red herrings), both measured in units of the service's own baseline spread.

Metrics' measurement noise is a few percent of a value: the spread counts it, so a service whose
states wobble little is not credited with more than an engineer reading its dashboard could see.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import attrgetter

from msgspec import structs

from ..incidents import Incident
from .course import HISTORY_MINUTES
from .episode import World
from .simulation import ServiceState, calm_states

# The early history, before a fault or herring shows, that an excursion is measured against.
BASELINE_MINUTES = 4
# The measurement noise of a metric, as a share of its value (telemetry's).
MEASUREMENT_NOISE = 0.03
# Each golden signal: the state's field it reads, and the floor under its baseline's spread (absolute,
# or for p99 a share of it).
SIGNALS: dict[str, tuple[str, float, bool]] = {
    "error rate": ("error_rate", 0.002, False),
    "p99": ("p99_ms", 0.02, True),
    "cpu": ("cpu_pct", 0.5, False),
    "memory": ("memory_pct", 0.5, False),
}
# Every signal of a state at once, in SIGNALS' order: one call per state rather than one per signal.
_READ = attrgetter(*(field for field, _, _ in SIGNALS.values()))
# A margin of this many baseline spreads is one an engineer would not put down to noise.
CLEAR_MARGIN = 3.0


def excursion(values: Sequence[float], floor: float, relative: bool) -> float:
    """The largest rise after the baseline, in baseline spreads (noise and `floor` included)."""
    base, rest = values[:BASELINE_MINUTES], values[BASELINE_MINUTES:]
    mean = sum(base) / len(base)
    deviation = math.sqrt(sum((value - mean) ** 2 for value in base) / len(base))
    spread = max(deviation, floor * mean if relative else floor) + MEASUREMENT_NOISE * mean
    return (max(rest) - mean) / spread


def excursions(history: Sequence[ServiceState]) -> dict[str, float]:
    """A service's excursion in each golden signal over its states in the history up to the page."""
    columns = zip(*map(_READ, history), strict=True)
    signals = zip(SIGNALS.items(), columns, strict=True)
    return {name: excursion(values, floor, relative) for (name, (_, floor, relative)), values in signals}


def history_states(world: World) -> list[dict[str, ServiceState]]:
    """Every service's states over the history up to the page."""
    return [world.states_at(minute) for minute in _calm_history(world)]


def _calm_history(world: World) -> range:
    """The minutes of the history up to the page, the calm world's states at each simulated first (once
    per plan): every world of the plan then simulates only the services something touches."""
    minutes = range(-HISTORY_MINUTES, 1)
    for minute in minutes:
        calm_states(world.plan, minute)
    return minutes


class Everyday:
    """An incident's world without its faults, whose excursions the roots' must clear: the same for every
    fault strength the generator tries on one draft, so simulated once for all of them."""

    def __init__(self, incident: Incident) -> None:
        self.world = World(structs.replace(incident, faults=[]), shared=False)
        self._history: list[dict[str, ServiceState]] | None = None
        self._worst: dict[tuple[tuple[str, ...], str], float] = {}

    def worst(self, roots: tuple[str, ...]) -> dict[str, float]:
        """The largest excursion in each signal of the services other than `roots`."""
        return {signal: self.worst_in(roots, signal) for signal in SIGNALS}

    def history(self) -> list[dict[str, ServiceState]]:
        """Every service's states over the history up to the page, simulated once."""
        if self._history is None:
            self._history = history_states(self.world)
        return self._history

    def worst_in(self, roots: tuple[str, ...], signal: str) -> float:
        """The largest excursion in one signal of the services other than `roots`: a root is most often
        judged on one signal, so the others' are worked out only when asked."""
        found = self._worst.get((roots, signal))
        if found is None:
            history = self.history()
            field, floor, relative = SIGNALS[signal]
            others = [s.name for s in self.world.incident.services if s.name not in roots]
            found = self._worst[(roots, signal)] = max(
                (excursion([getattr(states[name], field) for states in history], floor, relative) for name in others),
                default=0.0,
            )
        return found


def _own_excursions(incident: Incident, everyday: Everyday, roots: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Each root's excursions, in the incident's world over the history up to the page."""
    # The history before the faults build up is the everyday world's: simulated there once for every
    # strength tried (`worst_in` reads it too), and not again here.
    everyday.history()
    sick = World(incident, faultless=everyday.world, shared=False)
    # Only the roots' excursions are read here: their callers' states are not simulated for them.
    reach = sick.plan.reach(set(roots))
    history = [sick.states_of(minute, reach) for minute in _calm_history(sick)]
    return {root: excursions([states[root] for states in history]) for root in roots}


def _roots(incident: Incident) -> tuple[str, ...]:
    return tuple(sorted({f.service for f in incident.faults}))


def margins(incident: Incident, everyday: Everyday | None = None) -> dict[str, dict[str, float]]:
    """Per root, per signal: its own excursion less the largest everyday excursion of the other services
    in the same incident without faults (`everyday`, if the caller has it)."""
    roots = _roots(incident)
    everyday = everyday or Everyday(incident)
    worst = everyday.worst(roots)
    own = _own_excursions(incident, everyday, roots)
    return {root: {name: value - worst[name] for name, value in own[root].items()} for root in roots}


def stands_out(incident: Incident, everyday: Everyday | None = None) -> bool:
    """Whether every root clears the everyday excursions around it in at least one signal: `margins`'
    answer, with a root's signals tried from its largest own excursion down, so that the others'
    excursions are worked out for the signals that decide alone."""
    roots = _roots(incident)
    everyday = everyday or Everyday(incident)
    own = _own_excursions(incident, everyday, roots)
    for root in roots:
        signals = sorted(own[root].items(), key=lambda item: -item[1])
        if not any(value - everyday.worst_in(roots, name) >= CLEAR_MARGIN for name, value in signals):
            return False
    return True
