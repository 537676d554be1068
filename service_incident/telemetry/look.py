"""The one entry point to an episode's telemetry: `Telemetry` renders each view of a service and
decides, once, whether it changed since the agent last looked at it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..models import Alert, Metrics
from ..world import World
from . import datastore, deploys, health, logs, metrics, pages, pods, traces
from .pods import Pod
from .state import TelemetryState

View = Literal["logs", "metrics", "health", "deploys", "db", "traces"]


@dataclass(frozen=True, slots=True)
class Look:
    """What one inspection showed, and whether any of it is new since the last look at that view."""

    view: View
    service: str
    text: str
    metrics: Metrics | None
    changed: bool


# The views rendered as text alone: metrics are rendered as values too.
_RENDER: dict[str, Callable[[TelemetryState, str, int], str]] = {
    "logs": logs.logs,
    "health": health.health,
    "deploys": lambda state, service, step: deploys.deploys(state.world, service, step),
    "db": datastore.db_query,
    "traces": traces.traces,
}


class Telemetry:
    """Renders what the agent can observe of one world, for one episode seed."""

    def __init__(self, world: World, seed: int) -> None:
        self.world = world
        facing = frozenset(spec.name for spec in world.incident.services if spec.user_facing)
        self.state = TelemetryState(world, seed, facing, pages.shared_pages(world.incident))

    def look(self, view: View, service: str, step: int, endpoint: str | None = None, errors_only: bool = False) -> Look:
        """Render one view of one service now, its breakdown filtered to one endpoint or to the failing
        rows if asked; a view whose inputs (and filter) did not move since the last look at it is returned
        as it was, marked unchanged."""
        state = self.state
        epoch = (self._epoch(view, service, step), endpoint, errors_only)
        previous = state.seen.get((view, service))
        if previous is not None and previous[0] == epoch:
            old = previous[1]
            return Look(view, service, old.text, old.metrics, changed=False)
        shown = metrics.filtered(self.metrics(service, step), endpoint, errors_only) if view == "metrics" else None
        text = _RENDER[view](state, service, step) if shown is None else metrics.metrics_text(shown)
        look = Look(view, service, text, shown, changed=True)
        state.seen[(view, service)] = (epoch, look)
        return look

    def _epoch(self, view: View, service: str, step: int) -> object:
        """What a view is rendered from besides the clock: faults' strengths and demand, and the remedies applied."""
        world = self.world
        at = self.lagged(step) if view == "metrics" else step
        return world.strengths(at), world.demands(at), len(world.history), tuple(world.restarts(service, at))

    def logs(self, service: str, step: int) -> str:
        return logs.logs(self.state, service, step)

    def metrics(self, service: str, step: int) -> Metrics:
        return metrics.metrics(self.state, service, step)

    def health(self, service: str, step: int) -> str:
        return health.health(self.state, service, step)

    def deploys(self, service: str, step: int) -> str:
        return deploys.deploys(self.world, service, step)

    def db_query(self, service: str, step: int) -> str:
        return datastore.db_query(self.state, service, step)

    def traces(self, service: str, step: int) -> str:
        return traces.traces(self.state, service, step)

    def pods(self, service: str, step: int) -> list[Pod]:
        return pods.pods(self.state, service, step)

    def alerts(self, step: int) -> list[Alert]:
        return pages.alerts(self.state, step)

    def dashboard(self, step: int) -> dict[str, str]:
        return metrics.dashboard(self.state, step)

    def lagged(self, step: int) -> int:
        return metrics.lagged(self.world, step)
