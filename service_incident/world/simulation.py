"""The minute simulation: every service's state in one minute, from the plan and the world's conditions.

Requests flow from the entry points down the dependency graph: a caller sends a share of its requests
to each dependency, waits up to its deadline, retries failed calls a few times, and may trip a circuit
breaker. Its error rate and latency follow from those calls and from its own faults; its CPU from its
load against its capacity (queueing slows it down as it saturates, and past capacity it sheds
requests). The state is noise-free per step; telemetry renders it as an engineer sees it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from types import ModuleType
from typing import TYPE_CHECKING, Literal

import msgspec

from ..faults import FailureMode, FaultType
from . import lognormal, traffic
from .draws import mix, wobble_minute
from .lognormal import exceed
from .rubric import P1_ERROR_RATE
from .traffic import flow, queueing

if TYPE_CHECKING:
    from .plan import Edge, LoopConstants, PlainConstants, Plan

ServiceHealth = Literal["ok", "degraded", "down"]
# How calls to a dependency fail from the caller's side.
Cause = Literal["error", "refused", "rejected", "write", "handshake", "timeout", "breaker"]
# A red herring's side effects on a service: extra CPU, side-path error rate, the part of it a minor
# fault fails the service's own requests with, and how those fail.
SideEffect = tuple[float, float, float, FailureMode]

# A circuit breaker opens when this share of calls to a dependency fails; calls then fail at once.
BREAKER_OPEN = 0.5
# A restart is rolling: one pod at a time drains, and about this share of one pod's requests (those
# in flight as it stops and those sent before its readiness settles) fails during the step it runs in.
# With two to five replicas that is 3-12% of the service's requests for one step; the graded
# severity leaves it out (see `World.graded_impact`).
RESTART_DISRUPTION = 0.25


# Structs rather than frozen dataclasses: the simulation builds a state per service per minute, and
# a frozen dataclass's __init__ costs several times a Struct's. States are built positionally (keywords
# cost several times as much again): a new field goes into `_service_state` too, in this order. They
# hold no reference cycles: the garbage collector need not track them.
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
    # Errors of background work (a batch job, a webhook delivery) that no request waits on: not in
    # error_rate, which counts requests alone; the metrics' breakdown shows them on the job's own row.
    side_error: float = 0.0
    # The part of side_error a red herring's minor fault fails its background work with, and how: the
    # work a trace starting at the service samples, though no caller's request meets it.
    minor_error: float = 0.0
    minor_mode: FailureMode = "error"
    # Whether its own failures fall on its writes alone: a fault in the code that parses their payloads.
    fails_writes: bool = False
    # How its calls to its outside party end when its own failures are that party's ("" otherwise).
    partner_failure: str = ""

    @property
    def latency_ms(self) -> float:
        """The latency the rubric and the pages speak of: p99."""
        return self.p99_ms


# A Struct, built once per simulated minute: a frozen dataclass's __init__ costs several times as much.
class Minute(msgspec.Struct, frozen=True, gc=False):
    """The world's conditions in one minute: all the simulation takes besides the plan."""

    step: int
    # The faults live on each service, with their strengths.
    live: Mapping[str, Sequence[tuple[FaultType, float]]]
    side: Mapping[str, SideEffect]
    # Extra requests that faults bring to a service, as a share of its healthy traffic.
    load: Mapping[str, float]
    # The request rate each service shedding load admits.
    shed: Mapping[str, float]
    # Services restarting in this minute (none when grading leaves the restarts' disruption out).
    restarting: AbstractSet[str]
    # How many times its original capacity each service ever scaled up has at this step.
    scaled: Mapping[str, float]
    # Extra calls on a caller's edge to a dependency, as a multiple of its usual ones (see
    # `FaultType.fanout`): by (caller, dependency).
    fanout: Mapping[tuple[str, str], float] = {}


