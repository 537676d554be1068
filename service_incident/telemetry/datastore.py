"""A datastore's own diagnostics, or what a fault does to them: a database's sessions, locks (the
session holding them named), statements, disk and replication; a queue's consumer lag, in-sync
replicas, disk and rejected writes; a cache's INFO or stats sections (replication, memory, hit ratio,
clients, uptime)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..faults import FAULTS
from ..world import fault_lead, unit
from .clock import clock
from .logs import line_context
from .pages import disk_used, full_volume
from .pods import pods
from .schemas import ANY_TABLES, OWN_TABLES
from .templates import fill, rng_for
from .traces import own_mean_ms

if TYPE_CHECKING:
    from ..world import World
    from .state import TelemetryState

# A cache's sections as its own INFO (redis) or stats (memcached) read when nothing is wrong, each
# "section: facts". A live fault's report for the technology replaces the sections it names.
CALM_CACHE: dict[str, tuple[str, ...]] = {
    "redis": (
        "replication: role=master connected_slaves={replicas} (online, lag 0s) master_link_status=n/a "
        "master_repl_offset={offset}",
        "memory: used_memory={used} maxmemory={maxmemory} maxmemory_policy=allkeys-lru; evicted_keys={int:0:40} "
        "in the last minute",
        "stats: keyspace hit ratio 0.9{int:2:8}; {int:2000:9000} ops/s",
        "clients: connected_clients={int:40:160} maxclients=10000 rejected_connections=0 in the last minute",
        "server: uptime_in_seconds={uptime}",
    ),
    "memcached": (
        "pool: servers {servers}/{servers} live in the client ring",
        "memory: bytes={used} limit_maxbytes={maxmemory}; evictions {int:0:40} in the last minute",
        "stats: get_hits ratio 0.9{int:2:8}; {int:2000:9000} cmd_get/s",
        "connections: curr_connections={int:40:160} max_connections=1024 rejected_connections=0 in the last minute",
        "server: uptime={uptime}",
    ),
}
# Bytes a cache's master writes to its replication stream a minute.
REPLICATION_BYTES_PER_MINUTE = 240_000
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
        strength = _acting(world, index, step)
        report = (kind.db_report or {}).get(node.tech) or (kind.db_report or {}).get("*")
        if fault.service != service or report is None or not strength:
            continue
        # Nothing waits longer than the fault has been building, nor longer than the pods serving now.
        # Named before max: compiled (Cython), max or min of a list display with a starred item does not build.
        moments = [
            clock(world, -fault_lead(incident, fault, index)),
            *(clock(world, s) for s in world.restarts(service, step)),
        ]
        began = max(moments)
        context["held"] = str(max(1, int((now - began).total_seconds() * rng.uniform(0.6, 0.95))))
        context["waiting"] = str(max(1, round(rng.uniform(30, 120) * min(1.0, strength))))
        context["volume"] = full_volume(world, service)
        reports.append(report)
    # Statements of clients that flood it come first, the most calls first, each naming its client.
    pushed = [fill(report, rng, context | names) for report, names in _pushed(world, service, step)]
    if node.kind == "cache":
        context |= _cache_context(state, service, step, int(context["maxmemory"].removesuffix("gb")))
        reports = _cache_sections(world, service, step, reports)
    elif not reports and not pushed:
        reports = [CALM_QUEUE if node.kind == "queue" else _calm_database(world, service, step)]
    return "\n".join([*pushed, *(fill(report, rng, context) for report in reports)])


def _acting(world: World, index: int, step: int) -> float:
    """The strength fault `index` shows with at a step, or 0 once its fix has taken effect."""
    healed = world.healed_at(index)
    return 0.0 if healed is not None and healed <= step else max(0.0, world.strengths(step)[index])


def _pushed(world: World, service: str, step: int) -> list[tuple[str, dict[str, str]]]:
    """The reports of clients' live faults that send this datastore extra calls, the most calls first,
    with what each names: the client, the table its statements read, its calls a minute now and as
    usual, as the states have them."""
    incident, states = world.incident, world.states_at(step)
    found: list[tuple[float, str, dict[str, str]]] = []
    for index, fault in enumerate(incident.faults):
        kind, strength, client = FAULTS[fault.type], _acting(world, index, step), fault.service
        if kind.pushed_report is None or not strength:
            continue
        # Only the dependencies it acts through (its databases) get its extra calls.
        if service not in incident.service(client).depends_on or world.plan.by_name[service].kind != kind.through:
            continue
        share = next(edge.share for edge in world.plan.by_name[client].edges if edge.dep == service)
        calls = states[client].rps * share * (1 + kind.fanout * strength) * 60
        names = {
            "client": client,
            "table": OWN_TABLES.get(incident.service(client).kind, ANY_TABLES)[1],
            "calls": str(round(calls)),
            "usual_calls": str(round(world.plan.calm[client].rps * share * 60)),
        }
        found.append((calls, kind.pushed_report, names))
    return [(report, names) for _, report, names in sorted(found, key=lambda item: -item[0])]


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


def _cache_sections(world: World, service: str, step: int, reports: list[str]) -> list[str]:
    """A cache's sections: the calm ones, replaced by those its live faults report; after an on-call
    failover its master says it was promoted."""
    sections = {line.partition(":")[0]: line for line in CALM_CACHE[world.plan.by_name[service].tech]}
    if world.remedied("failover", service, step) is not None and "replication" in sections:
        sections["replication"] = sections["replication"].replace("role=master", "role=master (promoted by on-call)")
    for report in reports:
        sections |= {line.partition(":")[0]: line for line in report.splitlines()}
    return list(sections.values())


def _cache_context(state: TelemetryState, service: str, step: int, limit_gb: int) -> dict[str, str]:
    """What a cache's sections state besides their draws: the memory in use (its pods' memory), its
    master pod's uptime, its servers (its pods), and its replication offset, which grows with writes and
    stands still from the moment its master was lost until a replica is promoted."""
    world, incident = state.world, state.world.incident
    used = limit_gb * min(100.0, world.states_at(step)[service].memory_pct) / 100
    running = pods(state, service, step)
    master = running[0]
    lost = [
        -fault_lead(incident, fault, index)
        for index, fault in enumerate(incident.faults)
        if fault.service == service and FAULTS[fault.type].fix == "failover" and world.strengths(step)[index] > 0
    ]
    steps = [step, *lost]  # named before min, as in db_query
    written = min(steps) + int(unit(incident.id, service, "offset") * 4_000_000)
    return {
        "used": f"{used:.2f}gb",
        "uptime": str(max(1, int((clock(world, step) - master.started).total_seconds()))),
        "offset": str(written * REPLICATION_BYTES_PER_MINUTE),
        # Each pod is a server: a redis master and its replicas, or a memcached server in the client ring.
        "servers": str(len(running)),
        "replicas": str(len(running) - 1),
        "alive": str(len(running) - 1),
    }
