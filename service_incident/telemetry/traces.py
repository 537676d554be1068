"""Traces: sampled requests through a service, broken down by endpoint (requests, failures, p99),
then one line per span (service, operation, duration, status) of the requests the sampler keeps:
failed ones and the slowest first, as an engineer searches. A filter (one endpoint, failures only)
keeps the view short."""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from functools import cache
from operator import attrgetter
from typing import TYPE_CHECKING

import msgspec

from ..faults import APP_KINDS, FailureMode
from ..world import Edge, ServiceState, World
from ..world.lognormal import Z99
from .endpoints import fails_writes, on_path, operations, own_error, request_templates, route, routes
from .escalation import partner_call
from .jobs import minor_job
from .templates import Bits, Taken, draw_bits, replay, seed_text, take

if TYPE_CHECKING:
    from .state import TelemetryState

# The whole view shows failed requests, the slowest and the fastest; a filtered one leaves out what the
# filter does not ask for (the fastest, or every request that did not fail).
FAILED_SHOWN = 2
# The requests the sampler searches: the breakdown counts every one, the traces shown are picked from them.
TRACE_CANDIDATES = 40
TRACE_DEPTH = 3
# A faulty service's own span status by how its requests fail; each wording is shared by several fault types.
SPAN_STATUS: dict[FailureMode, str] = {
    "error": "error(500)",
    "write": "error(500)",
    "refused": "error(503)",
    "rejected": "error(rejected)",
    "handshake": "error(503)",
}
# An operation: its text, or the template it is drawn from and its draws, written only if a view shows
# the span (`operation`): a view shows a few of the sample's couple of hundred spans.
Operation = str | tuple[str, Taken]
# A span: its depth, service, operation, duration in ms, status.
_Span = tuple[int, str, Operation, float, str]
# What a span holds until its children are drawn: nothing reads it before it is replaced.
_PENDING: _Span = (0, "", "", 0.0, "ok")
# Draws the requests of one sample (a service at a step) from the rng its key seeds (`random.Random(key)`).
DrawSample = Callable[[World, str, int, str], list["Request"]]
# Draws a span of a service, at a depth, into a request's spans, called over an edge (None at the entry).
_DrawSpan = Callable[[str, int, list[_Span], Edge | None], tuple[float, str, str]]
# The statuses of a call the caller gave up on.
_GAVE_UP = ("timeout", "cancelled")
_TWO_PI = 2.0 * math.pi  # as random.gauss has it
_TOTAL_MS = attrgetter("total_ms")
# Services that call an outside party (a provider or partner) on some of their requests, as a client
# span of their own under the request's span, taking part of its own time.
PARTNER_CALLERS = frozenset((*APP_KINDS, "gateway"))
PARTNER_SHARE = 0.3


# msgspec Structs, not frozen dataclasses: a sample builds dozens of each, and a Struct is built in C.
class _SpanSource(msgspec.Struct, frozen=True, gc=False):
    """What every span of one service in one sample of traces is drawn from."""

    edges: tuple[Edge, ...]  # the calls it makes
    operations: tuple[str, ...]
    routes: tuple[str, ...]  # each operation's route
    bits: tuple[Bits, ...]  # what each operation draws (`draw_bits`): none for one written as it stands
    p50_ms: float
    sigma: float
    own_errors: tuple[float, ...]  # each operation's share failing of the service's own doing
    failure: str
    # A red herring's minor fault fails runs of a background job too, in its fault type's words.
    minor_error: float
    minor_failure: str
    minor_job: str
    call_error: float
    partner_op: str  # its client span to its outside party, "" for a service that calls none
    partner_failure: str  # that span's status when its own failures are the party's, else ""


class Request(msgspec.Struct, frozen=True):
    """One sampled request through the service: the route it came in on, its duration, status and spans."""

    route: str
    total_ms: float
    status: str
    trace_id: int
    spans: list[_Span]


