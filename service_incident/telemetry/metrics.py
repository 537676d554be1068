"""Metrics: a service's golden signals (p50/p99 latency, error rate, request rate, CPU, memory) with
the episode's measurement noise, minute by minute since before the page, and the status page's
summary of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..models import MetricPoint, Metrics
from ..world import HISTORY_MINUTES, World, wobbles
from .clock import clock, format_time
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
