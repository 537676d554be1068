"""The plan: an incident's fixed character, drawn once from its id and shared by every world of it.

Every service's baseline (latency, CPU, memory, background errors, request rate, replicas, noise) and
every edge's character (share, weight, deadline, retries, breaker), the healthy request flow, the
constants of the simulation loop, and the calm baseline: every service's state at the page with
nothing wrong anywhere. The plan is computed whole before any world uses it, and never changes.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Literal

import msgspec

from ..faults import RECORD_KINDS, TECHNOLOGIES
from ..incidents import Incident, ServiceSpec
from ..topology import KINDS, dependency_order
from .draws import WOBBLE_CHANNEL, WOBBLE_KEY, Draws, spread, unit
from .simulation import CALM_MINUTE, Rhythm, ServiceState, StepConstants, prepare, simulate
from .traffic import flow, queueing


# Edges and nodes hold no reference cycles: the garbage collector need not track them. Structs rather
# than frozen dataclasses: a plan builds dozens of them, and a frozen dataclass's __init__ costs several
# times a Struct's.
class Edge(msgspec.Struct, frozen=True, gc=False):
    """How a caller uses one dependency."""

    dep: str
    share: float  # of the caller's requests that call it
    weight: float  # how much a failed call fails the request (a cache miss falls back)
    deadline_ms: float
    retries: int
    breaker: bool
    # How the caller's logs speak of failed calls: naming the service, its host, its endpoint, or nothing.
    style: Literal["named", "host", "endpoint", "bare"]


class Node(msgspec.Struct, frozen=True, gc=False):
    """One service's fixed character in this incident."""

    name: str
    kind: str
    tech: str
    user_facing: bool
    edges: tuple[Edge, ...]
    p50_ms: float
    tail: float  # p99 / p50 when healthy
    cpu_pct: float
    memory_pct: float
    error_rate: float
    entry_rps: float
    noise: float
    replicas: int
    # Seeds this service's per-minute noise.
    key: int


# Per service, what the simulation loop needs besides the minute: (node, capacity, queueing at its
# baseline load, queueing at healthy traffic, memory noise, whether it is a system of record, per
# edge (edge, share of requests a failed call fails, retry exponent), and its everyday movement).
PlainConstants = tuple[Node, float, float, float, float, bool, tuple[tuple[Edge, float, float], ...], Rhythm]
# Those, and the same as the compiled minute reads them (`simulation.prepare`; None where not built).
LoopConstants = tuple[Node, float, float, float, float, bool, tuple[tuple[Edge, float, float], ...], Rhythm, object]


@dataclass(frozen=True, slots=True)
class Plan:
    nodes: tuple[Node, ...]  # dependencies first
    by_name: Mapping[str, Node]
    healthy_rps: Mapping[str, float]
    loop: tuple[LoopConstants, ...]
    # The services' noise keys on their two channels, in the simulation's order (hashed by `draws.mix`).
    noise: tuple[int, ...]
    # Each service's p99, and its state, at the page with nothing wrong anywhere.
    healthy_p99: Mapping[str, float]
    calm: Mapping[str, ServiceState]
    # How much traffic grew over the history shown before the page (a share of the page's traffic).
    trend: float = 0.0
    # The user-facing services, dependencies first: the rubric reads their impact at every step graded.
    facing: tuple[str, ...] = ()
    # Every service's state with nothing wrong anywhere at other steps than the page, by step, as the
    # calm worlds simulated so far found them (`calm_states`): a memo the plan's worlds share, since a
    # service on no fault's path is in its calm state at every step.
    calm_by_step: dict[int, Mapping[str, ServiceState]] = field(init=False, default_factory=dict, compare=False)
    # The simulation's constants of each step simulated so far (`simulation.StepConstants`): its noise
    # and calm request rates, the same in every world of the plan.
    step_constants: dict[int, StepConstants] = field(init=False, default_factory=dict, compare=False)

    def reach(self, services: AbstractSet[str]) -> frozenset[str]:
        """The services and every service they call, directly or not: all their states depend on."""
        found = set(services)
        frontier = list(services)
        while frontier:
            for edge in self.by_name[frontier.pop()].edges:
                if edge.dep not in found:
                    found.add(edge.dep)
                    frontier.append(edge.dep)
        return frozenset(found)

    def traffic(self, step: int) -> float:
        """The entry traffic at a minute, as a multiple of the page's: it has been growing or falling
        over the history before the page, as traffic does through a day; from the page on it holds."""
        if step >= 0 or not self.trend:
            return 1.0
        return 1.0 + self.trend * max(step, -TREND_MINUTES) / TREND_MINUTES


