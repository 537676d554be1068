"""Metrics: a service's golden signals (p50/p99 latency, error rate, request rate, CPU, memory) with
the episode's measurement noise, minute by minute since before the page; its per-endpoint breakdown
(each request endpoint and each background job, with its rate, error rate and p99); and the status
page's summary of them."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Literal

import msgspec

from ..models import ERRORS_ONLY_FLOOR, EndpointMetrics, MetricPoint, Metrics
from ..topology import KINDS, OPERATIONS
from ..world import HISTORY_MINUTES, World, spread, unit, wobbles
from .clock import clock, format_time
from .endpoints import route
from .jobs import failing_jobs, jobs_of
from .templates import rng_for

if TYPE_CHECKING:
    from .state import TelemetryState

METRIC_NOISE = 0.03
# The noise channels of a metric point's signals: p99, error rate, request rate, CPU, memory.
_POINT_CHANNELS = range(10, 15)


def lagged(world: World, step: int) -> int:
    """The last minute the metrics pipeline has delivered at a step."""
    return max(0, step - world.incident.metrics_lag)


def significant(value: float) -> float:
    """A ratio as dashboards print it: four significant digits."""
    return float(f"{value:.4g}")


def metrics(state: TelemetryState, service: str, step: int) -> Metrics:
    """The golden signals now (as of the metrics pipeline's lag) and their history by minute."""
    state.follow()
    world = state.world
    last = lagged(world, step)
    points = [point(state, service, minute) for minute in range(-HISTORY_MINUTES, last + 1)]
    now = points[-1]
    service_state = world.states_at(last)[service]
    rng = rng_for(state.seed, world.incident.id, service, "p50", last)
    return Metrics(
        p50_ms=float(round(service_state.p50_ms * (1.0 + rng.uniform(-METRIC_NOISE, METRIC_NOISE)), 1)),
        p99_ms=now.p99_ms,
        error_rate=now.error_rate,
        rps=now.rps,
        cpu_pct=now.cpu_pct,
        memory_pct=now.memory_pct,
        history=points,
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


def _templates(kind: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """The requests a service of this kind serves (a datastore's reads and writes) and which of them write."""
    ops = OPERATIONS.get(kind)
    templates = (*ops[0], *ops[1]) if ops else KINDS[kind].endpoints
    return templates, frozenset(ops[1]) if ops else frozenset(t for t in templates if not t.startswith("GET"))


def endpoints(world: World, service: str) -> tuple[str, ...]:
    """The rows of a service's breakdown, by name: its request routes, then its background jobs."""
    templates, _ = _templates(world.plan.by_name[service].kind)
    return (*dict.fromkeys(route(t) for t in templates), *(job.name for job in jobs_of(world, service)))


def _breakdown(state: TelemetryState, service: str, minute: int) -> list[EndpointMetrics]:
    """Each request endpoint's share of the service's requests and how they fare, then each background
    job's runs: the service's own failures on its requests (a refused write on its write endpoints
    alone), a failing job's on that job's row."""
    world = state.world
    iid = world.incident.id
    node = world.plan.by_name[service]
    service_state = world.states_at(minute)[service]
    rng = rng_for(state.seed, iid, service, "breakdown", minute)
    templates, writes = _templates(node.kind)
    weights = [spread(0.5, 1.5, iid, service, template, "weight") for template in templates]
    write_weight = sum(w for t, w in zip(templates, weights, strict=True) if t in writes) / sum(weights)
    refusing = service_state.mode == "write" and service_state.fault_strength > 0.0 and write_weight > 0.0
    rows = []
    for template, weight in zip(templates, weights, strict=True):
        error = service_state.error_rate
        if refusing:
            error = min(1.0, error / write_weight) if template in writes else 0.0
        p99 = service_state.p99_ms * spread(0.75, 1.0, iid, service, template, "p99")
        rps = service_state.rps * weight / sum(weights)
        rows.append(_row(rng, route(template), "request", rps, error, p99))
    failing = failing_jobs(world, service, minute)
    for job in jobs_of(world, service):
        rps = spread(0.05, 1.5, iid, service, job.name, "rate")
        p99 = spread(300.0, 4000.0, iid, service, job.name, "p99")
        error = failing.get(job.name, node.error_rate * unit(iid, service, job.name, "errors"))
        rows.append(_row(rng, job.name, "job", rps, error, p99))
    return rows


def _row(
    rng: random.Random, endpoint: str, work: Literal["request", "job"], rps: float, error: float, p99: float
) -> EndpointMetrics:
    def noisy(value: float) -> float:
        return value * (1.0 + rng.uniform(-METRIC_NOISE, METRIC_NOISE))

    return EndpointMetrics(
        endpoint, work, float(round(noisy(rps), 2)), significant(min(1.0, noisy(error))), float(round(noisy(p99)))
    )


def metrics_text(metrics: Metrics) -> str:
    return (
        f"p50 {metrics.p50_ms:.0f} ms, p99 {metrics.p99_ms:.0f} ms, error rate {metrics.error_rate:.4f}, "
        f"{metrics.rps:.1f} req/s, cpu {metrics.cpu_pct:.1f}%, memory {metrics.memory_pct:.1f}%"
    )


def point(state: TelemetryState, service: str, minute: int) -> MetricPoint:
    """One minute of a service's signals with the episode's measurement noise; kept until a remedy
    changes that minute (`TelemetryState.follow`)."""
    found = state.points.get((service, minute))
    if found is not None:
        return found
    world, seed = state.world, state.seed
    service_state = world.states_at(minute)[service]
    key = world.plan.by_name[service].key ^ (seed & 0xFFFFFFFF) ^ (seed >> 32 & 0xFFFFFFFF)
    signals = (
        service_state.p99_ms,
        service_state.error_rate,
        service_state.rps,
        service_state.cpu_pct,
        service_state.memory_pct,
    )
    noise = wobbles(key, minute, _POINT_CHANNELS)
    p99, error_rate, rps, cpu, memory = [
        value * (1.0 + METRIC_NOISE * wobble) for value, wobble in zip(signals, noise, strict=True)
    ]
    at = state.minutes.get(minute)
    if at is None:
        at = state.minutes[minute] = format_time(clock(world, minute))[11:16]
    found = state.points[(service, minute)] = MetricPoint(
        at,
        float(round(p99)),
        significant(min(1.0, error_rate)),
        float(round(rps, 1)),
        round(min(100.0, cpu), 1),
        round(min(100.0, memory), 1),
    )
    return found


def dashboard(state: TelemetryState, step: int) -> dict[str, str]:
    """Every service's golden signals as the status page shows them, as of what metrics show (lag
    included): values, never a verdict such as "degraded" on them."""
    state.follow()
    at = lagged(state.world, step)
    points = [(spec.name, point(state, spec.name, at)) for spec in state.world.incident.services]
    return {name: f"p99 {p.p99_ms:.0f} ms, error rate {p.error_rate:.4f}, {p.rps:.1f} req/s" for name, p in points}
