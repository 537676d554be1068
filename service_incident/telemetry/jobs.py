"""Background jobs: the work of a service that no request waits on (exports, webhook deliveries,
backups, log shipping), the lines a failing run writes, and which of them fail at a step.

A red herring that fails work fails one of its service's jobs, keyed by the herring: its lines name
that job, the metrics' breakdown shows that job's row failing, and its traces start at that job. The
same job is failing everyday noise on some services, whatever else is wrong with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from ..faults import PROXY_TECHS
from ..herrings import HERRINGS
from ..topology import OPERATIONS
from ..world import World, distraction_onset, distraction_strength, spread, unit
from ..world.course import background_error
from .phrases import incident_vocabulary


@dataclass(frozen=True, slots=True)
class Job:
    """A background job: its name, as its lines and the metrics' breakdown give it, and the lines a
    failing run writes."""

    name: str
    failing: tuple[str, ...]


def _job(name: str, *failing: str) -> Job:
    return Job(name, tuple(line.replace("{job}", name) for line in failing))


_APP_JOBS = (
    _job(
        "nightly-export",
        "WARN provider responded 429 Too Many Requests retry_after={int:20:120}s job={job}",
        "ERROR job={job} run {hex:6} failed: deadline exceeded after {int:1000:5000}ms",
    ),
    _job(
        "webhook-delivery",
        "ERROR job={job} partner webhook delivery failed: x509: certificate has expired host=hooks.partner.io",
    ),
    _job(
        "report-upload",
        "ERROR job={job} upload to object storage failed: connection reset by peer bucket=reports-{hex:4}",
    ),
)
# A datastore's own background work: backups, snapshots, audit streams (no webhooks or exports).
_DATASTORE_JOBS = (
    _job(
        "backup-upload",
        "ERROR job={job} backup upload to object storage failed: connection reset by peer bucket=backups-{hex:4}",
    ),
    _job("snapshot", "WARN job={job} scheduled snapshot {hex:6} failed: deadline exceeded after {int:1000:5000}ms"),
    _job("audit-stream", "ERROR job={job} shipping to analytics failed: connection refused host=audit-sink.internal"),
)
# A proxy ships its access logs; memcached persists nothing and exports its stats.
_PROXY_JOBS = (
    _job(
        "log-shipping",
        "ERROR job={job} access log shipping failed: connection reset by peer host=log-sink.internal",
        "WARN job={job} access log upload to object storage failed: deadline exceeded after {int:1000:5000}ms",
    ),
)
# Each technology's own jobs, in its own words (its schedulers, task queues, replication and archiving).
_TECH_JOBS: Mapping[str, tuple[Job, ...]] = {
    **dict.fromkeys(
        PROXY_TECHS,
        (
            *_PROXY_JOBS,
            _job("geoip-refresh", "ERROR job={job} download failed: connection timed out host=geoip-mirror.internal"),
            _job("ocsp-refresh", "WARN job={job} OCSP responder unreachable for stapling, keeping cached response"),
        ),
    ),
    "memcached": (
        _job(
            "stats-export",
            "ERROR job={job} stats export to metrics sink failed: connection refused",
            "WARN job={job} stats push to metrics sink timed out after {int:1000:5000}ms, will retry",
        ),
    ),
    "jvm": (
        _job(
            "invoice-sync", "ERROR [quartz-{int:1:4}] job={job} failed: java.net.SocketTimeoutException: Read timed out"
        ),
        _job(
            "audit-events",
            "WARN [kafka-producer-network-thread] job={job} send failed, retrying: "
            "org.apache.kafka.common.errors.TimeoutException",
        ),
        _job(
            "report-export",
            "ERROR [scheduler-{int:1:8}] job={job} failed: SdkClientException: Unable to execute HTTP request",
        ),
    ),
    "go": (
        _job("webhook-dispatch", 'ERROR job={job}: Post "https://hooks.partner.io/events": context deadline exceeded'),
        _job("s3-sync", "WARN job={job}: RequestError: send request failed: read: connection reset by peer"),
        _job("ledger-export", "ERROR job={job}: rpc error: code = Unavailable desc = connection refused"),
    ),
    "python": (
        _job(
            "export-reports",
            "ERROR job={job} celery task export_reports[{hex:8}] raised: requests.exceptions.ReadTimeout",
        ),
        _job(
            "send-webhooks",
            "WARN job={job} celery task send_webhooks[{hex:8}] retry in {int:10:120}s: "
            "SSLError(certificate has expired)",
        ),
        _job(
            "upload-archives",
            "ERROR job={job} botocore.exceptions.EndpointConnectionError: could not connect to endpoint",
        ),
    ),
    "node": (
        _job(
            "email-digest",
            "ERROR job={job} failed: FetchError: request to https://hooks.partner.io failed: socket hang up",
        ),
        _job("sitemap-build", "WARN job={job} upload failed: ETIMEDOUT bucket=reports-{hex:4}"),
        _job("search-sync", "ERROR job={job} failed: ECONNRESET host=indexer.internal"),
    ),
    "postgres": (
        _job(
            "wal-archive",
            "WARN job={job} archive command failed with exit code 1: "
            "WAL segment {hex:8} not shipped to backups-{hex:4}",
        ),
        _job(
            "analytics-replication",
            'ERROR job={job} logical replication worker for subscription "analytics_sub" exited: connection timed out',
        ),
    ),
    "mysql": (
        _job(
            "analytics-replica",
            "WARN job={job} [MY-010584] Replica I/O for channel 'analytics': error reconnecting to source, retrying",
        ),
        _job("xtrabackup", "ERROR job={job} xtrabackup stream to backups-{hex:4} failed: connection reset by peer"),
    ),
    "kafka": (
        _job("mirror-maker", "WARN job={job} [MirrorMaker] connection to dr-cluster failed, backing off {int:1:30}s"),
        _job("tiered-storage", "ERROR job={job} segment upload to bucket=archive-{hex:4} failed: deadline exceeded"),
    ),
    "rabbitmq": (
        _job("dr-shovel", "WARN job={job} shovel connection to dr-broker.internal refused, retrying in {int:1:30}s"),
    ),
    "redis": (
        _job(
            "rdb-upload", "WARN job={job} RDB snapshot upload to backups-{hex:4} failed: deadline exceeded, will retry"
        ),
    ),
}
# Every job any service may run, for surveys of their lines.
JOBS: tuple[Job, ...] = tuple(
    {job.name: job for job in (*_APP_JOBS, *_DATASTORE_JOBS, *(j for own in _TECH_JOBS.values() for j in own))}.values()
)
# Technologies that keep no data and run no jobs of the application's kind: their own jobs alone.
_OWN_JOBS_ONLY = frozenset({*PROXY_TECHS, "memcached"})
# How often a failing job's lines repeat in a log window (it retries), at most.
RETRIES = 3
_EVERYDAY_ERRORS = (0.03, 0.43)


def jobs_of(world: World, service: str) -> tuple[Job, ...]:
    """A service's background jobs: those of its kind and its technology's own, of which each incident
    runs its own subset (`phrases.incident_vocabulary`), so the same jobs do not recur everywhere."""
    node = world.plan.by_name[service]
    return _jobs(world.incident.id, node.tech, node.kind)


# Kept: the metrics' breakdown, traces and logs ask on every look.
@lru_cache(maxsize=4096)
def _jobs(incident_id: str, tech: str, kind: str) -> tuple[Job, ...]:
    own = _TECH_JOBS.get(tech, ())
    common = () if tech in _OWN_JOBS_ONLY else _DATASTORE_JOBS if kind in OPERATIONS else _APP_JOBS
    jobs = {job.name: job for job in (*common, *own)}
    return tuple(jobs[name] for name in incident_vocabulary(incident_id, "jobs", tuple(jobs)))


def job_for(world: World, service: str, *key: object) -> Job:
    """The job of a service that a herring (or everyday noise) keyed by `key` fails."""
    jobs = jobs_of(world, service)
    return jobs[int(unit(world.incident.id, service, *key, "job") * len(jobs))]


def job_lines(world: World, service: str, *key: object) -> list[str]:
    """The lines of a failing job's runs in a log window: a run retries, so they repeat."""
    iid = world.incident.id
    options = job_for(world, service, *key).failing
    chosen = list(dict.fromkeys(options[int(unit(iid, *key, "job line", n) * len(options))] for n in range(2)))
    repeats = 1 + int(unit(iid, *key, "job repeats") * RETRIES)
    return [line for line in chosen for _ in range(repeats)]