Wiring = tuple[tuple[str, str, str, bool, tuple[str, ...]], ...]


def plan_of(incident: Incident) -> Plan:
    """The incident's plan: cached by its wiring, so every world of it shares one."""
    global _last_plan
    services = incident.services
    if _last_plan is not None and _last_plan[0] is services and _last_plan[1] == incident.id:
        return _last_plan[2]
    wiring = tuple(
        (s.name, s.kind, _technology(incident.id, s.name, s.kind, s.tech), s.user_facing, tuple(s.depends_on))
        for s in services
    )
    plan = _plan_for(incident.id, wiring)
    _last_plan = (services, incident.id, plan)
    return plan


# The last incident's services (held, so that no other list takes their identity), its id and its plan:
# the generator's tries of one topology, and the worlds each builds, share that one list (msgspec's
# `replace` keeps it), so most asks find their plan without spelling out the wiring again.
_last_plan: tuple[list[ServiceSpec], str, Plan] | None = None


def technology(incident: Incident, name: str) -> str:
    spec = incident.service(name)
    return _technology(incident.id, name, spec.kind, spec.tech)


@lru_cache(maxsize=4096)
def _technology(incident_id: str, name: str, kind: str, tech: str | None) -> str:
    options = TECHNOLOGIES[kind]
    # A service named after its technology ("postgres-db", "redis-cache") runs it.
    named = [option for option in options if option in name]
    return tech or (named[0] if named else options[int(unit(incident_id, name, "tech") * len(options))])


@lru_cache(maxsize=512)
def _plan_for(incident_id: str, wiring: Wiring) -> Plan:
    """Every service's baseline and every edge's character, drawn from the incident id, then the calm
    baseline simulated on them."""
    order = dependency_order({name: deps for name, _, _, _, deps in wiring})
    kinds = {name: kind for name, kind, _, _, _ in wiring}
    called = {dep for *_, deps in wiring for dep in deps}
    spec = {name: (kind, tech, facing, deps) for name, kind, tech, facing, deps in wiring}
    nodes = {name: _node(incident_id, name, *spec[name], kinds, name in called) for name in order}
    ordered = tuple(nodes[name] for name in order)
    healthy = flow(ordered, {}, {})
    capacity = {n.name: healthy[n.name] / (max(n.cpu_pct, 5.0) / 100.0) if healthy[n.name] else 1e9 for n in ordered}
    noise = tuple([n.key * WOBBLE_KEY + channel * WOBBLE_CHANNEL for n in ordered for channel in (1, 2)])
    loop = tuple(_loop(n, healthy[n.name], capacity[n.name], _rhythm(incident_id, n, healthy[n.name])) for n in ordered)
    trend = spread(-TREND_FALL, TREND_RISE, incident_id, "traffic trend")
    # The calm baseline is simulated on the plan before it has one: no service is slow against an
    # unknown healthy p99, and a calm service is never slow against itself, so its health is the same.
    facing = tuple(n.name for n in ordered if n.user_facing)
    unrated = Plan(ordered, nodes, healthy, loop, noise, {n.name: math.inf for n in ordered}, {}, trend, facing)
    calm = simulate(unrated, CALM_MINUTE)
    return replace(unrated, healthy_p99={name: state.p99_ms for name, state in calm.items()}, calm=calm)


_STYLES: tuple[Literal["named", "host", "endpoint", "bare"], ...] = ("named", "named", "host", "endpoint", "bare")


def _node(
    incident_id: str,
    name: str,
    kind: str,
    tech: str,
    facing: bool,
    deps: tuple[str, ...],
    kinds: dict[str, str],
    called: bool,
) -> Node:
    profile = KINDS[kind]
    draw = Draws(incident_id, name)
    edges = tuple(
        _edge(incident_id, name, dep, kinds[dep], 1.0 / len(deps) if profile.routes else None) for dep in deps
    )
    entry = draw.spread(300, 2500, "rps") if facing and not called else 0.0
    if not facing and not called:
        entry = draw.spread(5, 60, "rps")
    return Node(
        name=name,
        kind=kind,
        tech=tech,
        user_facing=facing,
        edges=edges,
        p50_ms=profile.latency_ms * draw.spread(0.6, 1.5, "p50"),
        tail=draw.spread(2.0, 3.5, "tail"),
        cpu_pct=profile.cpu_pct * draw.spread(0.6, 1.4, "cpu"),
        memory_pct=profile.memory_pct * draw.spread(0.75, 1.25, "memory"),
        error_rate=draw.spread(0.0002, 0.004, "errors"),
        entry_rps=entry,
        noise=draw.spread(0.02, 0.07, "noise"),
        replicas=2 + int(draw.unit("replicas") * 4),
        key=zlib.crc32(f"{incident_id}:{name}".encode()),
    )