def traces(
    state: TelemetryState, service: str, step: int, endpoint: str | None = None, errors_only: bool = False
) -> str:
    """Sampled requests through a service: by endpoint (requests, failed, p99), then one line per span.

    The sampler keeps what an engineer searches for first: failed requests and the slowest, then
    an ordinary one. `endpoint` keeps one endpoint's requests (failed and slowest); `errors_only` the
    failed ones, and the endpoints that failed any, so a filtered view is short.
    """
    sampled = sample(state, service, step)
    kind = state.world.plan.by_name[service].kind
    shown = [r for r in sampled if endpoint is None or r.route == endpoint]
    lines = [_heading(len(sampled), endpoint, errors_only)]
    known = routes(kind)
    # A background job's runs are no endpoint's requests: rows of their own, after the endpoints'.
    jobs = tuple(dict.fromkeys(r.route for r in shown if r.route not in known)) if endpoint is None else ()
    lines += breakdown(shown, known if endpoint is None else (endpoint,), errors_only, jobs)
    # Slowest first; stable, so of equal durations the one drawn first.
    ok = sorted([r for r in shown if r.status == "ok"], key=_TOTAL_MS, reverse=True)
    if errors_only:
        ordinary = []
    elif endpoint is not None:
        ordinary = ok[:1]  # the slowest
    else:
        ordinary = ok[:1] + ok[1:][-1:]  # the slowest and the fastest
    kept = failed_shown(shown) + ordinary
    if not kept:
        lines.append("no sampled request matches")
    for request in kept:
        lines.append(f"trace {request.trace_id:08x} {request.total_ms:.0f}ms {request.status}")
        lines += [
            f"{'  ' * (depth + 1)}{name} {operation(op)} {ms:.0f}ms {st}" for depth, name, op, ms, st in request.spans
        ]
    return "\n".join(lines)


def operation(op: Operation) -> str:
    """An operation's text. Operation templates name no context fields: every drawn part is a draw."""
    return op if isinstance(op, str) else replay(*op)


def failed_shown(requests: list[Request]) -> list[Request]:
    """The failed requests a view shows, in the order drawn: the first of each route that failed before a
    second of any, so a background job's failing runs do not hide the failing requests of an endpoint."""
    failed = [r for r in requests if r.status != "ok"]
    rank: dict[str, int] = {}
    order = []
    for index, request in enumerate(failed):
        rank[request.route] = rank.get(request.route, -1) + 1
        order.append((rank[request.route], index))
    return [failed[index] for index in sorted(index for _, index in sorted(order)[:FAILED_SHOWN])]


def _heading(sampled: int, endpoint: str | None, errors_only: bool) -> str:
    scope = [f"endpoint {endpoint}"] if endpoint is not None else []
    scope += ["failed requests only"] if errors_only else []
    return f"sampled {sampled} requests" + (f"; shown: {', '.join(scope)}" if scope else "")


def breakdown(
    requests: list[Request], endpoints: tuple[str, ...], errors_only: bool = False, jobs: tuple[str, ...] = ()
) -> list[str]:
    """One line per endpoint, then per background job: the requests (runs) sampled on it, how many
    failed, and their p99 (nearest rank).

    A function of the sampled requests alone, so it reads the same for any service they came from."""
    durations: dict[str, list[float]] = {}
    failures: dict[str, int] = {}
    for request in requests:
        route_ = request.route
        durations.setdefault(route_, []).append(request.total_ms)
        if request.status != "ok":
            failures[route_] = failures.get(route_, 0) + 1
    lines = []
    for name, (row, counted) in [
        *((e, ("endpoint", "requests")) for e in endpoints),
        *((j, ("job", "runs")) for j in jobs),
    ]:
        mine = sorted(durations.get(name, ()))
        failed = failures.get(name, 0)
        if errors_only and not failed:
            continue
        p99 = f"p99 {mine[math.ceil(0.99 * len(mine)) - 1]:.0f} ms" if mine else "p99 -"
        lines.append(f"{row} {name}: {len(mine)} {counted}, {failed} failed, {p99}")
    return lines


