"""Health: what the orchestrator reports of a service (its deployment, its pods with restarts and
terminations, the recent events) and its health probe."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..faults import FAULTS
from ..world import fault_lead, spread, unit
from .clock import age, clock, duration_min, duration_s, skew_s
from .deploys import canary_version, version
from .pods import pods, pods_at
from .templates import fill, rng_for

if TYPE_CHECKING:
    from .state import TelemetryState


# How far back the orchestrator's events are listed.
_WINDOW_MINUTES = 15
_WINDOW = timedelta(minutes=_WINDOW_MINUTES)


def health(state: TelemetryState, service: str, step: int) -> str:
    """What the orchestrator reports: the deployment, its pods, and the recent events."""
    world = state.world
    service_state = world.states_at(step)[service]
    running = pods(state, service, step)
    now = clock(world, step)
    rng = rng_for(state.seed, world.incident.id, service, "health", step)
    lines = []
    trial = canary_version(world, service, step)
    for name, release, members in (
        (service, version(world, service, step), [p for p in running if not p.canary]),
        (f"{service}-canary", trial, [p for p in running if p.canary]),
    ):
        if not members:
            continue
        # A pod whose container is crash-looping is not ready; the rest serve what the service still serves.
        ready = sum(1 for p in members if p.status == "Running")
        lines.append(f"deployment {name} image {service}:{release} replicas={len(members)} ready={ready}")
        for pod in members:
            old = age(now - pod.created)
            last = f" last_termination={pod.last_termination}" if pod.last_termination else ""
            lines.append(f"  pod {pod.name} pid={pod.pid} status={pod.status} restarts={pod.restarts} age={old}{last}")
    lines.append(_node(state, service, step))
    events = _events(state, service, step)
    window = f"events (last {_WINDOW_MINUTES}m):"
    lines.append(window if events else f"{window} none")
    lines += [f"  {age(now - at)} ago {text}" for at, text in sorted(events, reverse=True)[:6]]
    probe = "failed" if service_state.health == "down" else "passed"
    rt = "timeout" if probe == "failed" else f"{round(service_state.p50_ms * rng.uniform(0.5, 0.9))}ms"
    lines.append(f"probe GET /healthz: {probe} rt={rt}")
    return "\n".join(lines)


def _node(state: TelemetryState, service: str, step: int) -> str:
    """The node the service's pods run on, and its clock: containers keep the time of their node."""
    world = state.world
    incident = world.incident
    name = f"ip-10-0-{int(unit(incident.id, service, 'node') * 250)}-{int(unit(incident.id, service, 'node2') * 250)}"
    rng = rng_for(state.seed, incident.id, service, "node", step)
    skewed = any(kind.fix == "resync_clock" for kind, _ in world.fault_runs(service, step))
    if skewed:
        sync = f"clock unsynchronized: chronyd: no selectable sources, offset -{skew_s(incident.id, service):.3f}s"
    else:
        sync = f"clock synchronized to time.internal, offset {rng.uniform(-0.004, 0.004):+.4f}s"
    return f"node {name}: Ready; {sync}"


def _events(state: TelemetryState, service: str, step: int) -> list[tuple[datetime, str]]:
    """The orchestrator's events of the window: a fault's, a failing probe's, the remedies'."""
    world = state.world
    now = clock(world, step)
    incident = world.incident
    found: list[tuple[datetime, str]] = []
    strengths = world.strengths(step)
    for index, fault in enumerate(incident.faults):
        kind = FAULTS[fault.type]
        healed = world.healed_at(index)
        fixed = healed if healed is not None and healed <= step else None
        if fault.service != service or not (fixed is not None or strengths[index] > 0):
            continue
        # Each event recurs on its own period from the fault's start, on pods that were running then;
        # the last occurrence is listed. A fixed fault's last is the one before its fix, the same in
        # every later view and listed for the window.
        began = clock(world, -fault_lead(incident, fault, index))
        until = now if fixed is None else clock(world, fixed) - duration_s(1)
        # A crashing container's events start once it has crashed, in the fault's second minute.
        crashed = duration_min(1 if kind.termination else 0)
        for n, (reason, message) in enumerate(kind.events_on(world.plan.by_name[service].tech)):
            first = began + crashed + duration_s(spread(5, 55, incident.id, service, reason, "first"))
            every = duration_s(spread(20, 300, incident.id, service, reason, "every"))
            if until < first:
                continue  # not yet occurred
            at = first + every * ((until - first) // every)
            then = pods_at(state, service, at)
            if kind.termination:
                then = [p for p in then if p.restarts]
                if not then:
                    continue  # no container had crashed yet then
            pod = then[n % len(then)]
            at = max(at, pod.created)
            if now - at > _WINDOW:
                continue
            text = message.replace("{container}", service).replace("{ip}", pod.ip)
            text = fill(text, rng_for(0, incident.id, service, reason), {})
            found.append((at, f"Warning {reason} pod/{pod.name}: {text}"))
    if not any("Unhealthy" in text for _, text in found) and (probe := _probe_failure(state, service, step)):
        found.append(probe)
    for event in world.history:
        if event.service == service and event.step <= step:
            at = clock(world, event.step)
            # What the rollout did then: the release and the replicas of its own step.
            rollout = {
                "restart": "Normal ScalingReplicaSet: rollout restart, all pods replaced",
                "rollback": f"Normal ScalingReplicaSet: rolled back to {version(world, service, event.step)}",
                "scale_up": "Normal ScalingReplicaSet: scaled up to "
                f"{sum(not p.canary for p in pods(state, service, event.step))} replicas",
            }.get(event.remedy)
            if rollout and now - at <= _WINDOW:
                found.append((at, rollout))
    return found


def _probe_failure(state: TelemetryState, service: str, step: int) -> tuple[datetime, str] | None:
    """The readiness probe's last failure in the window, if the service failed it: it fails every few
    seconds while the service is unhealthy and slow, and its last failure stays listed, at the time the
    last view that saw it failing showed, once it passes."""
    world = state.world
    now = clock(world, step)
    for failing in range(step, step - _WINDOW_MINUTES - 1, -1):
        service_state = world.states_at(failing)[service]
        slow = service_state.p99_ms > 1000 or service_state.error_rate > 0.2
        if service_state.health == "ok" or not slow:
            continue
        at = clock(world, failing) - duration_s(spread(1, 10, world.incident.id, service, "probe", failing))
        # Named before max: compiled (Cython), max of a list display with a starred item does not build.
        moments = [at, *(clock(world, s) for s in world.restarts(service, failing))]
        at = max(moments)
        pod = pods_at(state, service, at)[0]
        at = max(at, pod.created)
        if now - at > _WINDOW:
            return None
        return at, f"Warning Unhealthy pod/{pod.name}: Readiness probe failed: context deadline exceeded"
    return None
