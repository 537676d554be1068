"""Background jobs: the work of a service that no request waits on (exports, webhook deliveries,
backups, log shipping), the lines a failing run writes, and which of them fail at a step.

A red herring that fails work fails one of its service's jobs, keyed by the herring: its lines name
that job, the metrics' breakdown shows that job's row failing, and its traces start at that job. The
same job is failing everyday noise on some services, whatever else is wrong with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..faults import PROXY_TECHS
from ..herrings import HERRINGS
from ..topology import OPERATIONS
from ..world import World, distraction_onset, distraction_strength, spread, unit
from ..world.course import background_error


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
_TECH_JOBS: Mapping[str, tuple[Job, ...]] = {
    **dict.fromkeys(PROXY_TECHS, _PROXY_JOBS),
    "memcached": (_job("stats-export", "ERROR job={job} stats export to metrics sink failed: connection refused"),),
}
# How often a failing job's lines repeat in a log window (it retries), at most.
RETRIES = 3
_EVERYDAY_ERRORS = (0.03, 0.43)


def jobs_of(world: World, service: str) -> tuple[Job, ...]:
    node = world.plan.by_name[service]
    found = _TECH_JOBS.get(node.tech)
    if found is not None:
        return found
    return _DATASTORE_JOBS if node.kind in OPERATIONS else _APP_JOBS


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