def everyday_failing(world: World, service: str) -> bool:
    """Whether a service shows a failing job as everyday noise (keyed: the same on every look)."""
    rate = HERRINGS["flaky_errors"].everyday
    return unit(world.incident.id, service, "flaky_errors", "everyday") < rate


def failing_jobs(world: World, service: str, step: int) -> dict[str, float]:
    """The error rate of each job of a service that fails at a step: a herring's, and everyday noise's."""
    incident = world.incident
    found: dict[str, float] = {}
    if everyday_failing(world, service):
        name = job_for(world, service, service, "everyday").name
        found[name] = spread(*_EVERYDAY_ERRORS, incident.id, service, "everyday errors")
    for index, distraction in enumerate(incident.distractions):
        if distraction.service != service or step < -distraction_onset(incident.id, index):
            continue
        error = background_error(distraction, distraction_strength(distraction, incident.id, index))
        if error > 0.0:
            name = job_for(world, service, index).name
            found[name] = max(found.get(name, 0.0), error)
    return found


def minor_job(world: World, service: str) -> str:
    """The job a red herring's minor fault on a service fails ("" if it has none)."""
    for index, distraction in enumerate(world.incident.distractions):
        if distraction.service == service and HERRINGS[distraction.kind].minor_fault:
            return job_for(world, service, index).name
    return ""
