"""The fault taxonomy: what each kind of failure does to its service and how it shows in every view.

Every fault is data: its effect on the service model at full strength (own errors, added latency,
load, capacity, CPU and memory), the log lines it writes in the words of each technology (several
phrasings each), the events the orchestrator records, what a database's own diagnostics show, the
change that shipped it, and the remedies an engineer would apply. The world model interprets these
uniformly; nothing here names an incident.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Remedy = Literal[
    "restart",
    "rollback",
    "scale_up",
    "escalate",
    "failover",
    "expand_volume",
    "renew_certificate",
    "shed_load",
    "terminate_blocker",
    "resync_clock",
]
FaultHealth = Literal["degraded", "down"]
# How a caller's call to a failing service fails.
FailureMode = Literal["error", "refused", "rejected", "write", "handshake"]

APP_KINDS = ("web", "auth", "payments", "orders", "checkout", "inventory", "search", "notifications", "app")
# Systems of record: a write they refuse or lose is data at risk, which the rubric grades P0.
RECORD_KINDS = ("database", "queue")
# Kinds that answer their own diagnostics (run_db_query): the systems of record, and caches.
DATASTORE_KINDS = (*RECORD_KINDS, "cache")
# The technologies a kind of service runs on; the world draws one per service.
TECHNOLOGIES: Mapping[str, tuple[str, ...]] = {
    "gateway": ("nginx", "envoy"),
    "database": ("postgres", "mysql"),
    "cache": ("redis", "memcached"),
    "queue": ("kafka", "rabbitmq"),
    "external": ("egress",),
    **{kind: ("jvm", "go", "python", "node") for kind in APP_KINDS},
}
APP_TECHS = frozenset({"jvm", "go", "python", "node"})
# Technologies that proxy requests, whose configuration is a proxy's ("proxy" in file tables).
PROXY_TECHS = frozenset(TECHNOLOGIES["gateway"])

# Log phrasings: technology (or "app" for any application runtime, "*" for any) -> alternatives, each
# a group of lines the fault writes together. A service keeps one phrasing for the whole incident.
Phrasings = Mapping[str, tuple[tuple[str, ...], ...]]
# Orchestrator events: (reason, message).
Events = tuple[tuple[str, str], ...]

_EXCEPTION = {
    "jvm": 'ERROR req={hex:8} "{endpoint}" status=500 exception="{error}" build={version}',
    "go": 'ERROR req={hex:8} "{endpoint}" status=500 panic="{error}" build={version}',
    "python": 'ERROR req={hex:8} "{endpoint}" status=500 Traceback: {error} build={version}',
    "node": 'ERROR req={hex:8} "{endpoint}" status=500 err="{error}" build={version}',
}


def _exceptions(errors: Mapping[str, str], extra: tuple[str, ...] = ()) -> Phrasings:
    """A 500 line per runtime naming its own exception, plus shared lines."""
    return {
        tech: (
            (_EXCEPTION[tech].replace("{error}", error), *extra),
            (_EXCEPTION[tech].replace("{error}", error), "WARN error budget burn rate {int:6:40}x over 5m window"),
        )
        for tech, error in errors.items()
    }


@dataclass(frozen=True, slots=True)
class FaultType:
    """One failure mode. Effects are reached at strength 1 and scale with strength below it."""

    name: str
    kinds: tuple[str, ...]
    logs: Phrasings
    fix: Remedy
    error_rate: float = 0.0
    latency_ms: float = 0.0
    cpu_pct: float | None = None
    memory_pct: float | None = None
    # Extra load on the service (a multiple of its usual request rate at strength 1).
    load: float = 0.0
    # The share of the service's capacity that is lost at strength 1 (stuck threads, a smaller pool).
    capacity_loss: float = 0.0
    health: FaultHealth = "degraded"
    failure: FailureMode = "error"
    acceptable: tuple[Remedy, ...] = ()
    # Remedies that buy a few steps of relief before the fault relapses.
    relief: tuple[Remedy, ...] = ()
    # Calls that fail on the caller's side although this service logs no error (cache misses).
    caller_failure: float = 0.0
    # Kinds on which the fault refuses or loses writes of record (see RECORD_KINDS).
    loses_writes: bool = False
    # The kind of change that shipped the fault, and the changes that can have shipped it, per family
    # (see `release_family`). Every release draws its changes from one vocabulary (see `RELEASE_CHANGES`),
    # these among them: only its timing and what it touched tell the one that broke something apart.
    change: Literal["deploy", "migration", "canary"] | None = None
    touches: Changes | None = None
    # What the datastore's own diagnostics show, per technology ("*" for any); a cache's report is
    # "section: facts" lines, each replacing its calm section.
    db_report: Mapping[str, str] | None = None
    # Orchestrator events, and those of the technologies on which the fault reads otherwise; and the
    # container's last termination, if it crashes.
    events: Events = ()
    tech_events: Mapping[str, Events] | None = None
    termination: str | None = None
    # Minutes the fault had been building before the page: (least, most).
    lead: tuple[int, int] = (2, 8)
    # A fault that acts through a dependency of this kind lands only on a service that calls one; at
    # strength 1 each of its requests sends that dependency `fanout` times its usual calls on top (a
    # query per item of a list: N+1), and the dependency's own diagnostics show `pushed_report`, with
    # the fault's service as the client and its statements on that service's tables.
    through: str | None = None
    fanout: float = 0.0
    pushed_report: str | None = None
    # Whether its failures fall on the requests that write (parse a payload), the code path its change
    # touched, while the service's reads fare as every day.
    fails_writes: bool = False
    # How the service's calls to its outside party end while it runs ("" when the fault is its own):
    # its client span to that party shows the failure.
    partner_failure: str = ""

    def data_at_risk(self, kind: str) -> bool:
        return self.loses_writes and kind in RECORD_KINDS

    def hosts(self, kind: str, dependency_kinds: Iterable[str]) -> bool:
        """Whether a service of this kind, calling dependencies of these kinds, can have the fault."""
        return kind in self.kinds and (self.through is None or self.through in dependency_kinds)

    def events_on(self, tech: str) -> Events:
        return (self.tech_events or {}).get(tech, self.events)

    def phrasings(self, tech: str) -> tuple[tuple[str, ...], ...]:
        logs = self.logs
        return logs.get(tech) or (logs.get("app") if tech in APP_TECHS else None) or logs["*"]


# A change a release merges: its title and the files it touched ({ext}: the runtime's source extension).
Change = tuple[str, str]
# Changes by the family a technology belongs to (see `release_family`): a family's releases speak of its
# own work, an application's of its code, a proxy's of its configuration, a database's of its schema.
Changes = Mapping[str, tuple[Change, ...]]
SOURCE_EXTENSIONS: Mapping[str, str] = {"jvm": "java", "go": "go", "python": "py", "node": "ts"}
_PAYLOAD_CHANGES: Changes = {
    "app": (
        ("payload schema update", "api/serializers/order_payload.{ext}, schema/order.json"),
        ("amounts in minor units", "models/amount.{ext}, schema/payment_request.json"),
        ("checkout request parsing", "handlers/checkout_request.{ext}, api/v2/payload.{ext}"),
    ),
    "proxy": (
        ("proxy buffer sizes", "conf.d/upstream_buffers.conf, conf.d/proxy_headers.conf"),
        ("request body rewrite rule", "routes/body_rewrite.yaml"),
    ),
}
_TOKEN_CHANGES: Changes = {
    "app": (
        ("token validation refactor", "auth/token_validator.{ext}, auth/claims.{ext}"),
        ("jwt claims middleware", "middleware/jwt_claims.{ext}"),
        ("session token audience check", "security/session_token.{ext}, auth/audience.{ext}"),
    ),
}
# Changes to how an application reads its data.
_QUERY_CHANGES: Changes = {
    "app": (
        ("order items eager loading", "repository/order_items.{ext}, api/order_summary.{ext}"),
        ("line item serializer", "models/line_item.{ext}, serializers/history.{ext}"),
        ("listing query refactor", "dao/listing_query.{ext}"),
    ),
}
_CACHE_CHANGES: Changes = {
    "app": (
        ("response cache for sessions", "cache/session_cache.{ext}, config/cache.yaml"),
        ("response caching middleware", "middleware/response_cache.{ext}"),
        ("session store rewrite", "sessions/store.{ext}, config/sessions.yaml"),
    ),
    "proxy": (
        ("proxy cache zone", "conf.d/proxy_cache.conf"),
        ("response cache filter", "filters/response_cache.yaml"),
    ),
}
_INDEX_CHANGES: Changes = {
    "database": (
        ("drop index on customer_id", "migrations/orders_customer_idx.sql, schema/orders.sql"),
        ("drop unused indexes", "migrations/drop_unused_indexes.sql"),
        ("rework orders indexes", "schema/orders.sql, migrations/orders_indexes.sql"),
    ),
}
# Everyday changes of each family, which break nothing.
_ROUTINE_CHANGES: Changes = {
    "app": (
        ("routine release", "build/dependencies.lock, docs/CHANGELOG.md"),
        ("dependency updates", "build/dependencies.lock"),
        ("logging format change", "config/logging.yaml"),
        ("feature flag cleanup", "flags/cleanup.{ext}"),
        ("retry policy tuning", "retry/policy.{ext}, config/retry.yaml"),
        ("connection pool settings", "db/pool.{ext}, config/datasource.yaml"),
        ("metrics exporter upgrade", "metrics/exporter.{ext}"),
        ("pagination for list endpoints", "api/pagination.{ext}"),
        ("timeout defaults aligned", "config/timeouts.yaml"),
        ("remove deprecated v1 handlers", "handlers/v1_legacy.{ext}"),
        ("structured error responses", "api/errors.{ext}"),
        ("batch size tuning for background jobs", "jobs/batch.{ext}, config/jobs.yaml"),
        ("tracing sample rate change", "config/tracing.yaml"),
    ),
    "proxy": (
        ("routine release", "conf.d/logging.conf, docs/CHANGELOG.md"),
        ("upstream keepalive settings", "conf.d/upstream_keepalive.conf"),
        ("access log format change", "conf.d/logging.conf"),
        ("TLS cipher list update", "conf.d/tls.conf"),
        ("header size limits", "conf.d/proxy_headers.conf"),
        ("route for new endpoint", "routes/endpoints.yaml"),
        ("gzip settings", "conf.d/gzip.conf"),
        ("rate limit zones tuned", "conf.d/rate_limits.conf"),
        ("health check intervals", "conf.d/health_checks.conf"),
        ("upstream timeouts aligned", "conf.d/timeouts.conf"),
    ),
    "database": (
        ("routine release", "config/database.conf"),
        ("add column to orders", "migrations/orders_add_note.sql, schema/orders.sql"),
        ("index on created_at", "migrations/orders_created_at_idx.sql, schema/orders.sql"),
        ("vacuum and checkpoint settings", "config/maintenance.conf"),
        ("connection limits raised", "config/connections.conf"),
        ("replication settings", "config/replication.conf"),
        ("backup schedule change", "config/backup.yaml"),
        ("retention policy change", "migrations/purge_old_sessions.sql"),
    ),
    "cache": (
        ("routine release", "config/cache.conf"),
        ("memory limit settings", "config/maxmemory.conf"),
        ("eviction policy change", "config/eviction.conf"),
        ("session key TTLs", "config/sessions_keyspace.conf"),
        ("client connection limits", "config/clients.conf"),
        ("replication settings", "config/replication.conf"),
        ("persistence settings", "config/persistence.conf"),
    ),
    "queue": (
        ("routine release", "config/broker.conf"),
        ("retention policy change", "config/retention.conf"),
        ("new partition for events", "topics/events.yaml"),
        ("replication factor for events", "topics/events.yaml, config/replication.conf"),
        ("consumer group settings", "config/consumers.conf"),
        ("disk alarm thresholds", "config/disk.conf"),
    ),
    "external": (
        ("routine release", "config/egress.yaml"),
        ("provider endpoint update", "config/providers.yaml"),
        ("egress allow list update", "config/allow_list.yaml"),
        ("connect timeouts aligned", "config/timeouts.yaml"),
    ),
}


# The memory limit is the one the runtimes' own lines name (512Mi).
_OOM = ("OOMKilled", "Container {container} exceeded its memory limit (512Mi) and was killed")
_BACKOFF = ("BackOff", "Back-off restarting failed container {container}")
_UNHEALTHY = ("Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 503")
_PROBE_TIMEOUT = ("Unhealthy", 'Liveness probe failed: Get "http://{ip}:8080/healthz": context deadline exceeded')

FAULTS: Mapping[str, FaultType] = {
    fault.name: fault
    for fault in (
        FaultType(
            "bad_deployment",
            (*APP_KINDS, "gateway"),
            {
                **_exceptions(
                    {
                        "jvm": "com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException: amount_minor",
                        "go": "json: cannot unmarshal string into Go struct field Order.amount of type int64",
                        "python": "KeyError: 'amount_minor'",
                        "node": "TypeError: Cannot read properties of undefined (reading 'minor')",
                    },
                    ("ERROR unhandled exception in request handler build={version} trace_id={hex:16}",),
                ),
                "*": (
                    (
                        "ERROR upstream prematurely closed connection while reading response header build={version}",
                        "WARN error budget burn rate {int:6:40}x over 5m window",
                    ),
                ),
            },
            fix="rollback",
            error_rate=0.55,
            latency_ms=90,
            change="deploy",
            touches=_PAYLOAD_CHANGES,
            lead=(1, 6),
            fails_writes=True,
        ),
        FaultType(
            "canary_misconfiguration",
            (*APP_KINDS, "gateway"),
            {
                "*": (
                    (
                        'WARN req={hex:8} "{endpoint}" status=401 pod={canary} err="token audience mismatch"',
                        "INFO canary {canary_version} receiving {int:9:11}% of traffic",
                    ),
                    (
                        'WARN req={hex:8} "{endpoint}" status=401 pod={canary} err="invalid audience claim"',
                        "WARN canary {canary_version} error ratio above stable by {int:8:20} points",
                    ),
                )
            },
            fix="rollback",
            error_rate=0.1,
            latency_ms=25,
            failure="rejected",
            change="canary",
            lead=(2, 10),
        ),
        FaultType(
            "crash_loop",
            (*APP_KINDS, "gateway", "cache", "queue"),
            {
                "app": (
                    (
                        "CRIT worker process exited on signal 11 (core dumped)",
                        "CRIT process exited status=139 after {float:0:3}s uptime",
                    ),
                    (
                        "CRIT fatal error: unexpected signal during runtime execution [signal SIGSEGV]",
                        'ERROR startup failed: could not load config section "{pick:limits|routes|flags}"',
                    ),
                ),
                "*": (
                    (
                        "CRIT process exited status=139 after {float:0:3}s uptime",
                        'ERROR startup failed: could not load config section "{pick:limits|routes|flags}"',
                    ),
                ),
            },
            fix="restart",
            acceptable=("rollback",),
            error_rate=0.96,
            cpu_pct=4,
            memory_pct=12,
            health="down",
            failure="refused",
            events=(_BACKOFF, _UNHEALTHY),
            termination="Error (exit code 139)",
            lead=(1, 4),
            # A broker's own view: its peers restarting, partitions under-replicated, consumers falling
            # behind; producers retry refused connections, so no write is rejected.
            db_report={
                "kafka": "brokers: 1/3 up, 2 restarting; in-sync replicas 1/3 on {topic} ({int:4:12} partitions "
                "under-replicated); consumer lag {int:2000:9000} messages and rising; rejected writes 0 in the "
                "last minute; disk {disk}% used",
                "rabbitmq": "nodes: 1/3 running, 2 restarting; in-sync replicas (quorum members) 1/3 on {topic}; consumer "
                "lag {int:2000:9000} messages and rising; rejected writes 0 in the last minute; disk {disk}% used",
                # A cache that keeps restarting comes back empty each time.
                "redis": "server: uptime_in_seconds={uptime} (restarted; loading=1, dataset not loaded)\n"
                "stats: keyspace hit ratio 0.{int:1:15}; {int:100:900} ops/s",
                "memcached": "server: uptime={uptime} (restarted; curr_items {int:0:900}, cache empty)\n"
                "stats: get_hits ratio 0.{int:1:15}; {int:100:900} cmd_get/s",
            },
        ),
        FaultType(
            "traffic_spike",
            (*APP_KINDS, "gateway"),
            {
                "*": (
                    (
                        "WARN request queue depth {int:600:2400} exceeds 500; shedding load",
                        'ERROR req={hex:8} "{endpoint}" status=503 err="server overloaded, retry later"',
                    ),
                    (
                        "WARN accept queue full ({int:300:900} pending); rejecting new connections",
                        'ERROR req={hex:8} "{endpoint}" status=503 err="too many requests in flight"',
                    ),
                )
            },
            fix="scale_up",
            acceptable=("shed_load",),
            relief=("restart",),
            load=3.5,
            lead=(2, 8),
        ),
        FaultType(
            "memory_leak",
            (*APP_KINDS, "gateway", "search"),
            {
                "jvm": (
                    (
                        "WARN GC pause {float:2:11}s heap={int:95:99}% old_gen={int:96:99}%",
                        "ERROR java.lang.OutOfMemoryError: Java heap space",
                    ),
                ),
                "go": (
                    (
                        "WARN runtime: memory usage {int:480:510}Mi of 512Mi limit, GC cycles {int:30:90}/min",
                        'ERROR req={hex:8} "{endpoint}" status=503 err="handler timeout"',
                    ),
                ),
                "python": (
                    (
                        "ERROR MemoryError in worker {int:1:8}",
                        "WARN worker {int:1:8} rss {int:480:510}MB exceeds max, recycling",
                    ),
                ),
                "node": (
                    (
                        "ERROR FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
                        "WARN event loop lag {int:400:2000}ms",
                    ),
                ),
                "*": (("WARN worker rss {int:480:510}MB, recycling", "ERROR upstream timed out while reading"),),
            },
            fix="rollback",
            relief=("restart", "scale_up"),
            error_rate=0.3,
            latency_ms=700,
            cpu_pct=72,
            memory_pct=98,
            change="deploy",
            touches=_CACHE_CHANGES,
            events=(_OOM,),
            termination="OOMKilled (exit code 137)",
            lead=(12, 15),
        ),
        FaultType(
            "memory_exhaustion",
            (*APP_KINDS, "gateway", "search"),
            {
                "*": (
                    (
                        "WARN working set {int:500:512}Mi of 512Mi limit; requests in flight {int:200:600}",
                        'ERROR req={hex:8} "{endpoint}" status=503 err="pod not ready (restarting)"',
                    ),
                    (
                        "WARN memory pressure: {int:500:512}Mi of 512Mi used by {int:200:600} concurrent requests",
                        'ERROR req={hex:8} "{endpoint}" status=503 err="no ready endpoints"',
                    ),
                )
            },
            fix="scale_up",
            relief=("restart",),
            error_rate=0.35,
            latency_ms=300,
            cpu_pct=60,
            memory_pct=99,
            load=0.6,
            events=(_OOM, _UNHEALTHY),
            termination="OOMKilled (exit code 137)",
            lead=(1, 5),
        ),
        FaultType(
            "connection_pool_exhaustion",
            (*APP_KINDS, "database", "cache"),
            {
                "postgres": (
                    (
                        "FATAL remaining connection slots are reserved for non-replication superuser connections",
                        "FATAL sorry, too many clients already",
                    ),
                ),
                "mysql": (
                    (
                        "ERROR 1040 (HY000): Too many connections",
                        "WARN Aborted connection {int:1000:9999} to db: 'app' (Got timeout reading communication packets)",
                    ),
                ),
                "redis": (
                    (
                        "ERROR max number of clients reached",
                        "WARN connected_clients={int:9990:10000} rejected_connections={int:100:900}",
                    ),
                ),
                "memcached": (
                    (
                        "WARN Too many open connections (maxconns 1024)",
                        "ERROR accept(): Too many open files",
                    ),
                ),
                "*": (
                    (
                        "CRIT connection pool EXHAUSTED max=100 active=100 waiting={int:300:900}",
                        "ERROR timeout acquiring connection after {int:1000:3000}ms",
                    ),
                ),
            },
            fix="restart",
            acceptable=("scale_up",),
            error_rate=0.7,
            latency_ms=1800,
            cpu_pct=90,
            memory_pct=80,
            db_report={
                # Held on the server's side: every client keeps its usual share, none leaks them.
                "redis": "clients: connected_clients=10000 maxclients=10000 rejected_connections={int:100:900} "
                "in the last minute; {int:6000:9000} clients idle over {int:300:900}s, never closed (timeout 0), "
                "spread over every client service in its usual share",
                "memcached": "connections: curr_connections=1024 max_connections=1024 rejected_connections="
                "{int:100:900} in the last minute (listen_disabled_num {int:20:90}); {int:600:900} connections "
                "idle over {int:300:900}s, spread over every client service in its usual share",
                "*": "connections: active={max_conn} idle=0 max={max_conn} waiting={int:300:900}; longest wait "
                "{float:8:30}s; {int:60:95} backends orphaned by clients long gone, not released; every client "
                "service holds its usual share",
            },
        ),
        FaultType(
            "thread_pool_starvation",
            (*APP_KINDS, "gateway"),
            {
                "jvm": (
                    (
                        "WARN HikariPool-1 - Thread starvation or clock leap detected",
                        "WARN thread pool saturated active=200 max=200 queued={int:200:900}",
                    ),
                ),
                "go": (
                    (
                        "WARN goroutines={int:20000:90000} blocked in semacquire",
                        "WARN handler queue wait {int:900:2000}ms",
                    ),
                ),
                "*": (
                    (
                        "WARN {int:900:1024} worker_connections are not enough",
                        "WARN worker pool saturated, request waited {int:900:2000}ms",
                    ),
                ),
            },
            fix="restart",
            acceptable=("scale_up",),
            error_rate=0.1,
            latency_ms=600,
            cpu_pct=40,
            capacity_loss=0.7,
            lead=(2, 8),
        ),
        FaultType(
            "disk_full",
            ("database", "queue"),
            {
                "postgres": (
                    (
                        'PANIC could not write to file "pg_wal/xlogtemp.{int:100:999}": No space left on device',
                        'ERROR could not extend file "base/16384/{int:16000:17000}": No space left on device',
                    ),
                ),
                "mysql": (
                    (
                        "ERROR [MY-011086] Disk is full writing './binlog.{int:100:999}' (Errcode: 28 - No space left on device)",
                        "WARN InnoDB: Waiting for disk space to be freed",
                    ),
                ),
                "kafka": (
                    (
                        "ERROR Error while appending records to orders-{int:0:11}: java.io.IOException: No space left on device",
                        "ERROR Shutdown broker because all log dirs have failed",
                    ),
                ),
                "rabbitmq": (
                    (
                        "WARN disk resource limit alarm set on node rabbit@{host}: free disk space {int:10:49}MB",
                        "WARN publishers blocked: disk alarm in effect",
                    ),
                ),
                "*": (("ERROR write failed: No space left on device",),),
            },
            fix="expand_volume",
            acceptable=("scale_up",),
            error_rate=0.45,
            latency_ms=400,
            cpu_pct=70,
            failure="write",
            loses_writes=True,
            lead=(4, 15),
            db_report={
                "postgres": "disk: {volume} 100% used (0 B free); WAL {int:40:60}GB; last checkpoint "
                "failed; {int:20:90} transactions aborted in the last minute",
                "kafka": "disk: {volume} 100% used; log dir offline, its partitions without a leader; rejected "
                "writes {int:200:900} in the last minute (KafkaStorageException); in-sync replicas 1/3 on "
                "{topic}; consumer lag {int:500:3000} messages",
                "rabbitmq": "disk: {volume} 100% used; disk alarm set, publishers blocked; rejected writes "
                "{int:200:900} in the last minute; in-sync replicas (quorum members) 3/3 on {topic}; consumer lag "
                "{int:0:40} messages",
                "*": "disk: {volume} 100% used; binlog {int:40:60}GB; {int:20:90} writes failed in the last minute",
            },
        ),
        FaultType(
            "cache_eviction",
            ("cache",),
            # The hit ratio is printed in the cache's everyday words: its value is the evidence.
            {
                "redis": (
                    (
                        "WARN maxmemory reached ({maxmemory}); evicted_keys={int:40000:90000} in last 60s",
                        "INFO connected_clients={int:40:160} keyspace_hits_ratio=0.{int:20:45}",
                    ),
                ),
                "*": (
                    (
                        "WARN evictions={int:40000:90000} in last 60s, limit_maxbytes reached",
                        "INFO curr_connections={int:40:160} get_hits ratio 0.{int:20:45}",
                    ),
                ),
            },
            fix="scale_up",
            latency_ms=2,
            cpu_pct=55,
            memory_pct=99,
            caller_failure=0.45,
            failure="rejected",
            lead=(3, 12),
            db_report={
                "redis": "memory: used_memory={maxmemory} maxmemory={maxmemory} maxmemory_policy=allkeys-lru; "
                "evicted_keys={int:40000:90000} in the last minute\nstats: keyspace hit ratio 0.{int:20:45}; "
                "{int:2000:9000} ops/s",
                "memcached": "memory: bytes={maxmemory} limit_maxbytes={maxmemory}; evictions {int:40000:90000} in "
                "the last minute\nstats: get_hits ratio 0.{int:20:45}; {int:2000:9000} cmd_get/s",
            },
        ),
        FaultType(
            "upstream_rate_limit",
            (*APP_KINDS, "gateway"),
            {
                "*": (
                    (
                        'WARN req={hex:8} "{endpoint}" provider responded 429 Too Many Requests retry_after={int:20:120}s',
                        "WARN retry budget exhausted for {int:20:90} requests to provider",
                    ),
                    (
                        'WARN req={hex:8} "{endpoint}" rate limited by {provider} (quota {quota}/min), backing off',
                        'ERROR req={hex:8} "{endpoint}" status=503 err="provider quota exceeded"',
                    ),
                )
            },
            # Its lines name the request path they fail, where everyday 429s name a job.
            # Shedding load is for overload: the partner's quota is not raised by sending it less at normal traffic.
            fix="escalate",
            error_rate=0.3,
            latency_ms=500,
            lead=(2, 8),
            partner_failure="error(429)",
        ),
        FaultType(
            "db_deadlock",
            ("database",),
            {
                "postgres": (
                    (
                        "ERROR deadlock detected: process {int:1000:9999} waits for ShareLock on transaction "
                        "{int:800000:900000}; blocked by process {blocker}",
                        "LOG process {int:1000:9999} still waiting for ShareLock on transaction {int:800000:900000} "
                        "after {int:1000:9000}.{int:100:999} ms",
                    ),
                    (
                        "ERROR deadlock detected",
                        'LOG CONTEXT: while updating tuple ({int:0:9999},{int:1:60}) in relation "{table}"',
                    ),
                ),
                "mysql": (
                    (
                        "ERROR 1213 (40001): Deadlock found when trying to get lock; try restarting transaction",
                        "WARN Lock wait timeout exceeded; try restarting transaction",
                    ),
                    (
                        "WARN InnoDB: Transactions deadlock detected, dumping detailed information.",
                        "ERROR 1213 (40001): Deadlock found when trying to get lock; try restarting transaction",
                    ),
                ),
            },
            # Ending the session that holds the locks ends the deadlock; restarting the primary ends every
            # session too, and its callers' requests fail while it comes back.
            fix="terminate_blocker",
            acceptable=("restart",),
            error_rate=0.45,
            latency_ms=4000,
            cpu_pct=70,
            lead=(2, 6),
            # {held}: how long the blocking transaction has been open, never longer than the fault or the
            # pods that hold it; {waiting} scales with how strongly the fault shows. The statements are the
            # client's, on its own tables: {client} is a service that uses this database.
            db_report={
                "*": "locks: {waiting} sessions waiting on row locks; {int:3:40} deadlocks in the last minute "
                "(UPDATE {table} / UPDATE {other_table}, victims rolled back); blocking session: pid {blocker} "
                "client={client} state=idle in transaction, transaction open {held}s, last statement: UPDATE "
                "{table} SET updated_at = now() WHERE id = $1; connections active={int:60:95} max={max_conn}"
            },
        ),
        FaultType(
            "slow_query",
            ("database",),
            {
                "postgres": (
                    (
                        "LOG duration: {int:3000:9000}.{int:100:999} ms statement: SELECT * FROM orders WHERE "
                        "customer_id = $1 ORDER BY created_at",
                        'LOG temporary file: path "base/pgsql_tmp/pgsql_tmp{int:1000:9999}.0", size {int:100:900}000000',
                    ),
                ),
                "mysql": (
                    (
                        "WARN # Query_time: {int:3:9}.{int:100:999} Rows_examined: {int:2:9}000000 SELECT * FROM orders "
                        "WHERE customer_id = ?",
                    ),
                ),
            },
            fix="rollback",
            acceptable=("scale_up",),
            error_rate=0.25,
            latency_ms=4000,
            cpu_pct=86,
            change="migration",
            touches=_INDEX_CHANGES,
            lead=(3, 12),
            db_report={
                "*": "slowest statements: SELECT ... WHERE customer_id = ? mean {statement_ms}ms "
                "calls={int:200:900}/min (full scan, rows={int:2:9}000000); connections active={int:40:80} max={max_conn}"
            },
        ),
        FaultType(
            "n_plus_one_query",
            APP_KINDS,
            {
                "jvm": (
                    (
                        'WARN org.hibernate.stat - request "{endpoint}" executed {int:40:160} JDBC statements in '
                        "{int:900:3000}ms build={version}",
                        'WARN slow request "{endpoint}" {int:900:3000}ms db_time={int:800:2800}ms build={version}',
                    ),
                ),
                "app": (
                    (
                        'WARN slow request "{endpoint}" {int:900:3000}ms across {int:40:160} queries build={version}',
                        "WARN db pool wait {int:200:900}ms active={int:40:100} build={version}",
                    ),
                ),
            },
            fix="rollback",
            latency_ms=220,
            cpu_pct=70,
            change="deploy",
            touches=_QUERY_CHANGES,
            lead=(2, 8),
            through="database",
            fanout=6.0,
            pushed_report=(
                "top statement by calls: SELECT * FROM {table} WHERE id = $1 calls={calls}/min (usual "
                "{usual_calls}/min) client={client}, mean {statement_ms}ms; connections active={int:60:95} max={max_conn}; "
                "locks waiting 0"
            ),
        ),
        FaultType(
            "tls_cert_expired",
            (*APP_KINDS, "gateway"),
            {
                "nginx": (
                    (
                        "ERROR SSL_do_handshake() failed (SSL: error:0A000086:certificate verify failed) while SSL "
                        "handshaking, server: {host}, notAfter={expired}",
                    ),
                ),
                "envoy": (
                    (
                        "WARN TLS error: 268435581:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED server={host}",
                        "INFO certificate for {host} notAfter={expired}",
                    ),
                ),
                "*": (
                    (
                        "ERROR TLS handshake failed: x509: certificate has expired or is not yet valid (notAfter={expired}) "
                        "server={host}",
                    ),
                    (
                        "WARN {int:40:70}% of TLS handshakes failing over last 5m server={host}",
                        "ERROR tls: failed to verify certificate: x509: certificate has expired server={host}",
                    ),
                ),
            },
            fix="renew_certificate",
            error_rate=0.6,
            latency_ms=30,
            failure="handshake",
            lead=(1, 3),
        ),
        FaultType(
            "null_pointer",
            APP_KINDS,
            {
                **_exceptions(
                    {
                        "jvm": "java.lang.NullPointerException at TokenValidator.validate(TokenValidator.java:{int:100:200})",
                        "go": "runtime error: invalid memory address or nil pointer dereference",
                        "python": "AttributeError: 'NoneType' object has no attribute 'claims'",
                        "node": "TypeError: Cannot read properties of null (reading 'claims')",
                    },
                    ("ERROR unhandled exception in request handler build={version} trace_id={hex:16}",),
                ),
            },
            fix="rollback",
            error_rate=0.42,
            latency_ms=15,
            change="deploy",
            touches=_TOKEN_CHANGES,
            lead=(1, 6),
        ),
        FaultType(
            "clock_skew",
            APP_KINDS,
            {
                "*": (
                    (
                        'WARN req={hex:8} "{endpoint}" status=401 err="token used before issued: iat is {skew_s}s in the future"',
                        "WARN chronyd: no selectable sources; system clock offset -{skew}s",
                    ),
                    (
                        'WARN req={hex:8} "{endpoint}" status=401 err="jwt not valid yet (nbf)"',
                        "WARN ntp: time offset -{skew_s}s exceeds 1s",
                    ),
                )
            },
            # Containers share their node's clock: a new pod on the same node keeps the offset.
            fix="resync_clock",
            error_rate=0.25,
            latency_ms=20,
            failure="rejected",
            lead=(3, 15),
        ),
        FaultType(
            "external_dependency_failure",
            APP_KINDS,
            {
                "*": (
                    (
                        "ERROR {provider} dial tcp {int:10:250}.{int:0:255}.{int:0:255}.{int:1:250}:443: i/o timeout",
                        "WARN all {int:2:4} {provider} endpoints unreachable",
                    ),
                    (
                        "ERROR call to {provider} failed: connect timeout after {int:2000:5000}ms",
                        "WARN {provider} health check failing for {failing_min} minutes",
                    ),
                )
            },
            fix="escalate",
            error_rate=0.85,
            latency_ms=2400,
            cpu_pct=20,
            lead=(1, 6),
            partner_failure="timeout",
        ),
        FaultType(
            "replica_failover",
            ("cache", "database"),
            {
                "redis": (
                    (
                        "WARN CLUSTERDOWN The cluster is down: failover in progress",
                        "WARN Connection with master lost; MASTER <-> REPLICA sync aborted",
                    ),
                ),
                "memcached": (("WARN server {ip}:11211 marked dead, rehashing keys",),),
                "postgres": (
                    (
                        "ERROR cannot execute INSERT in a read-only transaction",
                        "WARN primary unreachable; standby not promoted (promotion pending)",
                    ),
                ),
                "mysql": (
                    (
                        "ERROR 1290 (HY000): The MySQL server is running with the --read-only option so it cannot "
                        "execute this statement",
                        "WARN replica not promoted: no eligible candidate",
                    ),
                ),
            },
            fix="failover",
            acceptable=("restart",),
            error_rate=0.45,
            latency_ms=40,
            cpu_pct=35,
            failure="write",
            loses_writes=True,
            lead=(1, 4),
            # Replicas are ready only while linked to a primary: none is, so their probes fail. memcached
            # replicates nothing: one of its servers is down, and its own probe fails.
            events=(("Unhealthy", "Readiness probe failed: replication link to primary down, no primary elected"),),
            tech_events={
                "memcached": (
                    ("Unhealthy", "Readiness probe failed: dial tcp {ip}:11211: connect: connection refused"),
                )
            },
            # A cache's master is gone and no replica took over: the link is down, the offset stands still
            # and the replicas wait for a full resync; memcached's clients drop the dead server from the ring.
            db_report={
                "redis": "replication: role=slave master_link_status=down (master lost {held}s ago) "
                "master_sync_in_progress=1 (full resync pending, no replica promoted) connected_slaves=0 "
                "slave_read_only=1 master_repl_offset={offset}",
                "memcached": "pool: servers {alive}/{servers} live in the client ring; server {ip}:11211 marked dead {held}s "
                "ago, its keys rehashed onto the others\nstats: get_hits ratio 0.{int:55:75} (rehashed keys "
                "missing); {int:2000:9000} cmd_get/s",
                "*": "replication: role=replica (promotion pending) read_only=on; replicas in sync 0/2",
            },
        ),
    )
}


def release_family(tech: str) -> str:
    """The family whose changes a technology's releases merge: application, proxy, or the kind of store."""
    if tech in APP_TECHS:
        return "app"
    if tech in PROXY_TECHS:
        return "proxy"
    return next(kind for kind, techs in TECHNOLOGIES.items() if tech in techs)


# Every release merges changes of its family from one vocabulary: those that shipped faults and everyday
# ones, so a release's title and files say what it was about, not whether it broke anything.
RELEASE_CHANGES: Mapping[str, tuple[Change, ...]] = {
    family: (*routine, *(c for f in FAULTS.values() if f.change and f.touches for c in f.touches.get(family, ())))
    for family, routine in _ROUTINE_CHANGES.items()
}


def change_text(change: Change, tech: str) -> tuple[str, str]:
    """A change's title and files, with the runtime's source extension."""
    title, files = change
    return title, files.replace("{ext}", SOURCE_EXTENSIONS.get(tech, "conf"))
