"""What one episode's telemetry keeps between looks: every cache has this one owner, created with the
episode's `Telemetry` and handed to each view.

Renderings that follow the world's states at a step (readings, alert histories, pages, metric
points) are kept by step until a remedy changes the states from its step on: `follow` forgets
them then, as the world forgets its states. Everything else is keyed by all it depends on and kept
for the episode; what follows from the incident alone (any seed, no remedy applied yet) is kept once
per incident, in its `Shared`, for every episode of it."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from ..incidents import Incident
from ..models import Alert, MetricPoint
from ..world import World
from ..world.steps import incident_store

if TYPE_CHECKING:
    from .logs import LogGroup
    from .look import Look, Scope, View
    from .metrics import BreakdownShape
    from .pages import AlertHistory, Readings, Watched
    from .pods import Crash, Pod, PodsKey, SteadyKey


@dataclass(slots=True)
class Shared:
    """What the telemetry of an incident renders the same in every episode of it: from the incident
    alone, whatever the seed, before any remedy."""

    pages: dict[int, list[Alert]] = field(default_factory=dict)  # by step, of steps no remedy reached
    pods: dict[PodsKey, list[Pod]] = field(default_factory=dict)  # of steps no remedy reached (pods.pods)
    steady_pods: dict[SteadyKey, Pod] = field(default_factory=dict)  # pods before a crash (pods._steady_pod)
    releases: dict[tuple[str, str], datetime] = field(default_factory=dict)  # by service and release
    breakdowns: dict[str, BreakdownShape] = field(default_factory=dict)  # by service
    minutes: dict[int, str] = field(default_factory=dict)  # "HH:MM" of each minute a metric point is stamped with
    # Of logs views, by service and step: groups of lines (evidence, side work) and what lines name.
    evidence: dict[tuple[str, int], list[LogGroup]] = field(default_factory=dict)
    side_work: dict[tuple[str, int], list[LogGroup]] = field(default_factory=dict)
    contexts: dict[tuple[str, int], dict[str, str]] = field(default_factory=dict)
    # Per service, the alert rules that watch it (pages._watch): built once the pages are first rendered.
    watch: tuple[tuple[str, tuple[Watched, ...]], ...] | None = None


# Every incident's `Shared`, by its encoding: as many incidents as the world keeps states of, the
# oldest dropped first.
_SHARED: OrderedDict[bytes, Shared] = OrderedDict()


def shared(incident: Incident) -> Shared:
    """What every episode of an incident shares of its telemetry, new and empty for an incident not seen."""
    return incident_store(_SHARED, msgspec.json.encode(incident), Shared)


def portable(incident: Incident) -> Shared:
    """What every episode of an incident shares so far, as it goes to another process (`keep_shared`):
    without the rules that watch its services, which hold functions and are built again on first use."""
    return replace(shared(incident), watch=None)


def keep_shared(incident: Incident, rendered: Shared) -> None:
    """Keep what another process rendered of an incident for every episode of it (`portable`), unless
    this process keeps its own already: the incident is the same, so what either rendered is the same."""
    incident_store(_SHARED, msgspec.json.encode(incident), lambda: rendered)


@dataclass(slots=True)
class TelemetryState:
    """One episode's world and seed, and what its telemetry has rendered of them."""

    world: World
    seed: int
    facing: frozenset[str]  # the user-facing services, listed first on the pager
    shared: Shared  # the incident's, shared with every episode of it
    # Followed states, by step (points by service and minute): forgotten from a remedy's step on.
    readings: dict[int, Readings] = field(default_factory=dict)
    histories: dict[int, AlertHistory] = field(default_factory=dict)
    pages: dict[int, tuple[Readings, list[Alert]]] = field(default_factory=dict)
    points: dict[tuple[str, int], MetricPoint] = field(default_factory=dict)
    # Pages rendered before a remedy outdated them: the next step shows them again while its readings
    # and alert history match theirs (pages.alerts).
    outdated_pages: dict[int, tuple[Readings, list[Alert]]] = field(default_factory=dict)
    remedies: int = 0  # how many of the world's remedies the renderings follow
    # Kept for the episode, keyed by everything they depend on.
    pods: dict[PodsKey, list[Pod]] = field(default_factory=dict)
    crashes: dict[str, Crash | None] = field(default_factory=dict)
    since: dict[tuple[str, str, int], str] = field(default_factory=dict)
    rendered: dict[tuple[str, str, int, bool, float, float], Alert] = field(default_factory=dict)
    seen: dict[tuple[View, str, Scope], tuple[object, Look]] = field(default_factory=dict)
    # Built on first use: an episode whose pages another episode rendered never needs them.
    stale_alerts: list[Alert] | None = None

    def follow(self) -> None:
        """Forget the renderings of the states each remedy applied since the last call changed."""
        history = self.world.history
        if len(history) == self.remedies:
            return
        for remediation in history[self.remedies :]:
            self._forget_from(remediation.step)
        self.remedies = len(history)

    def _forget_from(self, step: int) -> None:
        for at in [at for at in self.readings if at >= step]:
            del self.readings[at]
        for at in [at for at in self.histories if at >= step]:
            del self.histories[at]
        for at in [at for at in self.pages if at >= step]:
            self.outdated_pages[at] = self.pages.pop(at)
        for key in [key for key in self.points if key[1] >= step]:
            del self.points[key]