class Rhythm(msgspec.Struct, frozen=True, gc=False):
    """A service's everyday movement that nothing wrong causes, as production metrics move: its heap
    filling between garbage collections, its cache refilling after keys expired in a wave, a batch
    window's CPU and memory, and memory that follows the requests in flight. It stays below the pages'
    thresholds (`MOVEMENT_CPU`, `MOVEMENT_MEMORY`)."""

    healthy_rps: float
    # Points of memory the heap grows by over one collection cycle of this many minutes (0: no sawtooth).
    gc_points: float = 0.0
    gc_minutes: float = 1.0
    gc_phase: float = 0.0
    # Points of memory refilled after a wave of expiries at minute `fill_at`, at this time constant.
    fill_points: float = 0.0
    fill_at: float = 0.0
    fill_minutes: float = 1.0
    # A batch window: its start, length and the CPU and memory points it adds (0 minutes: none).
    batch_at: float = 0.0
    batch_minutes: float = 0.0
    batch_cpu: float = 0.0
    batch_memory: float = 0.0
    # Points of memory per unit of extra traffic over the healthy rate.
    traffic_memory: float = 0.0

    def at(self, minute: int, requests: float) -> tuple[float, float]:
        """The CPU and memory points this movement adds at a minute."""
        memory = 0.0
        cpu = 0.0
        if self.gc_points:
            memory += self.gc_points * (((minute + self.gc_phase) % self.gc_minutes) / self.gc_minutes)
        if self.fill_points and minute >= self.fill_at:
            memory -= self.fill_points * math.exp(-(minute - self.fill_at) / self.fill_minutes)
        if self.batch_minutes:
            ramp = min(minute - self.batch_at, self.batch_at + self.batch_minutes - minute) / BATCH_RAMP_MINUTES
            if ramp > 0.0:
                ramp = ramp if ramp < 1.0 else 1.0
                cpu += self.batch_cpu * ramp
                memory += self.batch_memory * ramp
        if self.traffic_memory and self.healthy_rps:
            extra = requests / self.healthy_rps - 1.0
            memory += self.traffic_memory * (extra if extra < TRAFFIC_MEMORY_CAP else TRAFFIC_MEMORY_CAP)
        return cpu, memory


# A batch window's CPU and memory rise and fall over this many minutes.
BATCH_RAMP_MINUTES = 2.0
# Extra traffic beyond this share of the healthy rate adds no more memory (the pools are full).
TRAFFIC_MEMORY_CAP = 0.5
# Everyday movement lifts CPU and memory no higher than these, well below the pages' thresholds.
MOVEMENT_CPU = 80.0
MOVEMENT_MEMORY = 85.0


# The page with nothing wrong anywhere: the plan's calm baseline.
CALM_MINUTE = Minute(0, {}, {}, {}, {}, frozenset(), {})


def simulate(
    plan: Plan,
    minute: Minute,
    only: AbstractSet[str] | None = None,
    faultless: Mapping[str, ServiceState] | None = None,
) -> dict[str, ServiceState]:
    """Every service's state in one minute, dependencies first; with `only`, just those services (they
    must include everything they call). `faultless`, if known, is every service's state at the step in
    the same world without its faults and remedies (its red herrings alike)."""
    # The hot loop of the core (every step simulates a minute of every service): per-service
    # constants come precomputed from the plan, and the arithmetic is the model's, in its order.
    load, shed, fanout = minute.load, minute.shed, minute.fanout
    healthy_p99 = plan.healthy_p99
    constants = _step_constants(plan, minute.step)
    traffic = plan.traffic(minute.step)
    rps: Mapping[str, float]
    if load or shed or fanout:
        rps = _at_traffic(flow(plan.nodes, load, shed, plan.healthy_rps, fanout), traffic)
    else:
        rps = constants.calm_rps
    calm = not load and not shed and not fanout and traffic == 1.0
    live, side, restarting, scaled = minute.live, minute.side, minute.restarting, minute.scaled
    # A service nothing touches (no fault or side work of its own, its calm traffic, every dependency
    # answering its calls as when calm) is in its calm state at the step, where that is known: the same
    # arithmetic on the same noise. (With traffic at the page's, the queueing a calm world takes from the
    # plan is the one computed from the same quotient.) In the same world without faults, the red
    # herrings' side work is the same as here: a service no fault or remedy touches is in its state there.
    quiet = _known_calm(plan, minute.step) if faultless is None else faultless
    touched: AbstractSet[str] = frozenset()
    if faultless is not None:
        touched = live.keys() | restarting | scaled.keys() | shed.keys()
    elif quiet is not None:
        touched = live.keys() | side.keys() | restarting | scaled.keys() | shed.keys()
    states = minute_states(plan.loop, constants.w1, constants.w2, minute, rps, only, quiet, touched, calm, healthy_p99)
    if quiet is None and only is None and plan.calm and _nothing_wrong(minute):
        plan.calm_by_step[minute.step] = states
    return states