def sample(state: TelemetryState, service: str, step: int) -> list[Request]:
    """The requests through a service the sampler searched at a step, in the order they were drawn."""
    world = state.world
    return draw(world, service, step, seed_text(state.seed, world.incident.id, service, "traces", step))


def draw_in_python(world: World, service: str, step: int, key: str) -> list[Request]:
    """A sample's requests, drawn by the loop below from the rng its key seeds: what the compiled kernel
    (`_spans.pyx`) stands for."""
    rng = random.Random(key)
    span = _span_drawer(world, step, rng)
    drawn = []
    for _ in range(TRACE_CANDIDATES):
        spans: list[_Span] = []
        total, status, entry = span(service, 0, spans, None)
        drawn.append(Request(entry, total, status, rng.getrandbits(32), spans))
    return drawn


def compiled_kernel() -> DrawSample | None:
    """The same draws compiled (setup.py), at half the cost of a view's sample, if this install has them."""
    try:
        from ._spans import draw_requests
    except ImportError:  # an install without a C compiler: the Python loop draws
        return None

    def draw_compiled(world: World, service: str, step: int, key: str) -> list[Request]:
        def source(name: str) -> _SpanSource:
            return _span_source(world, name, step)

        return draw_requests(key, service, TRACE_CANDIDATES, source, Request, TRACE_DEPTH, PARTNER_SHARE, _PENDING)

    return draw_compiled


draw: DrawSample = compiled_kernel() or draw_in_python


def own_sigma(state: ServiceState) -> float:
    """The spread of a service's own span durations: lognormal about its own p50, reaching its own p99."""
    return max(math.log(max(state.self_p99_ms, state.self_p50_ms * 1.01) / state.self_p50_ms) / Z99, 1e-6)


def own_mean_ms(state: ServiceState) -> float:
    """The mean of a service's own span durations (what a database reports as its statements' mean time)."""
    return state.self_p50_ms * math.exp(own_sigma(state) ** 2 / 2)


@cache
def _operations(kind: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[Bits, ...]]:
    """A kind's operation templates, each one's route and its draws."""
    templates = operations(kind)
    return templates, tuple(map(route, templates)), tuple(map(draw_bits, templates))


def _span_source(world: World, service: str, step: int) -> _SpanSource:
    node = world.plan.by_name[service]
    state = world.states_at(step)[service]
    templates, routes_, bits = _operations(node.kind)
    sigma = own_sigma(state)
    own = own_error(state)
    own_errors = (own,) * len(templates)
    if fails_writes(state):
        # Its own failures fall on its writes, as the metrics' breakdown shows them.
        written = request_templates(node.kind)[1]
        taken = [template in written for template in templates]
        calm = 0.0 if state.mode == "write" else world.plan.calm[service].error_rate
        share = sum(taken) / len(taken)
        own_errors = tuple(on_path(own, calm, share, t) for t in taken)
    return _SpanSource(
        edges=node.edges,
        operations=templates,
        routes=routes_,
        bits=bits,
        p50_ms=state.self_p50_ms,
        sigma=sigma,
        own_errors=own_errors,
        # What the service returns, in words several fault types share: a trace localizes, it does not classify.
        failure=SPAN_STATUS[state.mode] if state.fault_strength else "error(500)",
        minor_error=state.minor_error,
        minor_failure=SPAN_STATUS[state.minor_mode],
        minor_job=minor_job(world, service) if state.minor_error else "",
        call_error=max(0.0, state.call_failure - state.error_rate),
        partner_op=partner_call(node.kind, service) if node.kind in PARTNER_CALLERS else "",
        partner_failure=state.partner_failure,
    )


