"""The pods running a service: names, PIDs, addresses and ages, replaced by rollouts, added by
scale-ups, their containers restarting while a fault crashes them."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from ..faults import FAULTS, FaultType
from ..world import HISTORY_MINUTES, World, fault_lead, spread, unit
from ..world.draws import Draws, PrefixedDraws
from .clock import clock, duration_h, duration_ms, duration_s, epoch_ms, step_of
from .deploys import canary_version, entries, version
from .templates import hex_digits, hexkey

if TYPE_CHECKING:
    from .state import TelemetryState

# The fault that crashes a service's containers, the step it began, its strength by step, and its index.
Crash = tuple[FaultType, int, Callable[[int], float], int]
# Pods by (service, step, remedies applied so far): a step's pods change only with a remedy. A service
# whose containers do not crash keeps its pods until a remedy touches it: by (service,).
PodsKey = tuple[str, int, int] | tuple[str]
# What a pod is while none of its containers has crashed follows from its service, index, generation
# (rollouts so far), template, canary release (a canary's), last rollout, scale-up (one added by it) and
# release: the same at every step these stand, in every episode of the incident (`Shared.steady_pods`).
SteadyKey = tuple[str, int, int, str, str | None, int | None, int | None, str]


# A Struct, not tracked by the garbage collector: an incident keeps its pods for every episode of it,
# and a pod holds nothing that could lead back to it.
class Pod(msgspec.Struct, frozen=True, gc=False):
    name: str
    pid: int
    ip: str
    created: datetime  # when the pod was created: its age
    started: datetime  # when its current container started: its uptime
    restarts: int
    status: str
    last_termination: str | None
    # `created` in epoch ms and `started` in epoch s, worked out where a pod is made: every line it writes asks.
    created_ms: int
    started_s: int
    canary: bool = False  # a pod of the canary deployment, running the release under test


def pods(state: TelemetryState, service: str, step: int) -> list[Pod]:
    """The pods running a service at a step: a rollout (restart, rollback) replaces them all, a
    scale-up adds new ones, and a crashing container restarts inside its pod with a new PID."""
    history = state.world.history
    kept = state.pods
    if crash(state, service) is None and not any(e.service == service and e.step <= step for e in history):
        # Nothing has happened to its pods yet: they are the same at every such step, and in every
        # episode of the incident.
        key: PodsKey = (service,)
        kept = state.shared.pods
    else:
        key = (service, step, len(history))
        if not history:
            kept = state.shared.pods  # no remedy yet: the incident's own
    found = kept.get(key)
    if found is None:
        found = kept[key] = _new_pods(state, service, step)
    return found


def pods_at(state: TelemetryState, service: str, moment: datetime) -> list[Pod]:
    """The pods that were running at a moment: those of the step it falls in."""
    return pods(state, service, step_of(state.world, moment))


def _new_pods(state: TelemetryState, service: str, step: int) -> list[Pod]:
    world, iid = state.world, state.world.incident.id
    node = world.plan.by_name[service]
    now = clock(world, step)
    rollouts = sorted(
        e.step for e in world.history if e.service == service and e.remedy in ("restart", "rollback") and e.step <= step
    )
    generation = len(rollouts)
    scale_ups = [e.step for e in world.history if e.service == service and e.remedy == "scale_up" and e.step <= step]
    scaled_at = min(scale_ups, default=None)
    replicas = node.replicas * 2 ** len(scale_ups)
    # A restart is a new pod template (its restartedAt annotation), so a new ReplicaSet and hash; a
    # rollback returns to the previous release's template.
    restarted = sum(1 for e in world.history if e.service == service and e.remedy == "restart" and e.step <= step)
    release = version(world, service, step)
    template = hexkey(iid, service, "rs", release, *([restarted] if restarted else []))[:5]
    template += "9"
    crashing = crash(state, service)
    if crashing is not None and rollouts:
        # Pods the fix's own rollout (or a later one) created never ran the fault: they start fresh.
        healed = world.healed_at(crashing[3])
        if healed is not None and rollouts[-1] >= healed:
            crashing = None
    sick: dict[int, int] = {}  # how many pods' containers crash, by step
    if crashing is not None:
        # While any request succeeds some pod serves it: one stays up unless every request fails.
        kind, began, strength, _ = crashing
        most = replicas if kind.error_rate >= 1.0 else replicas - 1
        sick = {s: min(most, math.ceil(strength(s) * replicas)) for s in range(max(began, step - 30), step + 1)}
    found = []
    # A live canary runs beside the stable pods: its own deployment, one pod taking its share of traffic.
    trial = canary_version(world, service, step)
    canaries = 0 if trial is None else 1
    # Every draw of a pod is keyed by the incident and the service first: hashed once (`Draws`).
    draw = Draws(iid, service)
    last_rollout = rollouts[-1] if rollouts else None
    steady = state.shared.steady_pods
    for index in range(replicas + canaries):
        canary = index >= replicas
        scaled = node.replicas <= index < replicas
        key = (
            service,
            index,
            generation,
            template,
            trial if canary else None,
            last_rollout,
            scaled_at if scaled else None,
            release,
        )
        pod = steady.get(key)
        if pod is None:
            pod = steady[key] = _steady_pod(state, draw, key)
        # Replicas added this minute are still starting (see SCALE_JOINING).
        if scaled and pod.started == now:
            pod = msgspec.structs.replace(pod, status="ContainerCreating")
        if crashing is not None:
            crashed = _crashed(world, service, index, crashing, sick, pod.created, step)
            if crashed is not None:
                restarts, termination, status, started = crashed
                pod = msgspec.structs.replace(
                    pod,
                    pid=100 + int(draw.unit(f"{generation}:{index}:{restarts}:pid") * 9800),
                    started=started,
                    restarts=restarts,
                    status=status or pod.status,
                    last_termination=termination,
                    started_s=int(started.timestamp()),
                )
        found.append(pod)
    return found


def _steady_pod(state: TelemetryState, draw: PrefixedDraws, key: SteadyKey) -> Pod:
    """A pod as it runs while none of its containers has crashed: its name, address, age and first
    container's PID. `draw` draws for the pod's incident and service."""
    world, iid = state.world, state.world.incident.id
    service, index, generation, template, trial, last_rollout, scaled_at, release = key
    suffix = hex_digits(draw.unit(f"{generation}:{index}"))[:5]
    name = f"{service}-{template}-{suffix}"
    if trial is not None:
        name = f"{service}-canary-{hexkey(iid, service, 'rs', trial, 'canary')[:5]}9-{suffix}"
    if last_rollout is not None:
        # A rollout replaces the pods one at a time in the seconds before it completes.
        started = clock(world, last_rollout) - duration_ms(draw.spread(500, 20_000, f"{last_rollout}:{index}"))
    elif scaled_at is not None:
        started = clock(world, scaled_at)
    else:
        # Up at the page for hours: the same moment whichever step asks.
        started = clock(world, 0) - duration_h(draw.spread(20, 900, f"{index}:age"))
        # A pod is never older than the release it runs: the rollout of that release replaced every pod.
        shipped = released(state, service, trial or release)
        started = max(started, shipped + duration_s(draw.spread(20, 240, f"{index}:roll")))
    pid = 100 + int(draw.unit(f"{generation}:{index}:0:pid") * 9800)
    subnet = int(draw.unit("net") * 250)
    ip = f"10.{subnet}.{index}.{10 + int(unit(iid, name) * 200)}"
    return Pod(
        name,
        pid,
        ip,
        started,
        started,
        0,
        "Running",
        None,
        epoch_ms(started),
        int(started.timestamp()),
        trial is not None,
    )


def _crashed(
    world: World, service: str, index: int, crashing: Crash, sick: dict[int, int], created: datetime, step: int
) -> tuple[int, str, str | None, datetime] | None:
    """How often pod `index`'s container has restarted, how it last ended, its status if it crashes still
    (None: as it would be), and when its current container started; None if it never restarted.

    The container has crashed since the fault began or the pod was created, whichever is later,
    restarting inside the pod on the orchestrator's back-off (10 s doubling up to 5 min), until the last
    minute it crashed in; its restarts stay counted after that."""
    iid, now = world.incident.id, clock(world, step)
    kind, began, _, _ = crashing
    first = max(began, step_of(world, created))
    last = next((s for s in range(step, first - 1, -1) if index < sick.get(s, 0)), None)
    if last is None:
        return None
    since = max(clock(world, began), created)
    until = now if last == step else clock(world, last)
    restarts = _backoff_restarts((until - since).total_seconds() * spread(0.8, 1.0, iid, service, index, "crash"))
    if not restarts or kind.termination is None:
        return None
    if last != step:
        return restarts, kind.termination, None, until
    status = "CrashLoopBackOff" if kind.health == "down" else "Running"
    started = max(created, now - duration_s(spread(5, 90, iid, service, index, restarts)))
    return restarts, kind.termination, status, started


def crash(state: TelemetryState, service: str) -> Crash | None:
    """The fault of the incident that crashes a service's containers, the step it began, and its
    strength by step (kept: it depends on the incident alone). A red herring's minor fault crashes none:
    its failures are background work's."""
    if service not in state.crashes:
        state.crashes[service] = _find_crash(state.world, service)
    return state.crashes[service]