def _minute_states(
    loop: tuple[LoopConstants, ...],
    w1s: tuple[float, ...],
    w2s: tuple[float, ...],
    minute: Minute,
    rps: Mapping[str, float],
    only: AbstractSet[str] | None,
    quiet: Mapping[str, ServiceState] | None,
    touched: AbstractSet[str],
    calm: bool,
    healthy_p99: Mapping[str, float],
) -> dict[str, ServiceState]:
    """`simulate`'s loop: the state of each service (of those in `only`, if given) at request rates `rps`,
    dependencies first; one that is not `touched`, at its `quiet` state's rate, its dependencies answering
    as there, in its `quiet` state."""
    live, side, restarting, scaled = minute.live, minute.side, minute.restarting, minute.scaled
    states: dict[str, ServiceState] = {}
    # Whether some service simulated so far answers its callers otherwise than when calm: until one
    # does, every dependency answers as when calm.
    answers_differ = False
    for constants, w1, w2 in zip(loop, w1s, w2s, strict=True):
        name = constants[0].name
        if only is not None and name not in only:
            continue
        requests = rps[name]
        if (
            quiet is not None
            and name not in touched
            and requests == (calm_state := quiet[name]).rps
            and (not answers_differ or _answered_as_when_calm(constants[6], states, quiet))
        ):
            states[name] = calm_state
            continue
        state = states[name] = _service_state(
            constants,
            minute.step,
            requests,
            w1,
            w2,
            live.get(name, ()),
            scaled.get(name),
            side.get(name),
            name in restarting,
            calm,
            healthy_p99,
            states,
        )
        if quiet is not None and not answers_differ:
            answers_differ = not _answers_alike(state, quiet[name])
    return states


def calm_states(plan: Plan, step: int) -> Mapping[str, ServiceState]:
    """Every service's state at a step with nothing wrong anywhere: simulated once per plan, and then
    the state of every service on no fault's path in any world of the plan at that step."""
    return _known_calm(plan, step) or simulate(plan, msgspec.structs.replace(CALM_MINUTE, step=step))


def _known_calm(plan: Plan, step: int) -> Mapping[str, ServiceState] | None:
    """The calm world's states at a step, if simulated already (the page's come with the plan)."""
    return (plan.calm if step == 0 else plan.calm_by_step.get(step)) or None


class StepConstants(msgspec.Struct, frozen=True, gc=False):
    """What a step's simulation takes from the plan, the same for every world of it at that step. Not
    tracked by the garbage collector: a plan keeps one per step it simulated, and holds nothing that
    could lead back to it."""

    # Each service's two noise draws of the minute, in the plan's loop order: floats alone, which the
    # collector stops tracking, where rows holding the loop constants would stay tracked.
    w1: tuple[float, ...]
    w2: tuple[float, ...]
    # Every service's request rate with nothing wrong anywhere.
    calm_rps: Mapping[str, float]


def _step_constants(plan: Plan, step: int) -> StepConstants:
    found = plan.step_constants.get(step)
    if found is None:
        wobble = mix(plan.noise, wobble_minute(step))
        rps = _at_traffic(plan.healthy_rps, plan.traffic(step))
        found = plan.step_constants[step] = StepConstants(tuple(wobble[::2]), tuple(wobble[1::2]), rps)
    return found


def _at_traffic(rps: Mapping[str, float], traffic: float) -> Mapping[str, float]:
    """Request rates with the entry traffic at `traffic` times the page's."""
    return rps if traffic == 1.0 else {name: value * traffic for name, value in rps.items()}


def reached(minute: Minute) -> bool:
    """Whether a fault, a surge or a remedy is in a minute: without one, only red herrings' side work
    can set it apart from the calm world's, and it is the same world's without its faults."""
    return bool(minute.live or minute.load or minute.shed or minute.restarting or minute.scaled or minute.fanout)


def _nothing_wrong(minute: Minute) -> bool:
    """Whether a minute has no fault, red herring, surge or remedy anywhere: the calm world's."""
    return not minute.side and not reached(minute)


