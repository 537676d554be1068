"""The fault taxonomy: what each kind of failure does to its service and what its callers see.

Every fault is data: its metric signature at full intensity, the log lines it writes on its own
service, the line a caller writes when a call to it fails, and how it is remediated. The world model
interprets these uniformly; nothing here names an incident.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Remedy = Literal["restart", "rollback", "scale_up", "escalate"]
Health = Literal["degraded", "down"]

APP_KINDS = ("web", "auth", "payments", "orders", "checkout", "inventory", "search", "notifications", "app")
DATASTORES = ("database", "cache", "queue")


@dataclass(frozen=True, slots=True)
class FaultType:
    """One failure mode. Metric targets are reached at intensity 1 and scale linearly below it."""

    name: str
    kinds: tuple[str, ...]
    error_rate: float
    latency_ms: float
    cpu_pct: float | None
    memory_pct: float | None
    health: Health
    logs: tuple[str, ...]
    caller_log: str
    fix: Remedy
    acceptable: tuple[Remedy, ...] = ()
    # A datastore that refuses or loses writes puts data at risk, which the severity rubric
    # treats as P0 whatever the traffic impact.
    data_at_risk: bool = False
    # Calls that fail on the caller's side although this service logs no error: cache misses,
    # requests its clients give up on.
    caller_failure: float = 0.0
    # Remedies that buy a few steps of relief before the fault relapses (a restart of a saturated
    # service empties its queues; the load is still there).
    relief: tuple[Remedy, ...] = ()
    # The change that shipped the fault, as the deploy history lists it; None when no change did.
    change: str | None = None
    # What the database's own diagnostics show (run_db_query), for faults that live in a database.
    db_report: str | None = None
    # Whether the orchestrator keeps restarting the service (crash loops, OOM kills).
    restarts: bool = False


_CALLER_5XX = 'ERROR req={hex:8} "{endpoint}" status=503 upstream={upstream} err="upstream returned 503"'

FAULTS: Mapping[str, FaultType] = {
    fault.name: fault
    for fault in (
        FaultType(
            "bad_deployment", (*APP_KINDS, "gateway"), 0.55, 120, None, None, "degraded",
            (
                'ERROR req={hex:8} "{endpoint}" status=500 exception="SerializationError: unknown field '
                "'amount_minor' in payload\" build={version}",
                "ERROR unhandled exception in request handler build={version} trace_id={hex:16}",
                "WARN error budget burn rate {int:12:40}x over 5m window",
            ),
            _CALLER_5XX, fix="rollback", change="deploy {version}: payload schema update",
        ),
        FaultType(
            "canary_misconfiguration", (*APP_KINDS, "gateway"), 0.18, 30, None, None, "degraded",
            (
                'WARN req={hex:8} "{endpoint}" status=401 pod={svc}-canary-{hex:5} '
                'err="token audience mismatch: expected api.internal got api"',
                "INFO canary {version} receiving {int:9:11}% of traffic",
            ),
            'ERROR req={hex:8} "{endpoint}" status=401 upstream={upstream} err="upstream rejected credentials"',
            fix="rollback", change="canary {version} started at 10% of traffic",
        ),
        FaultType(
            "crash_loop", (*APP_KINDS, "gateway", "cache", "queue"), 0.96, 0, 4, 12, "down",
            (
                "CRIT worker process {int:1000:9999} exited on signal 11 (core dumped)",
                "WARN Back-off restarting failed container {svc} restarts={int:6:30}",
                "CRIT process exited status=139 after {float:0:3}s uptime",
            ),
            'ERROR req={hex:8} "{endpoint}" status=502 upstream={upstream} err="connection refused"',
            fix="restart", restarts=True,
        ),
        FaultType(
            "traffic_spike", (*APP_KINDS, "gateway"), 0.3, 2600, 97, None, "degraded",
            (
                "WARN request queue depth {int:600:2400} exceeds 500; shedding load",
                "WARN rps={int:1800:2600} over last 60s (7d p50 {int:700:950}) replicas={int:2:3}",
                'ERROR req={hex:8} "{endpoint}" status=503 err="server overloaded, retry later"',
            ),
            'ERROR req={hex:8} "{endpoint}" status=504 upstream={upstream} err="deadline exceeded after 2000ms"',
            fix="scale_up", relief=("restart",),
        ),
        FaultType(
            "memory_leak", (*APP_KINDS, "gateway", "search"), 0.35, 900, 70, 98, "degraded",
            (
                "WARN GC pause {float:2:11}s heap={int:95:99}% old_gen={int:96:99}%",
                "ERROR java.lang.OutOfMemoryError: Java heap space",
                "WARN container {svc} OOMKilled restarts={int:3:9} in 10m",
            ),
            _CALLER_5XX, fix="rollback", relief=("restart", "scale_up"), change="deploy {version}: response cache for sessions", restarts=True,
        ),
        FaultType(
            "memory_exhaustion", (*APP_KINDS, "gateway", "search"), 0.4, 400, 60, 99, "degraded",
            (
                "WARN container {svc} OOMKilled: memory limit 512Mi reached, restarts={int:3:9} in 10m",
                "WARN working set {int:500:512}Mi of 512Mi limit; requests in flight {int:200:600}",
                'ERROR req={hex:8} "{endpoint}" status=503 err="pod not ready (restarting)"',
            ),
            _CALLER_5XX, fix="scale_up", relief=("restart",), restarts=True,
        ),
        FaultType(
            "connection_pool_exhaustion", (*APP_KINDS, "database", "cache"), 0.75, 4800, 96, 90, "degraded",
            (
                "CRIT connection pool EXHAUSTED max=100 active=100 waiting={int:300:900} oldest_wait={float:8:30}s",
                "ERROR remaining connection slots are reserved for non-replication superuser connections",
                "WARN disk IO utilisation {int:96:100}% await={int:80:400}ms",
            ),
            'ERROR req={hex:8} "{endpoint}" status=504 upstream={upstream} err="timeout acquiring connection after 2000ms"',
            fix="restart", acceptable=("scale_up",),
            db_report="connections: active=100 idle=0 max=100 waiting={int:300:900}; longest wait {float:8:30}s; "
            "top client: {pick:auth|payments|orders} ({int:60:95} connections, state idle in transaction)",
        ),
        FaultType(
            "thread_pool_starvation", (*APP_KINDS, "gateway"), 0.24, 1500, 66, None, "degraded",
            (
                "WARN {int:900:1024} worker_connections are not enough, accept queue {int:300:800}",
                "WARN thread pool saturated active=200 max=200 queued={int:200:900}",
                'ERROR req={hex:8} "{endpoint}" status=502 err="no free worker, request dropped after queueing {int:900:2000}ms"',
            ),
            _CALLER_5XX, fix="restart", acceptable=("scale_up",),
        ),
        FaultType(
            "disk_full", ("database", "queue"), 0.5, 1500, 88, None, "degraded",
            (
                'CRIT could not write to file "pg_wal/xlogtemp.{int:100:999}": No space left on device',
                "WARN WAL backlog {int:40:60}GB; archive command failing for {int:10:40} segments",
                "ERROR could not extend file \"base/16384/{int:16000:17000}\": No space left on device",
            ),
            'ERROR req={hex:8} "{endpoint}" status=500 upstream={upstream} err="write failed: could not extend file"',
            fix="scale_up", data_at_risk=True,
            db_report="disk: /var/lib/postgresql 100% used (0 B free); WAL {int:40:60}GB; "
            "last checkpoint failed; {int:20:90} transactions aborted in the last minute",
        ),
        FaultType(
            "cache_eviction", ("cache",), 0.0, 3, 55, 99, "degraded",
            (
                "WARN maxmemory reached ({int:4:8}gb); evicted_keys={int:40000:90000} in last 60s policy=allkeys-lru",
                "WARN keyspace_hits_ratio=0.{int:20:45}",
            ),
            'ERROR req={hex:8} "{endpoint}" status=401 upstream={upstream} err="session sess:{hex:10} not found in store"',
            fix="scale_up", caller_failure=0.45,
        ),
        FaultType(
            "upstream_rate_limit", (*APP_KINDS, "gateway"), 0.3, 700, None, None, "degraded",
            (
                "WARN provider responded 429 Too Many Requests retry_after={int:20:120}s quota=per-minute",
                "WARN retry budget exhausted for {int:20:90} requests to provider",
            ),
            'ERROR req={hex:8} "{endpoint}" status=503 upstream={upstream} err="upstream answered 429 Too Many Requests"',
            fix="escalate",
        ),
        FaultType(
            "db_deadlock", ("database",), 0.07, 1000, 78, None, "degraded",
            (
                "WARN process {int:1000:9999} still waiting for AccessExclusiveLock on relation {int:16000:17000} "
                "after {int:1000:9000}.{int:100:999} ms",
                "ERROR deadlock detected: process {int:1000:9999} waits for ShareLock on transaction {int:800000:900000}",
                'INFO statement: ALTER TABLE {pick:payments|orders|sessions} ADD COLUMN {pick:risk_score|region|ttl} integer',
            ),
            'ERROR req={hex:8} "{endpoint}" status=504 upstream={upstream} err="query canceled: statement timeout"',
            fix="restart",
            db_report="locks: {int:30:120} sessions waiting; blocker pid {int:1000:9999} holds AccessExclusiveLock for "
            "{int:60:600}s running ALTER TABLE; connections active={int:60:95} max=100",
        ),
        FaultType(
            "slow_query", ("database",), 0.06, 680, 86, None, "degraded",
            (
                "WARN duration: {int:3000:9000}.{int:100:999} ms statement: SELECT * FROM {pick:orders|payments|sessions} "
                "WHERE customer_id = $1 ORDER BY created_at",
                "WARN temporary file: path \"base/pgsql_tmp/pgsql_tmp{int:1000:9999}.0\", size {int:100:900}000000",
            ),
            'ERROR req={hex:8} "{endpoint}" status=504 upstream={upstream} err="query canceled: statement timeout"',
            fix="rollback", acceptable=("scale_up",), change="migration {version}: drop index on customer_id",
            db_report="slowest statements: SELECT ... WHERE customer_id = $1 mean {int:3000:9000}ms calls={int:200:900}/min "
            "(Seq Scan, rows={int:2:9}000000); connections active={int:40:80} max=100",
        ),
        FaultType(
            "tls_cert_expired", (*APP_KINDS, "gateway"), 0.6, 40, None, None, "degraded",
            (
                'ERROR TLS handshake failed: x509: certificate has expired or is not yet valid '
                '(notAfter={expired})',
                "WARN {int:40:70}% of TLS handshakes failing over last 5m",
            ),
            'ERROR req={hex:8} "{endpoint}" status=502 upstream={upstream} err="upstream TLS handshake failed"',
            fix="escalate",
        ),
        FaultType(
            "null_pointer", APP_KINDS, 0.42, 20, None, None, "degraded",
            (
                'ERROR req={hex:8} "{endpoint}" status=500 exception="NullPointerException at '
                'TokenValidator.validate(TokenValidator.java:{int:100:200})" build={version}',
                "ERROR unhandled exception in request handler build={version} trace_id={hex:16}",
            ),
            _CALLER_5XX, fix="rollback", change="deploy {version}: token validation refactor",
        ),
        FaultType(
            "clock_skew", APP_KINDS, 0.25, 30, None, None, "degraded",
            (
                'WARN req={hex:8} "{endpoint}" status=401 err="token used before issued: iat is {int:300:600}s in the future"',
                "WARN chronyd: no selectable sources; system clock offset +{int:300:600}.{int:100:999}s",
            ),
            'ERROR req={hex:8} "{endpoint}" status=401 upstream={upstream} err="upstream rejected token"',
            fix="restart",
        ),
        FaultType(
            "external_dependency_failure", APP_KINDS, 0.9, 3000, 20, None, "degraded",
            (
                "ERROR provider dial tcp {int:10:250}.{int:0:255}.{int:0:255}.{int:1:250}:636: i/o timeout; "
                "all {int:2:4} backends unreachable",
                'ERROR req={hex:8} "{endpoint}" status=503 err="identity backend unavailable"',
            ),
            _CALLER_5XX, fix="escalate",
        ),
        FaultType(
            "replica_failover", ("cache", "database"), 0.5, 40, 35, None, "degraded",
            (
                "WARN -READONLY You can't write against a read only replica",
                "WARN failover-abort-no-good-replica: no replica eligible for promotion",
                "ERROR cluster state changed: fail (slots {int:5000:12000}-16383 not covered)",
            ),
            'ERROR req={hex:8} "{endpoint}" status=503 upstream={upstream} err="READONLY replica refused write"',
            fix="restart",
            db_report="replication: role=replica (promotion pending) read_only=on; replicas in sync 0/2",
        ),
    )
}
