"""The world model: the true state of every service over time, derived from an incident.

Each service has its own baseline (latency distribution, CPU, memory, background errors, request
rate and capacity) drawn once per incident, and its own per-minute noise. Requests flow from the
entry points down the dependency graph: a caller sends a share of its requests to each dependency,
waits up to its deadline, retries failed calls a few times, and may trip a circuit breaker. Its
error rate and latency follow from those calls and from its own faults; its CPU from its load
against its capacity (queueing slows it down as it saturates, and past capacity it sheds requests).
Red herrings add real signals that do not reach users. Time advances one step per action: faults
build up before the page, start, worsen on schedule, and respond to remediation through the same
model. The state is noise-free per step; telemetry renders it as an engineer sees it.
"""

from __future__ import annotations

import math
import sys
import zlib
from array import array
from dataclasses import InitVar, dataclass, field
from functools import lru_cache
from typing import Any, Literal

import msgspec
from msgspec import structs

from .faults import FAULTS, RECORD_KINDS, TECHNOLOGIES, FailureMode, FaultType, Remedy
from .incidents import Distraction, FaultSpec, Incident
from .models import Severity
from .topology import KINDS, dependency_order

ServiceHealth = Literal["ok", "degraded", "down"]
Outcome = Literal["heals", "relief", "disruption", "no_effect"]
# How calls to a dependency fail from the caller's side.
Cause = Literal["error", "refused", "rejected", "write", "timeout", "breaker"]

# A circuit breaker opens when this share of calls to a dependency fails; calls then fail at once.
BREAKER_OPEN = 0.5
# Queueing: a service slows as utilisation nears 1 and sheds the requests beyond its capacity.
MAX_UTILISATION = 0.97
# A restart is rolling: one pod at a time drains, and about this share of one pod's requests (those
# in flight as it stops and those sent before its readiness settles) fails during the step it runs in.
# With two to five replicas that is 3-12% of the service's requests for one step; the graded
# severity leaves it out (see `graded_impact`).
RESTART_DISRUPTION = 0.25
# An escalation is acted on by the owning team this many steps later.
ESCALATION_DELAY = 1
# Relief from a palliative remedy lasts this many steps at about this share of the fault's strength.
RELIEF_STEPS = 2
RELIEF_SHARE = 0.3
# The share of a scale-up's added capacity serving during the step it is ordered in.
SCALE_JOINING = 0.5
# Minutes of history before the page that metrics keep.
HISTORY_MINUTES = 12
# p99 of a lognormal is exp(Z99 * sigma) times its median.
Z99 = 2.326

# The severity rubric, from user-facing impact at the moment it is graded (docs/world.md).
P0_ERROR_RATE = 0.35
P0_LATENCY_MS = 5000.0
P1_ERROR_RATE = 0.05
P1_LATENCY_MS = 1500.0
SEVERITIES: tuple[Severity, ...] = ("P2", "P1", "P0")
# The rubric as agents read it (prompts, tool schemas).
SEVERITY_RUBRIC = (
    f"P0 when a user-facing service fails at least {P0_ERROR_RATE:.0%} of requests, or its p99 latency is at "
    f"least {P0_LATENCY_MS:.0f} ms, or a system of record ({' or '.join(f'a {kind}' for kind in RECORD_KINDS)}) "
    f"refuses or loses writes; P1 when it fails at least {P1_ERROR_RATE:.0%} of requests or its p99 is at least "
    f"{P1_LATENCY_MS:.0f} ms; P2 otherwise."
)


# Kept: views draw the same keys on every look (pods, versions, phrasings). Typed, so that 1 and 1.0,
# which print differently, are different keys.
@lru_cache(maxsize=1 << 15, typed=True)
def unit(*key: object) -> float:
    """A deterministic draw in [0, 1) from a key: cheap enough to call per service per step."""
    return zlib.crc32(":".join(map(str, key)).encode()) / 4294967296.0


def spread(low: float, high: float, *key: object) -> float:
    return low + (high - low) * unit(*key)


class Draws:
    """`unit(*prefix, label)` and `spread(low, high, *prefix, label)` with the prefix hashed once:
    CRC-32 runs on from the prefix's. A plan makes some two hundred draws per incident."""

    __slots__ = ("_start",)

    def __init__(self, *prefix: object) -> None:
        self._start = zlib.crc32(":".join(map(str, (*prefix, ""))).encode())

    def unit(self, label: str) -> float:
        return zlib.crc32(label.encode(), self._start) / 4294967296.0

    def spread(self, low: float, high: float, label: str) -> float:
        return low + (high - low) * self.unit(label)


_WOBBLE_KEY, _WOBBLE_STEP, _WOBBLE_CHANNEL = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D


def wobbles(key: int, step: int, channels: range) -> list[float]:
    """Per-minute noise in [-1, 1) on each channel: an integer hash of (service, minute, channel), cheap on
    every step."""
    return _mix_lanes(_channel_lanes(channels), len(channels), key * _WOBBLE_KEY + _wobble_minute(step))


