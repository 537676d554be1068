"""The one entry point to an episode's telemetry: `Telemetry` renders each view of a service and
decides, once, whether it changed since the agent last looked at it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec

from ..models import Alert, Metrics
from ..world import World
from . import datastore, deploys, health, logs, metrics, pages, pods, traces
from .endpoints import routes
from .pods import Pod
from .state import TelemetryState, shared

View = Literal["logs", "metrics", "health", "deploys", "db", "traces"]


class Scope(msgspec.Struct, frozen=True, gc=False):
    """What part of a view to show, for views broken down by endpoint: one endpoint, failed requests only."""

    endpoint: str | None = None
    errors_only: bool = False


WHOLE = Scope()


class Look(msgspec.Struct, frozen=True):
    """What one inspection showed, the step it was taken at, and whether any of it is new since the
    last look at that view in that scope."""

    view: View
    service: str
    text: str
    metrics: Metrics | None
    changed: bool
    step: int


# The views rendered as text alone: metrics are rendered as values too.
_RENDER: dict[str, Callable[[TelemetryState, str, int, Scope], str]] = {
    "logs": lambda state, service, step, _: logs.logs(state, service, step),
    "health": lambda state, service, step, _: health.health(state, service, step),
    "deploys": lambda state, service, step, _: deploys.deploys(state.world, service, step),
    "db": lambda state, service, step, _: datastore.db_query(state, service, step),
    "traces": lambda state, service, step, scope: traces.traces(
        state, service, step, scope.endpoint, scope.errors_only
    ),
}
# The endpoints a view breaks a service down by, for the views that do (its `Scope.endpoint` is one of them).
_ENDPOINTS: dict[str, Callable[[World, str], tuple[str, ...]]] = {
    "traces": lambda world, service: routes(world.plan.by_name[service].kind),
    "metrics": metrics.endpoints,
}


class Telemetry:
    """Renders what the agent can observe of one world, for one episode seed."""

    def __init__(self, world: World, seed: int) -> None:
        self.world = world
        facing = frozenset(spec.name for spec in world.incident.services if spec.user_facing)
        self.state = TelemetryState(world, seed, facing, shared(world.incident))

    def look(self, view: View, service: str, step: int, scope: Scope = WHOLE) -> Look:
        """Render one view of one service now; a view whose inputs did not move since the last look
        at it in this scope is returned as it was (taken when it was), marked unchanged."""
        state = self.state
        epoch = self._epoch(view, service, step)
        previous = state.seen.get((view, service, scope))
        if previous is not None and previous[0] == epoch:
            old = previous[1]
            return Look(view, service, old.text, old.metrics, changed=False, step=old.step)
        shown = None
        if view == "metrics":
            shown = metrics.filtered(self.metrics(service, step), scope.endpoint, scope.errors_only)
        text = _RENDER[view](state, service, step, scope) if shown is None else metrics.metrics_text(shown)
        look = Look(view, service, text, shown, changed=True, step=step)
        state.seen[(view, service, scope)] = (epoch, look)
        return look

    def render_ahead(self, steps: int) -> None:
        """Render, before any look asks, what episodes of the incident show from the incident alone until
        their first remedy, kept for every episode of it (`Shared`, and the world's untouched steps): each
        service's pods and metrics breakdown, and the states, pages and metric stamps of every step
        through `steps` (a budget no episode goes past). A server's generation process does this for the
        incident it hands over, so that the serving process finds them where its steps would render
        them. Nothing once a remedy was made: what this episode would render from then on is its own."""
        if self.world.history:
            return
        for spec in self.world.incident.services:
            pods.pods(self.state, spec.name, 0)
            metrics.breakdown_shape(self.state, spec.name)
        for step in range(1, steps + 1):
            # The step's own states (every view of the step reads them), then its pages, which read
            # the states of a lagged minute.
            self.world.states_at(step)
            self.alerts(step)
        metrics.stamp_minutes(self.state, self.lagged(steps))

    def endpoints(self, view: View, service: str) -> tuple[str, ...]:
        """The endpoints a view of a service can be scoped to; none for a view that is not broken down by endpoint."""
        listed = _ENDPOINTS.get(view)
        return listed(self.world, service) if listed else ()

    def _epoch(self, view: View, service: str, step: int) -> object:
        """What a view is rendered from besides the clock: faults' strengths and demand, and the remedies applied."""
        world = self.world
        at = self.lagged(step) if view == "metrics" else step
        drained = view == "logs" and not logs.in_backlog(world.incident, service, step)
        return world.strengths(at), world.demands(at), len(world.history), tuple(world.restarts(service, at)), drained

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

    def traces(self, service: str, step: int, scope: Scope = WHOLE) -> str:
        return traces.traces(self.state, service, step, scope.endpoint, scope.errors_only)

    def pods(self, service: str, step: int) -> list[Pod]:
        return pods.pods(self.state, service, step)

    def alerts(self, step: int) -> list[Alert]:
        return pages.alerts(self.state, step)

    def dashboard(self, step: int) -> dict[str, str]:
        return metrics.dashboard(self.state, step)

    def lagged(self, step: int) -> int:
        return metrics.lagged(self.world, step)

    def graded_through(self, answer_step: int) -> int:
        """The last minute severity is graded through for an answer given at a step: the minute the
        metrics had delivered in the observation the answer was chosen from (rubric.SEVERITY_MOMENT)."""
        return self.lagged(answer_step - 1)