# Runs once per service per simulated minute: splitting it further costs measurably on that path.
def _service_state(  # noqa: C901
    constants: LoopConstants,
    step: int,
    requests: float,
    w1: float,
    w2: float,
    faults: Sequence[tuple[FaultType, float]],
    scale: float | None,
    side: SideEffect | None,
    restarting: bool,
    calm: bool,
    healthy_p99: Mapping[str, float],
    states: dict[str, ServiceState],
) -> ServiceState:
    """One service's state in the minute, its dependencies' states known (`states`)."""
    node, capacity_rps, base_queueing, calm_queueing, memory_noise, of_record, edges, rhythm, _ = constants
    name = node.name
    noise = node.noise
    n1 = 1.0 + noise * w1
    nw2 = noise * w2
    n2 = 1.0 + nw2
    strength_total = 0.0
    if faults or not calm or scale is not None:
        capacity = capacity_rps * scale if scale is not None else capacity_rps
        for kind, strength in faults:
            strength_total += strength
            capacity *= 1.0 - kind.capacity_loss * strength
        utilisation = requests / capacity if capacity > 0 else 0.0
        slowdown = queueing(utilisation) / base_queueing
    else:
        utilisation = requests / capacity_rps if capacity_rps > 0 else 0.0
        slowdown = calm_queueing
    shed_share = 1.0 - 1.0 / utilisation if utilisation > 1.0 else 0.0
    self_p50 = node.p50_ms * slowdown * n1
    self_p99 = self_p50 * node.tail * n2
    if requests:
        cpu = 100.0 * utilisation * n2
        if not cpu < 99.0:
            cpu = 99.0
    else:
        cpu = node.cpu_pct
    memory = node.memory_pct * (1.0 + memory_noise * w1)
    moved_cpu, moved_memory = rhythm.at(step, requests)
    if moved_cpu > 0.0:
        cpu = min(cpu + moved_cpu, max(cpu, MOVEMENT_CPU))
    memory = min(memory + moved_memory, max(memory, MOVEMENT_MEMORY))
    own_ok = (1.0 - node.error_rate * (1.0 + w1)) * (1.0 - shed_share)
    silent = 0.0
    health: ServiceHealth | None = None
    mode: FailureMode = "error"
    fails_writes = False
    partner_failure = ""
    if faults:
        own_ok, silent, self_p50, self_p99, cpu, memory, health, mode, fails_writes, partner_failure = _fault_effects(
            faults, n1, nw2, w1, of_record, own_ok, self_p50, self_p99, cpu, memory
        )
    if side is not None:
        extra_cpu, extra_error, minor_error, minor_mode = side
        cpu = max(cpu, extra_cpu)
        if minor_mode == "write" and not of_record:
            minor_mode = "refused"
    else:
        extra_error, minor_error, minor_mode = 0.0, 0.0, "error"
    if restarting:
        own_ok *= 1.0 - RESTART_DISRUPTION / node.replicas * n1
    p50, p99, success = self_p50, self_p99, 1.0
    failing: list[tuple[str, float, Cause]] = []
    if edges:
        p50, worst_wait, success = _dependency_calls(edges, states, p50, failing)
        p99 += worst_wait
    error_rate = 1.0 - own_ok * success
    if failing:
        cpu += 8.0 * (1.0 - success)
        cpu = cpu if cpu < 99.0 else 99.0
    floor = p50 * 1.2
    # Clamps spelled out rather than min() and max(): the same values, without two calls per bound.
    cpu = cpu if cpu < 99.5 else 99.5
    memory = memory if memory < 99.9 else 99.9
    error_rate = error_rate if error_rate < 1.0 else 1.0
    call_failure = error_rate + silent
    if health is None:  # no fault of its own: its health follows from what it serves
        if error_rate >= 0.9:
            health = "down"
        elif error_rate >= P1_ERROR_RATE or p99 >= 3 * healthy_p99[name] + 200:
            health = "degraded"
        else:
            health = "ok"
    # Positional: a Struct built from keywords costs several times as much, once per service per minute.
    return ServiceState(
        name,
        p50,
        floor if floor > p99 else p99,
        error_rate,
        requests,
        cpu if cpu > 0.5 else 0.5,
        memory if memory > 1.0 else 1.0,
        health,
        call_failure if call_failure < 1.0 else 1.0,
        mode,
        tuple(failing) if failing else (),
        strength_total,
        self_p50,
        self_p99,
        extra_error,
        minor_error,
        minor_mode,
        fails_writes,
        partner_failure,
    )


# Every service's state in a minute, as `_minute_states` computes it.
MinuteStatesOf = Callable[
    [
        tuple["LoopConstants", ...],
        tuple[float, ...],
        tuple[float, ...],
        Minute,
        Mapping[str, float],
        AbstractSet[str] | None,
        Mapping[str, ServiceState] | None,
        AbstractSet[str],
        bool,
        Mapping[str, float],
    ],
    dict[str, ServiceState],
]


def compiled_kernel() -> MinuteStatesOf | None:
    """`_minute_states` compiled (`_minute.pyx`, setup.py), if this install has it."""
    minute = _compiled_minute()
    return None if minute is None else minute.minute_states


