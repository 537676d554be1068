"""Traces: sampled requests through a service, one line per span (service, operation, duration,
status); the sampler keeps failed requests and the slowest first, as an engineer searches."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..faults import FailureMode
from ..topology import KINDS, OPERATIONS
from ..world import Edge, Node, ServiceState, World
from ..world.lognormal import Z99
from .jobs import minor_job
from .templates import fill, pick, rng_for

if TYPE_CHECKING:
    from .state import TelemetryState

TRACES_SAMPLED = 4
TRACE_CANDIDATES = 12
TRACE_DEPTH = 3
# A faulty service's own span status by how its requests fail; each wording is shared by several fault types.
SPAN_STATUS: dict[FailureMode, str] = {
    "error": "error(500)",
    "write": "error(500)",
    "refused": "error(503)",
    "rejected": "error(rejected)",
}
# A span: its depth, service, operation, duration in ms, status.
_Span = tuple[int, str, str, float, str]


@dataclass(frozen=True, slots=True)
class _SpanSource:
    """What every span of one service in one sample of traces is drawn from."""

    node: Node
    operations: tuple[str, ...]
    p50_ms: float
    sigma: float
    own_error: float
    failure: str
    # A red herring's minor fault fails runs of a background job too, in its fault type's words.
    minor_error: float
    minor_failure: str
    minor_job: str
    call_error: float


def traces(state: TelemetryState, service: str, step: int) -> str:
    """Sampled requests through a service, one line per span (service, operation, duration, status).

    The sampler keeps what an engineer searches for first: failed requests and the slowest, then
    ordinary ones.
    """
    world = state.world
    states = world.states_at(step)
    rng = rng_for(state.seed, world.incident.id, service, "traces", step)
    drawn = []
    # What a span of each service is drawn from, worked out once for all the candidates' spans.
    sources: dict[str, _SpanSource] = {}
    for _ in range(TRACE_CANDIDATES):
        spans: list[_Span] = []
        total, status = _span(world, service, states, sources, rng, 0, spans, None)
        drawn.append((total, status, rng.getrandbits(32), spans))
    failed = [t for t in drawn if t[1] != "ok"][:2]
    rest = sorted((t for t in drawn if t[1] == "ok"), key=lambda t: -t[0])
    kept = failed + rest[:1] + rest[-1:]
    lines: list[str] = []
    for total, status, trace_id, spans in kept[:TRACES_SAMPLED]:
        lines.append(f"trace {trace_id:08x} {total:.0f}ms {status}")
        lines += [f"{'  ' * (depth + 1)}{name} {op} {ms:.0f}ms {st}" for depth, name, op, ms, st in spans]
    return "\n".join(lines)


def _span_source(world: World, service: str, states: dict[str, ServiceState]) -> _SpanSource:
    node = world.plan.by_name[service]
    state = states[service]
    ops = OPERATIONS.get(node.kind)
    operations = ops[0] if ops else KINDS[node.kind].endpoints
    sigma = max(math.log(max(state.self_p99_ms, state.self_p50_ms * 1.01) / state.self_p50_ms) / Z99, 1e-6)
    upstream_ok = math.prod(1.0 - share for _, share, _ in state.failing_upstreams)
    own_error = 1.0 - (1.0 - state.error_rate) / max(upstream_ok, 1e-9)
    return _SpanSource(
        node=node,
        operations=operations,
        p50_ms=state.self_p50_ms,
        sigma=sigma,
        own_error=max(0.0, own_error),
        # What the service returns, in words several fault types share: a trace localizes, it does not classify.
        failure=SPAN_STATUS[state.mode] if state.fault_strength else "error(500)",
        minor_error=state.minor_error,
        minor_failure=SPAN_STATUS[state.minor_mode],
        minor_job=minor_job(world, service) if state.minor_error else "",
        call_error=max(0.0, state.call_failure - state.error_rate),
    )


# One span's every outcome (fault, herring, timeout, retry) in one place: they share the draws' order.
def _span(  # noqa: C901
    world: World,
    service: str,
    states: dict[str, ServiceState],
    sources: dict[str, _SpanSource],
    rng: random.Random,
    depth: int,
    spans: list[_Span],
    edge: Edge | None,
) -> tuple[float, str]:
    source = sources.get(service)
    if source is None:
        source = sources[service] = _span_source(world, service, states)
    random_ = rng.random
    op = pick(rng, source.operations)
    op = fill(op, rng, {})
    own = source.p50_ms * math.exp(rng.gauss(0.0, source.sigma))
    index = len(spans)
    spans.append((depth, service, op, 0.0, "ok"))
    status = "ok"
    total = own
    # One draw for both, so a service without a minor fault samples as it always has.
    draw = random_()
    own_error = source.own_error
    if draw < own_error:
        status = source.failure
    elif source.minor_error and edge is None and draw < own_error + source.minor_error * (1.0 - own_error):
        # A red herring's minor fault fails runs of a background job, which no caller's request waits
        # on: they show where a trace starts at the service, at that job, never inside a request.
        status = source.minor_failure
        op = source.minor_job
    if depth < TRACE_DEPTH:
        for child in source.node.edges:
            if random_() >= child.share:
                continue
            took, child_status = _span(world, child.dep, states, sources, rng, depth + 1, spans, child)
            total += took
            if child_status != "ok" and status == "ok" and rng.random() < child.weight:
                # A caller's span shows what it observed of the call, not why the call failed.
                status = (
                    "error(upstream timeout)" if child_status in ("timeout", "cancelled") else ("error(upstream error)")
                )
    if edge is not None:
        if total >= edge.deadline_ms:
            total, status = edge.deadline_ms, "timeout"
            # The caller gave up: work below it still running is cancelled then, never longer than it.
            for later in range(index + 1, len(spans)):
                d, name, op_, ms, _ = spans[later]
                if ms > total:
                    spans[later] = (d, name, op_, total, "cancelled")
        elif status == "ok" and rng.random() < source.call_error:
            status = "error(500)"
    spans[index] = (depth, service, op, total, status)
    return total, status