def _span_drawer(world: World, step: int, rng: random.Random) -> _DrawSpan:  # noqa: C901
    """What draws a span and its children in one sample: a closure over what every span of the sample
    shares, since a trace view draws a couple of hundred spans and each call's cost counts."""
    # What a span of each service is drawn from, worked out once for all the candidates' spans.
    sources: dict[str, _SpanSource] = {}
    random_ = rng.random
    # The second value of a gaussian pair, which rng.gauss keeps on the rng: kept here instead, since no
    # other draw of a sample is a gaussian and its rng is new.
    spare: float | None = None

    # One span's every outcome (fault, herring, timeout, retry) in one place: they share the draws' order.
    def span(service: str, depth: int, spans: list[_Span], edge: Edge | None) -> tuple[float, str, str]:  # noqa: C901
        """A span and its children: its duration, its status, and the route of its operation."""
        source = sources.get(service)
        if source is None:
            source = sources[service] = _span_source(world, service, step)
        choice = int(random_() * len(source.operations))
        template = source.operations[choice]
        op: Operation = (template, take(template, rng)) if source.bits[choice] else template
        # rng.gauss(0.0, sigma) written out, its cached second value included: the same draws, without
        # the cost of a call in Python on every span.
        nonlocal spare
        z = spare
        if z is None:
            x2pi = random_() * _TWO_PI
            g2rad = math.sqrt(-2.0 * math.log(1.0 - random_()))
            z = math.cos(x2pi) * g2rad
            spare = math.sin(x2pi) * g2rad
        else:
            spare = None
        total = source.p50_ms * math.exp(z * source.sigma)
        index = len(spans)
        spans.append(_PENDING)
        status = "ok"
        route = source.routes[choice]
        # One draw for both, so a service without a minor fault samples as it always has.
        draw = random_()
        own_error = source.own_errors[choice]
        if draw < own_error:
            status = source.failure
        elif source.minor_error and edge is None and draw < own_error + source.minor_error * (1.0 - own_error):
            # A red herring's minor fault fails runs of a background job, which no caller's request waits
            # on: they show where a trace starts at the service, at that job, never inside a request, and
            # count as the job's runs, not as requests of the endpoint the draw fell on.
            status = source.minor_failure
            op = route = source.minor_job
        if source.partner_op and depth < TRACE_DEPTH:
            # A failure of the outside party's is a failed call to it; other requests call it now and
            # then. Its draws are taken whatever the request does, so one herring leaves others' alone.
            calls = random_() < PARTNER_SHARE
            share = 0.4 + 0.5 * random_()
            failed = draw < own_error and bool(source.partner_failure)
            if (failed or calls) and route != source.minor_job:
                spans.append(
                    (depth + 1, service, source.partner_op, total * share, source.partner_failure if failed else "ok")
                )
        if depth < TRACE_DEPTH:
            for child in source.edges:
                if random_() >= child.share:
                    continue
                took, child_status, _ = span(child.dep, depth + 1, spans, child)
                total += took
                if child_status != "ok" and status == "ok" and random_() < child.weight:
                    # A caller's span shows what it observed of the call, not why the call failed.
                    status = "error(upstream timeout)" if child_status in _GAVE_UP else "error(upstream error)"
        if edge is not None:
            if total >= edge.deadline_ms:
                total, status = edge.deadline_ms, "timeout"
                _cancel_below(spans, index, total)
            elif status == "ok" and random_() < source.call_error:
                status = "error(500)"
        spans[index] = (depth, service, op, total, status)
        return total, status, route

    return span


def _cancel_below(spans: list[_Span], index: int, deadline_ms: float) -> None:
    """The caller of the span at `index` gave up: work below it still running is cancelled then, never
    longer than it."""
    for later in range(index + 1, len(spans)):
        depth, name, op, ms, _ = spans[later]
        if ms > deadline_ms:
            spans[later] = (depth, name, op, deadline_ms, "cancelled")