def _edge(incident_id: str, name: str, dep: str, dep_kind: str, routed_share: float | None) -> Edge:
    """A caller's use of one dependency; a router (`routed_share`) splits its requests evenly."""
    draw = Draws(incident_id, name, dep)
    # Most requests of a service touch its database; other dependencies serve part of them.
    low = 0.65 if dep_kind == "database" else 0.35
    return Edge(
        dep=dep,
        share=routed_share if routed_share is not None else draw.spread(low, 1.0, "share"),
        weight=KINDS[dep_kind].caller_weight * draw.spread(0.8, 1.0, "weight"),
        deadline_ms=round(draw.spread(800, 3000, "deadline"), -2),
        retries=int(draw.unit("retries") * 3),
        breaker=draw.unit("breaker") < 0.35,
        style=_STYLES[int(draw.unit("style") * len(_STYLES))],
    )


def _loop(node: Node, healthy_rps: float, capacity_rps: float, rhythm: Rhythm) -> LoopConstants:
    """A service's constants of the simulation loop, computed as the loop would."""
    base = queueing(max(node.cpu_pct, 5.0) / 100.0)
    calm = queueing(healthy_rps / capacity_rps if capacity_rps > 0 else 0.0) / base
    edges = tuple((e, e.share * e.weight, 1.0 + 0.5 * e.retries) for e in node.edges)
    plain = (node, capacity_rps, base, calm, 0.3 * node.noise, node.kind in RECORD_KINDS, edges, rhythm)
    return (*plain, prepare(plain))


def _rhythm(incident_id: str, node: Node, healthy_rps: float) -> Rhythm:
    """A service's everyday movement, drawn like its baseline: a collected runtime's heap sawtooth, a
    cache or buffer pool refilling, a batch window, and memory in flight with its requests. Roots and
    the others draw alike: none of it says which service is at fault."""
    if not healthy_rps or node.kind == "external":  # a provider's egress proxy only passes requests on
        return Rhythm(healthy_rps)
    draw = Draws(incident_id, node.name, "rhythm")
    gc = node.tech in GC_TECHS and draw.unit("gc") < GC_SHARE
    fill = draw.unit("fill") < FILL_SHARE.get(node.kind, FILL_SHARE_APP)
    batch = draw.unit("batch") < BATCH_SHARE
    return Rhythm(
        healthy_rps,
        gc_points=draw.spread(5.0, 20.0, "gc points") if gc else 0.0,
        gc_minutes=draw.spread(12.0, 40.0, "gc minutes"),
        gc_phase=draw.spread(0.0, 40.0, "gc phase"),
        fill_points=draw.spread(8.0, 25.0, "fill points") if fill else 0.0,
        fill_at=-draw.spread(8.0, 40.0, "fill at"),
        fill_minutes=draw.spread(6.0, 20.0, "fill minutes"),
        batch_at=draw.spread(-30.0, 10.0, "batch at"),
        batch_minutes=draw.spread(8.0, 40.0, "batch minutes") if batch else 0.0,
        batch_cpu=draw.spread(8.0, 30.0, "batch cpu"),
        batch_memory=draw.spread(4.0, 14.0, "batch memory"),
        traffic_memory=node.memory_pct * draw.spread(0.05, 0.2, "traffic memory"),
    )


# Traffic over the history before the page grew by up to this share of the page's, or fell by up to
# this one, over this many minutes.
TREND_RISE, TREND_FALL, TREND_MINUTES = 0.25, 0.12, 12
# Runtimes whose heap fills between collections, and the share of their services whose working set shows it.
GC_TECHS = frozenset({"jvm", "go", "node", "python"})
GC_SHARE = 0.7
# The share of services whose memory is refilling after keys or pages expired: caches most, databases'
# buffer pools and proxies' response caches less, applications' in-process caches least.
FILL_SHARE = {"cache": 0.6, "database": 0.35, "gateway": 0.3}
FILL_SHARE_APP = 0.25
BATCH_SHARE = 0.3
