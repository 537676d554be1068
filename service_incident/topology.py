"""The service catalogue: what each kind of service looks like when healthy, and how calls fail over.

A kind's profile is the baseline every metric and routine log line is drawn around; incidents only
say which kinds they run and how they are wired.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KindProfile:
    """Healthy behaviour of one kind of service."""

    latency_ms: float
    cpu_pct: float
    memory_pct: float
    process: str
    routine_logs: tuple[str, ...]
    endpoints: tuple[str, ...] = ("GET /healthz",)
    # How much of a caller's traffic depends on this kind when it is called: a cache miss falls
    # back to the database and a notification is queued asynchronously, so neither fails the caller
    # the way a failed synchronous call does.
    caller_weight: float = 1.0
    # A router sends each request to one of its upstreams, so it suffers their failures on average;
    # any other service needs all of its dependencies for every request.
    routes: bool = False


_HTTP_ROUTINE = (
    'INFO req={hex:8} "{endpoint}" status=200 rt={int:8:95}ms',
    'INFO req={hex:8} "{endpoint}" status=200 rt={int:8:95}ms',
    "INFO health_check status=ok uptime={uptime}",
)

KINDS: Mapping[str, KindProfile] = {
    "gateway": KindProfile(
        latency_ms=45,
        cpu_pct=32,
        memory_pct=38,
        process="nginx",
        routine_logs=(*_HTTP_ROUTINE, "INFO upstream keepalive pool size={int:32:64} idle={int:4:20}"),
        endpoints=("GET /api/catalog", "POST /api/checkout", "GET /api/account", "POST /api/login"),
        routes=True,
    ),
    "web": KindProfile(
        latency_ms=80,
        cpu_pct=28,
        memory_pct=45,
        process="web-frontend",
        routine_logs=_HTTP_ROUTINE,
        endpoints=("GET /", "GET /product/{int:100:999}", "GET /cart"),
    ),
    "auth": KindProfile(
        latency_ms=60,
        cpu_pct=30,
        memory_pct=44,
        process="auth-api",
        routine_logs=(*_HTTP_ROUTINE, "INFO token issued sub=user-{int:1000:99999} ttl=3600s"),
        endpoints=("POST /v1/login", "POST /v1/token/verify", "GET /v1/session"),
    ),
    "payments": KindProfile(
        latency_ms=140,
        cpu_pct=26,
        memory_pct=50,
        process="payments-api",
        routine_logs=(*_HTTP_ROUTINE, "INFO charge captured id=ch_{hex:12} amount={int:5:400}.00 EUR"),
        endpoints=("POST /v1/charges", "POST /v1/refunds", "GET /v1/charges/ch_{hex:8}"),
    ),
    "orders": KindProfile(
        latency_ms=90,
        cpu_pct=30,
        memory_pct=48,
        process="orders-api",
        routine_logs=_HTTP_ROUTINE,
        endpoints=("POST /v1/orders", "GET /v1/orders/{int:1000:9999}"),
    ),
    "checkout": KindProfile(
        latency_ms=110,
        cpu_pct=33,
        memory_pct=47,
        process="checkout-api",
        routine_logs=_HTTP_ROUTINE,
        endpoints=("POST /v1/checkout", "GET /v1/cart/{hex:6}"),
    ),
    "inventory": KindProfile(
        latency_ms=50,
        cpu_pct=24,
        memory_pct=42,
        process="inventory-api",
        routine_logs=_HTTP_ROUTINE,
        endpoints=("GET /v1/stock/sku-{int:1000:9999}", "POST /v1/reservations"),
    ),
    "app": KindProfile(
        latency_ms=75,
        cpu_pct=27,
        memory_pct=46,
        process="app-server",
        routine_logs=_HTTP_ROUTINE,
        endpoints=("GET /v1/items/{int:100:999}", "POST /v1/jobs"),
    ),
    "search": KindProfile(
        latency_ms=70,
        cpu_pct=40,
        memory_pct=60,
        process="search-api",
        routine_logs=_HTTP_ROUTINE,
        endpoints=("GET /v1/search?q={hex:4}",),
    ),
    "notifications": KindProfile(
        latency_ms=85,
        cpu_pct=20,
        memory_pct=40,
        process="notif-worker",
        routine_logs=(
            "INFO delivered message id=msg-{hex:10} channel={pick:email|sms|push} latency={int:40:300}ms",
            "INFO queue depth={int:0:12} consumers={int:4:8}",
            "INFO health_check status=ok",
        ),
        endpoints=("POST /v1/notify",),
        caller_weight=0.15,
    ),
    "queue": KindProfile(
        latency_ms=6,
        cpu_pct=22,
        memory_pct=52,
        process="rabbitmq",
        routine_logs=(
            "INFO accepting AMQP connection <0.{int:100:999}.0> ({int:10:250}.{int:0:9}.{int:0:9}.{int:1:250}:{int:30000:60000})",
            "INFO queue 'events' messages_ready={int:0:40} consumers={int:3:9}",
        ),
        caller_weight=0.2,
    ),
    "cache": KindProfile(
        latency_ms=2,
        cpu_pct=14,
        memory_pct=55,
        process="redis",
        routine_logs=(
            "INFO DB saved on disk",
            "INFO Background saving started by pid {int:1000:9999}",
            "INFO connected_clients={int:40:160} keyspace_hits_ratio=0.9{int:2:8}",
        ),
        caller_weight=0.35,
    ),
    "database": KindProfile(
        latency_ms=9,
        cpu_pct=31,
        memory_pct=62,
        process="postgres",
        routine_logs=(
            "INFO checkpoint complete: wrote {int:40:400} buffers ({float:0:3}%); {int:0:3} WAL file(s) added",
            'INFO automatic vacuum of table "app.public.sessions": index scans: {int:0:2}',
            "INFO connections active={int:12:40} idle={int:10:30} max=100",
        ),
    ),
    "external": KindProfile(
        latency_ms=180,
        cpu_pct=0,
        memory_pct=0,
        process="egress-proxy",
        routine_logs=("INFO CONNECT provider.example:443 status=200 rt={int:90:260}ms",),
    ),
}

# Routine lines of datastores and brokers in their own technology's words (apps share their kind's).
ROUTINE_BY_TECH: Mapping[str, tuple[str, ...]] = {
    "postgres": KINDS["database"].routine_logs,
    "mysql": (
        "INFO [MY-010931] /usr/sbin/mysqld: ready for connections. port: 3306",
        "INFO InnoDB: page_cleaner: {int:900:1100}ms intended loop took {int:900:1200}ms",
        "INFO Threads_connected={int:12:40} Threads_running={int:1:9}",
    ),
    "redis": KINDS["cache"].routine_logs,
    "memcached": (
        "INFO curr_connections={int:40:160} get_hits ratio 0.9{int:2:8}",
        "INFO slab class {int:1:40}: chunk size {int:96:4096} perslab {int:200:10000}",
    ),
    "rabbitmq": KINDS["queue"].routine_logs,
    "kafka": (
        "INFO [Log partition=events-{int:0:11}] Rolled new log segment at offset {int:100000:999999}",
        "INFO [GroupCoordinator {int:0:2}]: Stabilized group consumers generation {int:10:90}",
    ),
    "envoy": (
        'INFO [{hex:8}] "{endpoint} HTTP/1.1" 200 - {int:8:95}ms',
        'INFO [{hex:8}] "{endpoint} HTTP/1.1" 200 - {int:8:95}ms',
        "INFO cds: add {int:8:30} cluster(s), remove 0 cluster(s)",
    ),
}
# The port a service listens on, by technology (caller logs that name a host name its port too).
PORTS: Mapping[str, int] = {
    "postgres": 5432,
    "mysql": 3306,
    "redis": 6379,
    "memcached": 11211,
    "kafka": 9092,
    "rabbitmq": 5672,
}
# The operations callers perform on a datastore: (reads, writes).
OPERATIONS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "database": (("SELECT orders", "SELECT sessions", "SELECT accounts"), ("INSERT orders", "UPDATE payments")),
    "cache": (("GET sess:{hex:8}", "GET cart:{hex:6}"), ("SET sess:{hex:8}",)),
    "queue": (("consume events",), ("publish events", "publish orders")),
}


def dependency_order(depends_on: Mapping[str, Sequence[str]]) -> list[str]:
    """Services ordered so that every service comes after all it depends on.

    Raises ValueError on a cycle: failure propagation is defined on a DAG.
    """
    order: list[str] = []
    state: dict[str, int] = {}
    for name in depends_on:
        _visit(name, depends_on, state, order)
    return order


def _visit(name: str, depends_on: Mapping[str, Sequence[str]], state: dict[str, int], order: list[str]) -> None:
    """A depth-first visit of `dependency_order`'s: a function of the module, as a closure calling itself
    would be a reference cycle, left to the garbage collector on every plan built."""
    mark = state.get(name, 0)
    if mark == 2:
        return
    if mark == 1:
        raise ValueError(f"dependency cycle through {name!r}")
    state[name] = 1
    for dep in depends_on[name]:
        _visit(dep, depends_on, state, order)
    state[name] = 2
    order.append(name)