def _find_crash(world: World, service: str) -> Crash | None:
    incident = world.incident
    for index, fault in enumerate(incident.faults):
        kind = FAULTS[fault.type]
        if fault.service == service and kind.termination:
            return kind, -fault_lead(incident, fault, index), lambda s, i=index: world.strengths(s)[i], index
    return None


def _backoff_restarts(seconds: float) -> int:
    """How often a crashing container restarted in this long: the back-off doubles from 10 s up to 5 min."""
    if seconds < 10.0:
        return 0
    restarts, elapsed, wait = 1, 10.0, 10.0
    while elapsed + min(2 * wait, 300.0) <= seconds:
        wait = min(2 * wait, 300.0)
        elapsed += wait
        restarts += 1
    return restarts


def released(state: TelemetryState, service: str, release: str) -> datetime:
    """When a release the service runs before any remedy rolled out: the newest deploy listed that
    shipped it (kept for the incident: it precedes every remedy, and every pod of every view asks)."""
    found = state.shared.releases.get((service, release))
    if found is None:
        listed = entries(state.world, service, -HISTORY_MINUTES)
        moment = next((moment for moment, shipped, _ in listed if shipped == release), listed[0][0])
        # As the history prints it: to the second, in UTC (an incident starts at a UTC time: incidents.validate).
        found = state.shared.releases[(service, release)] = moment.replace(microsecond=0)
    return found
