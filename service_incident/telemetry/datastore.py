"""A datastore's own diagnostics, or what a fault does to them: a database's sessions, locks (the
session holding them named), statements, disk and replication; a queue's consumer lag, in-sync
replicas, disk and rejected writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..faults import FAULTS
from ..world import fault_lead
from .clock import clock
from .logs import line_context
from .pages import disk_used, full_volume
from .pods import pods
from .templates import fill, rng_for
from .traces import own_mean_ms

if TYPE_CHECKING:
    from ..world import World
    from .state import TelemetryState

CALM_QUEUE = (
    "consumer lag {int:0:40} messages on {topic} (group {client}-consumers); in-sync replicas 3/3; disk {disk}% "
    "used; rejected writes 0 in the last minute"
)


def db_query(state: TelemetryState, service: str, step: int) -> str:
    """A datastore's own view: what its live faults show, or its calm readings."""
    world, incident = state.world, state.world.incident
    rng = rng_for(state.seed, incident.id, service, "db", step)
    node = world.plan.by_name[service]
    context = line_context(world, service, step, pods(state, service, step))
    context["disk"] = str(disk_used(world, service, step))
    context["topic"] = f"{context['client']}.events"
    # Statements take what the service's own spans in its callers' traces take: one value, read twice.
    context["statement_ms"] = str(round(own_mean_ms(world.states_at(step)[service]) * rng.uniform(0.9, 1.1)))
    reports = []
    now = clock(world, step)
    for index, fault in enumerate(incident.faults):
        kind = FAULTS[fault.type]
        strength = world.strengths(step)[index]
        healed = world.healed_at(index)
        fixed = healed is not None and healed <= step
        report = (kind.db_report or {}).get(node.tech) or (kind.db_report or {}).get("*")
        if fault.service != service or report is None or strength <= 0 or fixed:
            continue
        # Nothing waits longer than the fault has been building, nor longer than the pods serving now.
        restarted = [clock(world, s) for s in world.restarts(service, step)]
        began = max([clock(world, -fault_lead(incident, fault, index)), *restarted])
        context["held"] = str(max(1, int((now - began).total_seconds() * rng.uniform(0.6, 0.95))))
        context["waiting"] = str(max(1, round(rng.uniform(30, 120) * min(1.0, strength))))
        context["volume"] = full_volume(world, service)
        reports.append(report)
    if not reports:
        reports = [CALM_QUEUE if node.kind == "queue" else _calm_database(world, service, step)]
    return "\n".join(fill(report, rng, context) for report in reports)


def _calm_database(world: World, service: str, step: int) -> str:
    service_state = world.states_at(step)[service]
    busy = min(99, int(12 + service_state.cpu_pct * 0.6))
    promoted = world.remedied("failover", service, step) is not None
    role = "primary (promoted by on-call)" if promoted else "primary"
    return (
        f"connections: active={{int:{max(1, busy - 8)}:{busy}}} idle={{int:10:30}} max={{max_conn}} waiting=0; "
        f"locks waiting 0; statements mean {{statement_ms}}ms; "
        f"disk {{disk}}% used; replication role={role} lag {{int:0:2}}s"
    )