def _compiled_minute() -> ModuleType | None:
    """The compiled minute's module, told the state Struct and the model's constants, if built."""
    try:
        from . import _minute
    except ImportError:  # an install without a C compiler: `_minute_states` computes
        return None
    _minute.configure(
        ServiceState,
        {
            "MAX_UTILISATION": traffic.MAX_UTILISATION,
            "P1_ERROR_RATE": P1_ERROR_RATE,
            "RESTART_DISRUPTION": RESTART_DISRUPTION,
            "BREAKER_OPEN": BREAKER_OPEN,
            "MOVEMENT_CPU": MOVEMENT_CPU,
            "MOVEMENT_MEMORY": MOVEMENT_MEMORY,
            "BATCH_RAMP_MINUTES": BATCH_RAMP_MINUTES,
            "TRAFFIC_MEMORY_CAP": TRAFFIC_MEMORY_CAP,
            "Z99": lognormal.Z99,
            "SQRT2": lognormal.SQRT2,
        },
    )
    return _minute


def prepare(constants: PlainConstants) -> object:
    """A service's loop constants as the compiled minute reads them, once per plan (the last of
    `LoopConstants`); None where it was not built."""
    return None if _MINUTE is None else _MINUTE.prepare(constants)


def _fault_effects(
    faults: Sequence[tuple[FaultType, float]],
    n1: float,
    nw2: float,
    w1: float,
    of_record: bool,
    own_ok: float,
    self_p50: float,
    self_p99: float,
    cpu: float,
    memory: float,
) -> tuple[float, float, float, float, float, float, ServiceHealth | None, FailureMode, bool, str]:
    """A service's own faults on its baseline: (share of its own work that succeeds, share of calls that
    fail silently, its own p50 and p99, CPU, memory, health, failure mode of the strongest, and whether
    its failures fall on writes, and how its calls to its outside party end)."""
    silent = 0.0
    health: ServiceHealth | None = None
    mode: FailureMode = "error"
    fails_writes = False
    partner_failure = ""
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
            fails_writes = kind.fails_writes
            partner_failure = kind.partner_failure
            if mode == "write" and not of_record:
                mode = "refused"
    return own_ok, silent, self_p50, self_p99, cpu, memory, health, mode, fails_writes, partner_failure


def _dependency_calls(
    edges: tuple[tuple[Edge, float, float], ...],
    states: dict[str, ServiceState],
    p50: float,
    failing: list[tuple[str, float, Cause]],
) -> tuple[float, float, float]:
    """A service's calls to its dependencies: its p50 with their waits added, the worst wait its p99
    takes on, and the share of its requests no failed call fails; appends the calls that fail some."""
    success = 1.0
    worst_wait = 0.0
    for edge, weighted_share, retry_power in edges:
        dep = states[edge.dep]
        refused = dep.call_failure
        dep_p50, dep_p99 = dep.p50_ms, dep.p99_ms
        # Calls time out only when the dependency's tail reaches the deadline.
        deadline = edge.deadline_ms
        timed_out = exceed(dep_p50, dep_p99, deadline) if dep_p99 * 2 > deadline else 0.0
        failed = 1.0 - (1.0 - refused) * (1.0 - timed_out)
        cause: Cause
        if edge.breaker and failed >= BREAKER_OPEN:
            seen, wait50, wait99, cause = 1.0, 1.0, 2.0, "breaker"
        else:
            # Retries help against scattered failures, not against a refusal or a dependency
            # that is down; failures are correlated, so each retry helps less than an independent draw.
            retried = edge.retries if dep.mode not in ("rejected", "refused", "handshake") else 0
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
    return p50, worst_wait, success


def _answers_alike(state: ServiceState, calm: ServiceState) -> bool:
    """Whether a service answers its callers as when calm: the same failures and latency, all a caller
    reads of it."""
    return (
        state.call_failure == calm.call_failure
        and state.p50_ms == calm.p50_ms
        and state.p99_ms == calm.p99_ms
        and state.mode == calm.mode
    )


def _answered_as_when_calm(
    edges: tuple[tuple[Edge, float, float], ...], states: dict[str, ServiceState], quiet: Mapping[str, ServiceState]
) -> bool:
    """Whether a service's dependencies all answer its calls as when calm: the same failures and latency,
    all a caller reads of them."""
    for edge, _, _ in edges:
        state, calm = states[edge.dep], quiet[edge.dep]
        if state is not calm and not _answers_alike(state, calm):
            return False
    return True


_MINUTE = _compiled_minute()
minute_states: MinuteStatesOf = _minute_states if _MINUTE is None else _MINUTE.minute_states