def _wobble_minute(step: int) -> int:
    return (step + 1000) * _WOBBLE_STEP


_MASK32 = 0xFFFFFFFF


def _mix_lanes(packed: int, count: int, add: int) -> list[float]:
    """The hash, in [-1, 1), of each of `count` values plus `add`, the values held modulo 2**32 in 64-bit
    lanes of one integer (`_pack`). Each step of the hash is then one operation on every lane at once: a
    lane times a 30-bit constant stays within its 64 bits, and each shift is masked back into its lane.
    A plan's services' noise costs about a fifth of hashing the values one by one."""
    mask, ones = _lanes(count)
    x = (packed + (add & _MASK32) * ones) & mask
    x ^= (x >> 15) & mask
    x = (x * 0x2C1B3C6D) & mask
    x ^= (x >> 12) & mask
    x = (x * 0x297A2D39) & mask
    x ^= (x >> 15) & mask
    return [lane / 2147483648.0 - 1.0 for lane in array("Q", x.to_bytes(8 * count, sys.byteorder))]


@lru_cache(maxsize=256)
def _lanes(count: int) -> tuple[int, int]:
    """The mask of `count` 32-bit values in 64-bit lanes, and the integer with a 1 in each lane."""
    ones = sum(1 << (64 * lane) for lane in range(count))
    return ones * _MASK32, ones


def _pack(values: list[int]) -> int:
    return sum((value & _MASK32) << (64 * lane) for lane, value in enumerate(values))


@lru_cache(maxsize=16)
def _channel_lanes(channels: range) -> int:
    return _pack([channel * _WOBBLE_CHANNEL for channel in channels])


# Edges, nodes and states hold no reference cycles: the garbage collector need not track them.
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


# Structs rather than frozen dataclasses: a plan builds dozens of nodes and edges, and the simulation
# a state per service per minute; a frozen dataclass's __init__ costs several times a Struct's. The
# simulation builds states positionally (keywords cost several times as much again): a new field goes
# into `World._simulate` too, in this order.
class ServiceState(msgspec.Struct, frozen=True, gc=False):
    name: str
    p50_ms: float
    p99_ms: float
    error_rate: float
    rps: float
    cpu_pct: float
    memory_pct: float
    health: ServiceHealth
    # The share of calls to this service that fail from a caller's side, and how they fail.
    call_failure: float
    mode: FailureMode
    # Dependencies whose calls fail this service's requests: (dependency, share of requests, how).
    failing_upstreams: tuple[tuple[str, float, Cause], ...]
    # How strongly its own faults currently show (0 when healed or not yet started).
    fault_strength: float
    # Its own latency without waiting on dependencies, for trace spans.
    self_p50_ms: float
    self_p99_ms: float
    # Errors of side work (batch jobs, webhooks) included in error_rate that no caller's request meets.
    side_error: float = 0.0
    # The part of side_error a red herring's minor fault fails the service's own requests with, and how:
    # requests a trace samples, though no caller's retry budget notices them.
    minor_error: float = 0.0
    minor_mode: FailureMode = "error"
    # The share of requests that fail: error_rate without the side work, what users meet.
    request_error: float = 0.0

    @property
    def latency_ms(self) -> float:
        """The latency the rubric and the pages speak of: p99."""
        return self.p99_ms


_Loop = tuple[Node, float, float, float, float, bool, tuple[tuple[Edge, float, float], ...]]


