"""Metrics: a service's golden signals (p50/p99 latency, error rate, request rate, CPU, memory) with
the episode's measurement noise, minute by minute since before the page; its per-endpoint breakdown
(each request endpoint and each background job, with its rate, error rate and p99); and the status
page's summary of them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple

import msgspec

from ..models import ERRORS_ONLY_FLOOR, EndpointMetrics, MetricPoint, Metrics
from ..world import HISTORY_MINUTES, ServiceState, World
from ..world.decimals import round_to, significant
from ..world.draws import WOBBLE_CHANNEL, WOBBLE_KEY, Draws, mix, wobble_minute
from .clock import minute as minute_of  # "minute" names a step throughout this module
from .endpoints import fails_writes, on_path, own_error, request_templates, route
from .jobs import failing_jobs, jobs_of
from .templates import Rng, rng_for

if TYPE_CHECKING:
    from .state import TelemetryState

METRIC_NOISE = 0.03
_NOISE_LOW, _NOISE_WIDTH = -METRIC_NOISE, METRIC_NOISE - -METRIC_NOISE  # as rng.uniform has them
# The noise channels of a metric point's signals: p99, error rate, request rate, CPU, memory.
_POINT_CHANNELS = range(10, 15)
_CHANNEL_KEYS = tuple(channel * WOBBLE_CHANNEL for channel in _POINT_CHANNELS)


def lagged(world: World, step: int) -> int:
    """The last minute the metrics pipeline has delivered at a step."""
    return max(0, step - world.incident.metrics_lag)


def metrics(state: TelemetryState, service: str, step: int) -> Metrics:
    """The golden signals now (as of the metrics pipeline's lag) and their history by minute."""
    state.follow()
    world = state.world
    last = lagged(world, step)
    history = points(state, [(service, minute) for minute in range(-HISTORY_MINUTES, last + 1)])
    now = history[-1]
    service_state = world.states_at(last)[service]
    rng = rng_for(state.seed, world.incident.id, service, "p50", last)
    return Metrics(
        p50_ms=round_to(service_state.p50_ms * (1.0 + rng.uniform(-METRIC_NOISE, METRIC_NOISE)), 1),
        p99_ms=now.p99_ms,
        error_rate=now.error_rate,
        rps=now.rps,
        cpu_pct=now.cpu_pct,
        memory_pct=now.memory_pct,
        history=history,
        endpoints=_breakdown(state, service, last),
    )


def filtered(metrics: Metrics, endpoint: str | None, errors_only: bool) -> Metrics:
    """A metrics view with only the breakdown's rows asked for: one endpoint or job, those failing."""
    if endpoint is None and not errors_only:
        return metrics
    rows = [
        row
        for row in metrics.endpoints
        if (endpoint is None or row.endpoint == endpoint) and (not errors_only or row.error_rate >= ERRORS_ONLY_FLOOR)
    ]
    return msgspec.structs.replace(metrics, endpoints=rows)


def endpoints(world: World, service: str) -> tuple[str, ...]:
    """The rows of a service's breakdown, by name: its request routes, then its background jobs."""
    templates, _ = request_templates(world.plan.by_name[service].kind)
    return (*dict.fromkeys(route(t) for t in templates), *(job.name for job in jobs_of(world, service)))


class BreakdownShape(NamedTuple):
    """What a service's breakdown rows are drawn from besides its state: keyed by the incident alone,
    so worked out once for every episode of it."""

    requests: tuple[tuple[str, bool, float, float], ...]  # route, whether it writes, weight, p99 factor
    total_weight: float
    write_share: float  # of the requests, those that write
    jobs: tuple[tuple[str, float, float, float], ...]  # name, runs per second, p99, share failing when idle


def breakdown_shape(state: TelemetryState, service: str) -> BreakdownShape:
    """The service's requests and background jobs as its metrics' breakdown divides them: drawn from the
    incident alone, once, and kept for every episode of it."""
    found = state.shared.breakdowns.get(service)
    if found is None:
        world = state.world
        node = world.plan.by_name[service]
        # Every draw is keyed by the incident and the service first: hashed once (`Draws`).
        draw = Draws(world.incident.id, service)
        templates, writes = request_templates(node.kind)
        weights = [draw.spread(0.5, 1.5, f"{template}:weight") for template in templates]
        total = sum(weights)
        requests = tuple(
            (route(template), template in writes, weight, draw.spread(0.75, 1.0, f"{template}:p99"))
            for template, weight in zip(templates, weights, strict=True)
        )
        jobs = tuple(
            (
                job.name,
                draw.spread(0.05, 1.5, f"{job.name}:rate"),
                draw.spread(300.0, 4000.0, f"{job.name}:p99"),
                node.error_rate * draw.unit(f"{job.name}:errors"),
            )
            for job in jobs_of(world, service)
        )
        write_share = sum(w for t, w in zip(templates, weights, strict=True) if t in writes) / total
        found = state.shared.breakdowns[service] = BreakdownShape(requests, total, write_share, jobs)
    return found


def _breakdown(state: TelemetryState, service: str, minute: int) -> list[EndpointMetrics]:
    """Each request endpoint's share of the service's requests and how they fare, then each background
    job's runs: the service's own failures on its requests (a refused write on its write endpoints
    alone), a failing job's on that job's row."""
    world = state.world
    service_state = world.states_at(minute)[service]
    rng = rng_for(state.seed, world.incident.id, service, "breakdown", minute)
    shape = breakdown_shape(state, service)
    write_share = shape.write_share
    error_rate, p99_ms, rps = service_state.error_rate, service_state.p99_ms, service_state.rps
    # The service's own failures fall on its writes alone, or on every request alike. Off that path its
    # requests fail as they would with its everyday errors (none for refused writes) and its dependencies'.
    everyday = error_rate
    if write_share and fails_writes(service_state):
        calm = 0.0 if service_state.mode == "write" else world.plan.calm[service].error_rate
        own = own_error(service_state)
        if own > calm:
            everyday = 1.0 - (1.0 - calm) * (1.0 - error_rate) / max(1.0 - own, 1e-9)
    rows = []
    for endpoint, writes, weight, p99_factor in shape.requests:
        error = on_path(error_rate, everyday, write_share, writes)
        rows.append(_row(rng, endpoint, "request", rps * weight / shape.total_weight, error, p99_ms * p99_factor))
    failing = failing_jobs(world, service, minute)
    for name, runs, p99, idle_error in shape.jobs:
        rows.append(_row(rng, name, "job", runs, failing.get(name, idle_error), p99))
    return rows


def _row(
    rng: Rng, endpoint: str, work: Literal["request", "job"], rps: float, error: float, p99: float
) -> EndpointMetrics:
    # rng.uniform(-METRIC_NOISE, METRIC_NOISE) written out: the same draw, without two calls in Python.
    random_ = rng.random
    return EndpointMetrics(
        endpoint,
        work,
        round_to(rps * (1.0 + (_NOISE_LOW + _NOISE_WIDTH * random_())), 2),
        significant(min(1.0, error * (1.0 + (_NOISE_LOW + _NOISE_WIDTH * random_())))),
        # To whole milliseconds: a p99 is never negative, so never rounds to -0.0 as round_to would keep it.
        round_to(p99 * (1.0 + (_NOISE_LOW + _NOISE_WIDTH * random_())), 0),
    )


def metrics_text(metrics: Metrics) -> str:
    return (
        f"p50 {metrics.p50_ms:.0f} ms, p99 {metrics.p99_ms:.0f} ms, error rate {metrics.error_rate:.4f}, "
        f"{metrics.rps:.1f} req/s, cpu {metrics.cpu_pct:.1f}%, memory {metrics.memory_pct:.1f}%"
    )


def points(state: TelemetryState, wanted: list[tuple[str, int]]) -> list[MetricPoint]:
    """The signals of each (service, minute) wanted with the episode's measurement noise; each kept
    until a remedy changes that minute (`TelemetryState.follow`). Those not kept yet have their noise
    hashed together (`mix`)."""
    kept = state.points
    missing = [want for want in wanted if want not in kept]
    if missing:
        keys = {service: _noise_key(state, service) * WOBBLE_KEY for service in dict.fromkeys(s for s, _ in missing)}
        lanes = [
            lane + channel
            for lane in [keys[service] + wobble_minute(minute) for service, minute in missing]
            for channel in _CHANNEL_KEYS
        ]
        noise = iter(mix(lanes, 0))
        states_at, minutes = state.world.states_at, state.shared.minutes
        for want, p99, error_rate, rps, cpu, memory in zip(missing, noise, noise, noise, noise, noise, strict=False):
            service, step = want
            at = minutes.get(step) or _stamp(state, step)  # a stamp is never empty
            kept[want] = _point(states_at(step)[service], at, p99, error_rate, rps, cpu, memory)
    return [kept[want] for want in wanted]


def _stamp(state: TelemetryState, step: int) -> str:
    """The minute a metric point of the step is stamped with, kept for every episode of the incident."""
    minutes = state.shared.minutes
    at = minutes.get(step)
    if at is None:
        at = minutes[step] = minute_of(state.world, step)
    return at


def stamp_minutes(state: TelemetryState, last: int) -> None:
    """Stamp every minute a metrics view shows through minute `last` before any view asks."""
    for step in range(-HISTORY_MINUTES, last + 1):
        _stamp(state, step)


def _noise_key(state: TelemetryState, service: str) -> int:
    """What a service's metric noise is keyed by in this episode."""
    seed = state.seed
    return state.world.plan.by_name[service].key ^ (seed & 0xFFFFFFFF) ^ (seed >> 32 & 0xFFFFFFFF)


def _point(
    service_state: ServiceState, at: str, p99: float, error_rate: float, rps: float, cpu: float, memory: float
) -> MetricPoint:
    """One minute of a service's signals (stamped `at`), each with its own noise."""
    return MetricPoint(
        at,
        round_to(service_state.p99_ms * (1.0 + METRIC_NOISE * p99), 0),  # whole ms, never -0.0
        significant(min(1.0, service_state.error_rate * (1.0 + METRIC_NOISE * error_rate))),
        round_to(service_state.rps * (1.0 + METRIC_NOISE * rps), 1),
        round_to(min(100.0, service_state.cpu_pct * (1.0 + METRIC_NOISE * cpu)), 1),
        round_to(min(100.0, service_state.memory_pct * (1.0 + METRIC_NOISE * memory)), 1),
    )


def dashboard(state: TelemetryState, step: int) -> dict[str, str]:
    """Every service's golden signals as the status page shows them, as of what metrics show (lag
    included): values, never a verdict such as "degraded" on them."""
    state.follow()
    at = lagged(state.world, step)
    names = state.world.incident.names
    shown = points(state, [(name, at) for name in names])
    return {
        name: f"p99 {p.p99_ms:.0f} ms, error rate {p.error_rate:.4f}, {p.rps:.1f} req/s"
        for name, p in zip(names, shown, strict=True)
    }
