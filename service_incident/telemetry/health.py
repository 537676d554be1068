"""Health: what the orchestrator reports of a service (its deployment, its pods with restarts and
terminations, the recent events) and its health probe."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ..faults import FAULTS
from ..world import ServiceState, fault_lead, spread, unit
from .clock import age, clock
from .deploys import canary_version, version
from .pods import Pod, pods, pods_at
from .templates import fill, rng_for

if TYPE_CHECKING:
    from .state import TelemetryState


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
    events = _events(state, service, step, running, service_state)
    lines.append("events (last 15m):" if events else "events (last 15m): none")
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
        sync = f"clock unsynchronized: chronyd: no selectable sources, offset +{rng.uniform(300, 600):.3f}s"
    else:
        sync = f"clock synchronized to time.internal, offset {rng.uniform(-0.004, 0.004):+.4f}s"
    return f"node {name}: Ready; {sync}"


def _events(
    state: TelemetryState, service: str, step: int, running: list[Pod], service_state: ServiceState
) -> list[tuple[datetime, str]]:
    """The orchestrator's events of the last 15 minutes: a fault's, a failing probe's, the remedies'."""
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
        # Events fall between the fault's start and its fix, on pods that were running then; those
        # of a fixed fault stay listed for the window, none after the fix.
        began = clock(world, -fault_lead(incident, fault, index))
        until = now if fixed is None else clock(world, fixed) - timedelta(seconds=1)
        if now - until > timedelta(minutes=15):
            continue
        for n, (reason, message) in enumerate(kind.events):
            ago = timedelta(seconds=spread(10, 400, incident.id, service, reason, step))
            at = max(began, min(until, now - ago))
            then = pods_at(state, service, at)
            if kind.termination:
                then = [p for p in then if p.restarts]
                if not then:
                    continue  # no container had crashed yet then
            pod = then[n % len(then)]
            at = max(at, pod.created)
            text = message.replace("{container}", service).replace("{ip}", pod.ip)
            text = fill(text, rng_for(0, incident.id, service, reason), {})
            found.append((at, f"Warning {reason} pod/{pod.name}: {text}"))
    slow = service_state.p99_ms > 1000 or service_state.error_rate > 0.2
    if service_state.health != "ok" and slow and not any("Unhealthy" in text for _, text in found):
        at = now - timedelta(seconds=spread(10, 300, incident.id, service, "probe", step))
        at = max([at, *(clock(world, s) for s in world.restarts(service, step))])
        probe = "Readiness probe failed: context deadline exceeded"
        pod = pods_at(state, service, at)[0]
        found.append((max(at, pod.created), f"Warning Unhealthy pod/{pod.name}: {probe}"))
    for event in world.history:
        if event.service == service and event.step <= step:
            at = clock(world, event.step)
            rollout = {
                "restart": "Normal ScalingReplicaSet: rollout restart, all pods replaced",
                "rollback": f"Normal ScalingReplicaSet: rolled back to {version(world, service, step)}",
                "scale_up": f"Normal ScalingReplicaSet: scaled up to {sum(not p.canary for p in running)} replicas",
            }.get(event.remedy)
            if rollout and now - at <= timedelta(minutes=15):
                found.append((at, rollout))
    return found