@dataclass(frozen=True, slots=True)
class Plan:
    nodes: tuple[Node, ...]  # dependencies first
    by_name: dict[str, Node]
    healthy_rps: dict[str, float]
    # Per service, what the simulation loop needs besides the minute: (node, capacity, queueing at its
    # baseline load, queueing at healthy traffic, memory noise, whether it is a system of record, and per
    # edge (edge, share of requests a failed call fails, retry exponent)).
    loop: tuple[_Loop, ...]
    # The services' noise keys on their two channels, in the simulation's order, packed for `_mix_lanes`.
    noise: int
    # Each service's p99, and its state, at the page with nothing wrong anywhere: filled by the first world
    # built on this plan.
    healthy_p99: dict[str, float] = field(default_factory=dict)
    calm: dict[str, ServiceState] = field(default_factory=dict)


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
def _plan_for(incident_id: str, wiring: tuple[tuple[str, str, str, bool, tuple[str, ...]], ...]) -> Plan:
    """Every service's baseline and every edge's character, drawn from the incident id."""
    kinds = {name: kind for name, kind, _, _, _ in wiring}
    order = dependency_order({name: deps for name, _, _, _, deps in wiring})
    spec = {name: (kind, tech, facing, deps) for name, kind, tech, facing, deps in wiring}
    called = {dep for *_, deps in wiring for dep in deps}
    nodes: dict[str, Node] = {}
    for name in order:
        kind, tech, facing, deps = spec[name]
        profile = KINDS[kind]
        draw = Draws(incident_id, name)
        edges = []
        for dep in deps:
            dep_profile = KINDS[kinds[dep]]
            edraw = Draws(incident_id, name, dep)
            # Most requests of a service touch its database; other dependencies serve part of them.
            low = 0.65 if kinds[dep] == "database" else 0.35
            share = 1.0 / len(deps) if profile.routes else edraw.spread(low, 1.0, "share")
            styles = ("named", "named", "host", "endpoint", "bare")
            edges.append(
                Edge(
                    dep=dep,
                    share=share,
                    weight=dep_profile.caller_weight * edraw.spread(0.8, 1.0, "weight"),
                    deadline_ms=round(edraw.spread(800, 3000, "deadline"), -2),
                    retries=int(edraw.unit("retries") * 3),
                    breaker=edraw.unit("breaker") < 0.35,
                    style=styles[int(edraw.unit("style") * len(styles))],
                )
            )
        entry = draw.spread(300, 2500, "rps") if facing and name not in called else 0.0
        if not facing and name not in called:
            entry = draw.spread(5, 60, "rps")
        nodes[name] = Node(
            name=name,
            kind=kind,
            tech=tech,
            user_facing=facing,
            edges=tuple(edges),
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
    ordered = tuple(nodes[name] for name in order)
    healthy = _flow(ordered, {}, {})
    capacity = {n.name: healthy[n.name] / (max(n.cpu_pct, 5.0) / 100.0) if healthy[n.name] else 1e9 for n in ordered}
    noise = _pack([n.key * _WOBBLE_KEY + channel * _WOBBLE_CHANNEL for n in ordered for channel in (1, 2)])
    loop = tuple(_loop(n, healthy[n.name], capacity[n.name]) for n in ordered)
    return Plan(ordered, nodes, healthy, loop, noise)


def _loop(node: Node, healthy_rps: float, capacity_rps: float) -> _Loop:
    """A service's constants of the simulation loop, computed as the loop would."""
    base = _queueing(max(node.cpu_pct, 5.0) / 100.0)
    calm = _queueing(healthy_rps / capacity_rps if capacity_rps > 0 else 0.0) / base
    edges = tuple((e, e.share * e.weight, 1.0 + 0.5 * e.retries) for e in node.edges)
    return (node, capacity_rps, base, calm, 0.3 * node.noise, node.kind in RECORD_KINDS, edges)


def _flow(
    nodes: tuple[Node, ...],
    load: dict[str, float],
    shed: dict[str, float],
    healthy: dict[str, float] | None = None,
) -> dict[str, float]:
    """Requests per second reaching each service: callers first, each sending its share down.

    A surge at a service (`load`, extra requests as a share of its healthy traffic) is requests that
    come from somewhere: from its callers in proportion to what each sends it, and from outside in
    proportion to its own entry traffic. A caller carries those requests on toward the surging
    service alone, so its own request rate rises by what it forwards, and so on up to the entry
    points; the surging service serves them like any request, calling its own dependencies.
    """
    rps = {n.name: n.entry_rps for n in nodes}
    # Of the requests a service would receive with the surge and nothing shed: the share it serves
    # itself, and the share it forwards to each dependency toward a surging service.
    served: dict[str, float] = {}
    toward: dict[tuple[str, str], float] = {}
    if load:
        base = healthy or _flow(nodes, {}, {})
        need = {name: base[name] * extra for name, extra in load.items()}
        passing: dict[str, float] = {}
        callers: dict[str, list[tuple[str, float]]] = {}
        for node in nodes:
            for edge in node.edges:
                callers.setdefault(edge.dep, []).append((node.name, edge.share))
        # Dependencies first: a service's own surge and what it forwards are known before it is split.
        for node in nodes:
            wanted = need.get(node.name, 0.0)
            if wanted <= 0.0 or base[node.name] <= 0.0:
                continue
            rps[node.name] += wanted * node.entry_rps / base[node.name]
            for caller, share in callers.get(node.name, ()):
                sent = wanted * base[caller] * share / base[node.name]
                toward[(caller, node.name)] = toward.get((caller, node.name), 0.0) + sent
                passing[caller] = passing.get(caller, 0.0) + sent
                need[caller] = need.get(caller, 0.0) + sent
        served = {name: 1.0 - forwarded / (base[name] + need[name]) for name, forwarded in passing.items()}
        toward = {(caller, dep): sent / (base[caller] + need[caller]) for (caller, dep), sent in toward.items()}
    for node in reversed(nodes):
        # Shedding turns away a share of every request, the surging ones included; what passes is
        # split as planned, so a surge shed upstream arrives smaller.
        total = rps[node.name]
        if node.name in shed:
            total = min(total, shed[node.name])
        rps[node.name] = total
        normal = total * served.get(node.name, 1.0)
        for edge in node.edges:
            rps[edge.dep] += normal * edge.share + total * toward.get((node.name, edge.dep), 0.0)
    return rps


def plan(incident: Incident) -> Plan:
    wiring = tuple(
        (s.name, s.kind, _technology(incident.id, s.name, s.kind, s.tech), s.user_facing, tuple(s.depends_on))
        for s in incident.services
    )
    return _plan_for(incident.id, wiring)


def exceed(p50: float, p99: float, deadline: float) -> float:
    """The share of calls slower than a deadline, for a lognormal latency with this median and p99."""
    if p50 <= 0.0:
        return 0.0
    sigma = max(math.log(max(p99, p50 * 1.01) / p50) / Z99, 1e-6)
    return 0.5 * math.erfc(math.log(deadline / p50) / (sigma * math.sqrt(2.0)))


def fault_lead(incident: Incident, spec: FaultSpec, index: int) -> int:
    low, high = FAULTS[spec.type].lead
    return spec.lead if spec.lead is not None else low + int(unit(incident.id, index, "lead") * (high - low + 1))


@dataclass(slots=True)
class _FaultRun:
    spec: FaultSpec
    kind: FaultType
    lead: int
    # The share of its strength a fixed fault keeps over the minute its fix lands in; none after it,
    # so its lines, events, failing requests and metrics end together (telemetry ends its lines at the fix).
    recovery: float
    healed_at: int | None = None
    relief: tuple[int, int] | None = None

    def strength(self, step: int) -> float:
        return self._course(step, remedied=True)

    def demand(self, step: int) -> float:
        """The strength of the extra requests the fault brings (its `load`): they come from outside
        the service, so no remedy of the service ends them; shedding turns them away where they arrive."""
        return self._course(step, remedied=False)

    def _course(self, step: int, remedied: bool) -> float:
        spec = self.spec
        if step < spec.onset:
            if spec.onset > 0 or step < -self.lead:
                return 0.0
            # Building up before the page.
            return spec.intensity * (step + self.lead + 1) / (self.lead + 1)
        worse = spec.intensify_at is not None and step >= spec.intensify_at
        if not remedied:
            return max(spec.intensity, spec.peak) if worse else spec.intensity
        if worse and self.healed_at is not None and self.healed_at <= (spec.intensify_at or 0):
            worse = False
        strength = max(spec.intensity, spec.peak) if worse else spec.intensity
        if self.healed_at is not None and step >= self.healed_at:
            since = step - self.healed_at
            strength *= self.recovery if since == 0 else 0.0
        if self.relief is not None and self.relief[0] <= step < self.relief[1]:
            strength *= RELIEF_SHARE
        return strength


_PREPAGE: dict[bytes, dict[int, dict[str, ServiceState]]] = {}
# Pages of untouched steps, by incident: they depend on the states alone, not on the episode's seed.
_PAGES: dict[bytes, dict[int, list[Any]]] = {}
_PREPAGE_KEPT = 256


class _Steps(dict[int, dict[str, ServiceState]]):
    """Simulated states by step. Until the first remedy the world is the incident's alone, so those
    steps go to a store shared by every episode of the incident; later ones are this episode's."""

    def __init__(self, shared: dict[int, dict[str, ServiceState]], key: bytes) -> None:
        super().__init__()
        self.shared = shared
        self.key = key
        self.touched: int | None = None  # the step of the first remedy

    def _own(self, step: int) -> bool:
        return self.touched is not None and step >= self.touched

    def get(self, step: int, default: None = None) -> dict[str, ServiceState] | None:  # type: ignore[override]
        return super().get(step) if self._own(step) else self.shared.get(step)

    def __setitem__(self, step: int, states: dict[str, ServiceState]) -> None:
        if self._own(step):
            super().__setitem__(step, states)
        else:
            self.shared[step] = states

    def forget_from(self, step: int) -> None:
        if self.touched is None:
            self.touched = step
        for later in [s for s in self if s >= step]:
            del self[later]


@dataclass(frozen=True, slots=True)
class Remediation:
    step: int
    remedy: Remedy
    service: str
    outcome: Outcome


@dataclass(slots=True)
class World:
    """The simulated system of one episode, at `step` (0 is the page; history runs before it)."""

    incident: Incident
    step: int = 0
    history: list[Remediation] = field(default_factory=list)
    plan: Plan = field(init=False)
    _runs: list[_FaultRun] = field(default_factory=list)
    _capacity: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    _shed: dict[str, int] = field(default_factory=dict)
    _restarts: dict[str, set[int]] = field(default_factory=dict)
    # Red herrings with side effects: (distraction, first step it shows, strength).
    _side: tuple[tuple[Distraction, int, float], ...] = ()
    _cache: _Steps = field(init=False)
    _key: bytes = b""
    # States of steps with restarts as they would be without the restarts' own disruption, for grading.
    _undisrupted: dict[int, dict[str, ServiceState]] = field(default_factory=dict)
    # Faults' strengths by (step, remedies applied): only a remedy changes a fault's course.
    _strengths: dict[tuple[int, int], tuple[float, ...]] = field(default_factory=dict)
    # Whether its untouched states go to the store every episode of the incident shares: not for a
    # world no episode plays (a calm world, a fault alone).
    shared: InitVar[bool] = True

    def __post_init__(self, shared: bool) -> None:
        incident = self.incident
        self.plan = plan(incident)  # cached: every world of one wiring shares it
        if not self.plan.healthy_p99:
            # Placeholders first: the calm world built here shares this plan.
            self.plan.healthy_p99.update({node.name: math.inf for node in self.plan.nodes})
            calm_world = World(structs.replace(incident, faults=[], distractions=[]), shared=False)
            calm = calm_world.states_at(0)
            self.plan.healthy_p99.update({name: state.p99_ms for name, state in calm.items()})
            # Its health read no healthy p99, but a calm service is never slow against itself: the same states.
            self.plan.calm.update(calm)
        self._cache = _Steps(self._prepage() if shared else {}, self._key)
        self._runs = [
            _FaultRun(
                spec,
                FAULTS[spec.type],
                fault_lead(incident, spec, index),
                spread(0.35, 0.6, incident.id, index, "r1"),
            )
            for index, spec in enumerate(incident.faults)
        ]
        self._side = tuple(
            (d, -distraction_onset(incident.id, index), distraction_strength(d, incident.id, index))
            for index, d in enumerate(incident.distractions)
            if d.kind in _SIDE_KINDS
        )

    @property
    def states(self) -> dict[str, ServiceState]:
        return self.states_at(self.step)

    def states_at(self, step: int) -> dict[str, ServiceState]:
        states = self._cache.get(step)
        if states is None:
            states = self._cache[step] = self._simulate(step)
        return states

    def shared_pages(self, step: int) -> dict[int, list[Any]] | None:
        """Where the pages of an untouched step are kept for every episode of the incident (None once
        a remedy has changed this world at or before that step, or once the incident's shared states
        were evicted: pages kept then would outlive their eviction)."""
        key = self._cache.key
        return None if self._cache._own(step) or key not in _PREPAGE else _PAGES.setdefault(key, {})

    def _prepage(self) -> dict[int, dict[str, ServiceState]]:
        """States before any remedy depend on the incident alone: shared by every episode that plays it."""
        key = msgspec.json.encode(self.incident)
        shared = _PREPAGE.get(key)
        if shared is None:
            if len(_PREPAGE) >= _PREPAGE_KEPT:
                _PAGES.pop(next(iter(_PREPAGE)), None)
                _PREPAGE.pop(next(iter(_PREPAGE)))
            shared = _PREPAGE[key] = {}
        self._key = key
        return shared

    def advance(self) -> None:
        self.step += 1

    @property
    def root_causes(self) -> frozenset[str]:
        return frozenset(fault.service for fault in self.incident.faults)

    def capacity(self, service: str, step: int | None = None) -> float:
        """How many times its original size a service has been scaled to, at a step (now by default)."""
        at = self.step if step is None else step
        factor = 1.0
        for since, times in self._capacity.get(service, ()):
            if since <= at:
                # New replicas join over the step they are added in, as a fix takes effect over steps.
                factor *= times if since < at else 1.0 + (times - 1.0) * SCALE_JOINING
        return factor

    def restarts(self, service: str, step: int | None = None) -> list[int]:
        at = self.step if step is None else step
        return sorted(s for s in self._restarts.get(service, ()) if s <= at)

    def rolled_back(self, service: str, step: int | None = None) -> bool:
        at = self.step if step is None else step
        return any(e.service == service and e.remedy == "rollback" and e.step <= at for e in self.history)

    def remedied(self, remedy: Remedy, service: str, step: int | None = None) -> int | None:
        """The step a remedy was last applied to a service, up to a step (now by default)."""
        at = self.step if step is None else step
        steps = [e.step for e in self.history if e.service == service and e.remedy == remedy and e.step <= at]
        return max(steps) if steps else None

    def change_shipped(self, service: str) -> bool:
        """Whether a recent change on this service can be rolled back."""
        if self.rolled_back(service):
            return False
        return any(run.spec.service == service and run.kind.change for run in self._runs) or any(
            d.kind == "recent_deploy" and d.service == service for d in self.incident.distractions
        )

    def strengths(self, step: int) -> tuple[float, ...]:
        """Every fault's strength at a step, to two places: what a view's content follows besides noise."""
        key = (step, len(self.history))
        found = self._strengths.get(key)
        if found is None:
            found = self._strengths[key] = tuple(round(run.strength(step), 2) for run in self._runs)
        return found

    def demands(self, step: int) -> tuple[float, ...]:
        """The strength of every fault's extra requests at a step, which its fix does not end."""
        return tuple(round(run.demand(step), 2) for run in self._runs if run.kind.load)

    def healed_at(self, index: int) -> int | None:
        """The step the fix of the incident's fault `index` took effect (an escalation's a step late)."""
        return self._runs[index].healed_at

    def fault_runs(self, service: str, step: int) -> list[tuple[FaultType, float]]:
        """The faults live on a service at a step, with their strengths."""
        return [(run.kind, s) for run in self._runs if run.spec.service == service and (s := run.strength(step)) > 0]

    def remediate(self, remedy: Remedy, service: str) -> Outcome:
        """Apply a remedy now. The outcome is the world's truth, for grading; agents see telemetry."""
        step = self.step
        outcome: Outcome = "no_effect"
        for run in self._runs:
            if run.spec.service != service or run.healed_at is not None:
                continue
            if remedy == run.kind.fix or remedy in run.kind.acceptable:
                run.healed_at = step + (ESCALATION_DELAY if remedy == "escalate" else 0)
                outcome = "heals"
            elif remedy in run.kind.relief and outcome != "heals":
                run.relief = (step, step + RELIEF_STEPS)
                outcome = "relief"
        if remedy == "restart":
            self._restarts.setdefault(service, set()).add(step)
            if outcome == "no_effect":
                outcome = "disruption"
        elif remedy == "scale_up":
            self._capacity.setdefault(service, []).append((step, 2.0))
        elif remedy == "shed_load":
            self._shed.setdefault(service, step)
        self._cache.forget_from(step)
        for later in [s for s in self._undisrupted if s >= step]:
            del self._undisrupted[later]
        self.history.append(Remediation(step, remedy, service, outcome))
        return outcome

    def restored(self) -> bool:
        """Every fault's fix in effect and every user-facing service back within its objectives."""
        if any(run.healed_at is None or run.healed_at > self.step for run in self._runs):
            return False
        # Side work failing (a red herring's batch job or webhook) does not keep users from being served.
        states = self.states
        facing = [states[n.name] for n in self.plan.nodes if n.user_facing]
        return max(s.request_error for s in facing) < P1_ERROR_RATE and max(s.p99_ms for s in facing) < P1_LATENCY_MS

    def user_facing_impact(self, step: int | None = None) -> tuple[float, float]:
        """Worst error rate and worst p99 latency of user-facing services at a step (now by default): what
        their metrics show, the quantities of the rubric."""
        return _impact(self.plan, self.states_at(self.step if step is None else step))

    def graded_impact(self, step: int) -> tuple[float, float]:
        """The incident's user-facing impact at a step, for the severity: what users meet there, less
        the brief disruption of the responder's own restarts (a remedy the responder chose is not the
        incident's impact). Faults that worsen, and faults a remedy did not touch, still count."""
        if not any(step in steps for steps in self._restarts.values()):
            return self.user_facing_impact(step)
        states = self._undisrupted.get(step)
        if states is None:
            states = self._undisrupted[step] = self._simulate(step, disrupt=False)
        return _impact(self.plan, states)

    def data_at_risk(self, through: int) -> bool:
        kinds = {s.name: s.kind for s in self.incident.services}
        return any(run.kind.data_at_risk(kinds[run.spec.service]) and run.spec.onset <= through for run in self._runs)

    def severity(self, through: int | None = None) -> Severity:
        """The rubric applied to the incident's worst user-facing impact from the page up to step
        `through` (now by default), restarts' own disruption left out (`graded_impact`)."""
        last = self.step if through is None else through
        at_risk = self.data_at_risk(last)
        return max((rubric(*self.graded_impact(step), at_risk) for step in range(last + 1)), key=SEVERITIES.index)

    def _simulate(self, step: int, disrupt: bool = True) -> dict[str, ServiceState]:
        # The hot loop of the core (every step simulates a minute of every service): per-service
        # constants come precomputed from the plan, and the arithmetic is the model's, in its order.
        plan_ = self.plan
        live: dict[str, list[tuple[FaultType, float]]] = {}
        for run in self._runs:
            strength = run.strength(step)
            if strength > 0.0:
                live.setdefault(run.spec.service, []).append((run.kind, strength))
        side = _side_effects(self._side, step)
        load: dict[str, float] = {}
        for run in self._runs:
            if run.kind.load and (demand := run.demand(step)) > 0.0:
                load[run.spec.service] = load.get(run.spec.service, 0.0) + run.kind.load * demand
        shed = {
            name: 1.2 * plan_.healthy_rps[name] * self.capacity(name, step)
            for name, since in self._shed.items()
            if since <= step
        }
        rps = _flow(plan_.nodes, load, shed, plan_.healthy_rps) if load or shed else plan_.healthy_rps
        calm = not load and not shed
        restarting = {name for name, steps in self._restarts.items() if step in steps} if disrupt else set()
        scaled = self._capacity
        healthy_p99 = plan_.healthy_p99
        healthy_rps = plan_.healthy_rps
        # At the page, a service nothing touches (no fault or side work of its own, its usual traffic, every
        # dependency answering its calls as when calm) is in its calm state: the same arithmetic on the
        # same noise.
        quiet = plan_.calm if step == 0 and plan_.calm else None
        wobble = _mix_lanes(plan_.noise, 2 * len(plan_.loop), _wobble_minute(step))
        states: dict[str, ServiceState] = {}
        for (node, capacity_rps, base_queueing, calm_queueing, memory_noise, of_record, edges), w1, w2 in zip(
            plan_.loop, wobble[::2], wobble[1::2], strict=True
        ):
            name = node.name
            noise = node.noise
            n1 = 1.0 + noise * w1
            nw2 = noise * w2
            n2 = 1.0 + nw2
            faults = live.get(name, ())
            requests = rps[name]
            if (
                quiet is not None
                and not faults
                and requests == healthy_rps[name]
                and name not in side
                and name not in restarting
                and name not in scaled
                and name not in shed
                and all(_answers_alike(states[edge.dep], quiet[edge.dep]) for edge, _, _ in edges)
            ):
                states[name] = quiet[name]
                continue
            strength_total = 0.0
            if faults or not calm or name in scaled:
                capacity = capacity_rps * self.capacity(name, step) if name in scaled else capacity_rps
                for kind, strength in faults:
                    strength_total += strength
                    capacity *= 1.0 - kind.capacity_loss * strength
                utilisation = requests / capacity if capacity > 0 else 0.0
                queueing = _queueing(utilisation) / base_queueing
            else:
                utilisation = requests / capacity_rps if capacity_rps > 0 else 0.0
                queueing = calm_queueing
            shed_share = 1.0 - 1.0 / utilisation if utilisation > 1.0 else 0.0
            self_p50 = node.p50_ms * queueing * n1
            self_p99 = self_p50 * node.tail * n2
            if requests:
                cpu = 100.0 * utilisation * n2
                if not cpu < 99.0:
                    cpu = 99.0
            else:
                cpu = node.cpu_pct
            memory = node.memory_pct * (1.0 + memory_noise * w1)
            own_ok = (1.0 - node.error_rate * (1.0 + w1)) * (1.0 - shed_share)
            silent = 0.0
            health: ServiceHealth | None = None
            mode: FailureMode = "error"
            strongest = 0.0
            for kind, strength in faults:
                own_ok *= 1.0 - min(1.0, kind.error_rate * strength * n1)
                silent += kind.caller_failure * strength
                self_p50 += kind.latency_ms * strength * 0.45
                self_p99 += kind.latency_ms * strength * (1.4 + nw2)
                if kind.cpu_pct is not None:
                    cpu += (kind.cpu_pct - cpu) * strength
                if kind.memory_pct is not None:
                    memory += (kind.memory_pct * (1.0 - 0.01 * (1 + w1)) - memory) * min(1.0, strength)
                if strength > strongest:
                    strongest = strength
                    health = kind.health if strength >= 0.5 else "degraded"
                    mode = kind.failure
                    if mode == "write" and not of_record:
                        mode = "refused"
            if name in side:
                extra_cpu, extra_error, minor_error, minor_mode = side[name]
                cpu = max(cpu, extra_cpu)
                if minor_mode == "write" and not of_record:
                    minor_mode = "refused"
            else:
                extra_error, minor_error, minor_mode = 0.0, 0.0, "error"
            if name in restarting:
                own_ok *= 1.0 - RESTART_DISRUPTION / node.replicas * n1
            p50, p99 = self_p50, self_p99
            success = 1.0
            worst_wait = 0.0
            failing: list[tuple[str, float, Cause]] = []
            for edge, weighted_share, retry_power in edges:
                dep = states[edge.dep]
                refused = dep.call_failure
                dep_p50, dep_p99 = dep.p50_ms, dep.p99_ms
                # Calls time out only when the dependency's tail reaches the deadline.
                deadline = edge.deadline_ms
                timed_out = exceed(dep_p50, dep_p99, deadline) if dep_p99 * 2 > deadline else 0.0
                failed = 1.0 - (1.0 - refused) * (1.0 - timed_out)
                if edge.breaker and failed >= BREAKER_OPEN:
                    seen, wait50, wait99, cause = 1.0, 1.0, 2.0, "breaker"
                else:
                    # Retries help against scattered failures, not against a refusal or a dependency
                    # that is down; failures are correlated, so each retry helps less than an independent draw.
                    retried = edge.retries if dep.mode not in ("rejected", "refused") else 0
                    seen = failed ** (retry_power if retried else 1.0)
                    extra = 1.0 + retried * failed
                    wait50 = (deadline if deadline < dep_p50 else dep_p50) * extra
                    wait99 = (deadline if deadline < dep_p99 else dep_p99) * extra
                    cause = "timeout" if timed_out > refused else dep.mode
                share = weighted_share * seen
                success *= 1.0 - share
                p50 += edge.share * wait50
                wait = wait99 if edge.share >= 0.5 else wait50
                if wait > worst_wait:
                    worst_wait = wait
                if share > 0.002:
                    failing.append((edge.dep, share, cause))
            p99 += worst_wait
            error_rate = 1.0 - own_ok * success
            if failing:
                cpu = min(99.0, cpu + 8.0 * (1.0 - success))
            reported = 1.0 - (1.0 - error_rate) * (1.0 - extra_error) if extra_error else error_rate
            floor = p50 * 1.2
            # Clamps spelled out rather than min() and max(): the same values, without two calls per bound.
            cpu = cpu if cpu < 99.5 else 99.5
            memory = memory if memory < 99.9 else 99.9
            request_error = error_rate if error_rate < 1.0 else 1.0
            call_failure = error_rate + silent
            # Positional: a Struct built from keywords costs several times as much, once per service per minute.
            states[name] = ServiceState(
                name,
                p50,
                floor if floor > p99 else p99,
                reported if reported < 1.0 else 1.0,
                requests,
                cpu if cpu > 0.5 else 0.5,
                memory if memory > 1.0 else 1.0,
                health or _health(error_rate, p99, healthy_p99.get(name, p99)),
                call_failure if call_failure < 1.0 else 1.0,
                mode,
                tuple(failing),
                strength_total,
                self_p50,
                self_p99,
                extra_error,
                minor_error,
                minor_mode,
                request_error,
            )
        return states


def _answers_alike(state: ServiceState, other: ServiceState) -> bool:
    """Whether a dependency's callers meet the same calls in both states: all a caller reads of it."""
    return state is other or (
        state.call_failure == other.call_failure
        and state.p50_ms == other.p50_ms
        and state.p99_ms == other.p99_ms
        and state.mode == other.mode
    )


def _impact(plan_: Plan, states: dict[str, ServiceState]) -> tuple[float, float]:
    facing = [states[n.name] for n in plan_.nodes if n.user_facing]
    return max(s.error_rate for s in facing), max(s.p99_ms for s in facing)


def _queueing(utilisation: float) -> float:
    rho = min(utilisation, MAX_UTILISATION)
    return 1.0 + 0.5 * rho * rho / (1.0 - rho)


def distraction_strength(distraction: Distraction, incident_id: str, index: int) -> float:
    if distraction.strength is not None:
        return distraction.strength
    return spread(0.3, 1.0, incident_id, index, distraction.kind, "strength")


def distraction_onset(incident_id: str, index: int) -> int:
    """Minutes before the page a red herring began: drawn like a fault's lead, so onsets overlap."""
    return 1 + int(unit(incident_id, index, "onset") * 14)


_SIDE_KINDS = frozenset({"noisy_neighbour", "flaky_errors", "minor_fault"})


def _side_effects(
    side: tuple[tuple[Distraction, int, float], ...],
    step: int,
) -> dict[str, tuple[float, float, float, FailureMode]]:
    """CPU and side-path error rates that red herrings add, by service, with a minor fault's share of
    those errors and how its requests fail."""
    found: dict[str, tuple[float, float, float, FailureMode]] = {}
    for d, start, strength in side:
        if step < start:
            continue
        cpu, error, minor, mode = found.get(d.service, (0.0, 0.0, 0.0, "error"))
        if d.kind == "noisy_neighbour":
            cpu = max(cpu, 60.0 + 38.0 * strength)
        elif d.kind == "minor_fault":
            # A real fault, weak and on a side path: its own signals show, its callers do not suffer.
            kind = FAULTS[d.fault or "slow_query"]
            minor = max(minor, kind.error_rate * 0.25 * strength)
            error = max(error, minor)
            mode = kind.failure if minor > 0.0 else mode
            cpu = max(cpu, (kind.cpu_pct or 0.0) * 0.8 * strength)
        else:
            # Failures on a side path (a batch job, a partner webhook) that callers never hit.
            error = max(error, 0.03 + 0.4 * strength)
        found[d.service] = (cpu, error, minor, mode)
    return found


def rubric(error_rate: float, latency_ms: float, data_at_risk: bool) -> Severity:
    """P0: users mostly failing or stalled, or a system of record losing writes; P1 major degradation; P2 minor."""
    if data_at_risk or error_rate >= P0_ERROR_RATE or latency_ms >= P0_LATENCY_MS:
        return "P0"
    if error_rate >= P1_ERROR_RATE or latency_ms >= P1_LATENCY_MS:
        return "P1"
    return "P2"


def _health(error_rate: float, p99_ms: float, healthy_p99_ms: float) -> ServiceHealth:
    if error_rate >= 0.9:
        return "down"
    if error_rate >= P1_ERROR_RATE or p99_ms >= 3 * healthy_p99_ms + 200:
        return "degraded"
    return "ok"
