"""The phrase tables log lines are drawn from: side work by technology (a red herring's own lines are
in its row of herrings.HERRINGS), the lines remedies leave, and who ships releases."""

from __future__ import annotations

from ..faults import PROXY_TECHS
from ..world import unit

# How many routine lines a two-minute window of a service's logs holds.
ROUTINE_LINES = (2, 5)

# Who ships a service's releases: one pipeline per service, whatever the release.
RELEASE_AUTHORS = ("ci-bot", "release-bot", "argocd", "spinnaker", "deploy-pipeline")
# The share of an application's recent releases that start as a canary: about the share of shipped
# faults that are a canary's, so a canary release says no more about breaking than a full one.
CANARY_SHARE = 0.25

# The periods a service's config sync runs on, in minutes: a two-minute log window shows a reload from
# about a quarter of services.
CONFIG_SYNC_MINUTES = (3, 5, 8, 10, 15)
# A datastore's own busy side work (no reports or reindexing jobs of its own): compaction. The jobs
# that fail are in `jobs`.
THROTTLED = "WARN cpu throttled for {int:10:40}% of the last period"
DATASTORE_WORK: dict[str, tuple[str, ...]] = {
    "noisy_neighbour": (
        "INFO background compaction in progress ({int:20:80}% done)",
        THROTTLED,
    ),
}
# Busy side work of technologies that keep no data of their own or run no jobs: a proxy rotates its
# access logs; memcached rebalances its slabs; redis rewrites its append-only file.
PROXY_WORK: dict[str, tuple[str, ...]] = {
    "noisy_neighbour": (
        "INFO access log rotation: compressing {int:2:9} files",
        "INFO job=geoip-refresh loaded database build {int:20260101:20261130}",
        "INFO worker process {int:1000:9999} exited on reload, new workers started",
        THROTTLED,
    ),
}
# Side work of application runtimes, in each one's words: its schedulers, task queues, collectors.
# Every job line names its job: a fault's lines name the request path they fail instead.
_JOB_WORK = (
    "INFO batch job reindex-{hex:4} running, processed {int:10000:90000} rows",
    "INFO nightly report generation started for {int:100:900} accounts",
    THROTTLED,
)
APP_WORK: dict[str, dict[str, tuple[str, ...]]] = {
    "jvm": {
        "noisy_neighbour": (
            *_JOB_WORK,
            "INFO [G1 Young Generation] GC pause {int:8:60}ms, heap {int:40:70}% after collection",
            "INFO [scheduler-1] job=cache-warmup loaded {int:1000:9000} entries",
            "INFO [quartz-2] job=ledger-rollup processed {int:1000:90000} rows",
        ),
    },
    "go": {
        "noisy_neighbour": (
            *_JOB_WORK,
            "INFO runtime: gc {int:100:999} heap {int:120:300}MB -> {int:60:110}MB, {int:2:9}ms pause",
            "INFO job=reconcile scanned {int:1000:90000} records in {int:2:40}s",
        ),
    },
    "python": {
        "noisy_neighbour": (
            *_JOB_WORK,
            "INFO celery beat: sending due task nightly_rollup",
            "INFO job=thumbnail-batch processed {int:100:900} images",
            "INFO gc: collected {int:1000:90000} objects in generation 2",
        ),
    },
    "node": {
        "noisy_neighbour": (
            *_JOB_WORK,
            "INFO job=sitemap-build generated {int:1000:9000} urls",
            "INFO scavenge gc {int:2:20}ms heap {int:60:300}MB",
        ),
    },
}
TECH_WORK: dict[str, dict[str, tuple[str, ...]]] = {
    **dict.fromkeys(PROXY_TECHS, PROXY_WORK),
    **APP_WORK,
    "postgres": {
        "noisy_neighbour": (
            *DATASTORE_WORK["noisy_neighbour"],
            'INFO automatic analyze of table "app.public.orders": {int:1000:90000} rows sampled',
            "INFO checkpoint starting: time",
        ),
    },
    "mysql": {
        "noisy_neighbour": (
            *DATASTORE_WORK["noisy_neighbour"],
            "INFO InnoDB: Buffer pool(s) load completed ({int:20:99}%)",
            "INFO event scheduler: job purge_sessions deleted {int:100:9000} rows",
        ),
    },
    "kafka": {
        "noisy_neighbour": (
            *DATASTORE_WORK["noisy_neighbour"],
            "INFO [Log partition=events-{int:0:11}] Deleting segment {int:100000:999999} (retention)",
            "INFO [LogCleaner] compacted {int:2:40} segments of __consumer_offsets",
        ),
    },
    "rabbitmq": {
        "noisy_neighbour": (
            *DATASTORE_WORK["noisy_neighbour"],
            "INFO queue 'reports' policy ttl applied, {int:100:9000} messages expired",
        ),
    },
    "memcached": {
        "noisy_neighbour": (
            "INFO slab rebalancer moved {int:2:40} pages between classes",
            "INFO LRU crawler reclaimed {int:100:9000} expired items",
            THROTTLED,
        ),
    },
    "redis": {
        "noisy_neighbour": (
            "INFO Background append only file rewriting started ({int:20:80}% done)",
            "INFO active expire cycle removed {int:1000:90000} keys",
            THROTTLED,
        ),
    },
}
# The share of a technology's side-work lines one incident draws its noise from: each incident speaks
# with a subset of the vocabulary, so the same lines do not recur in every incident.
INCIDENT_VOCABULARY = 0.5


def incident_vocabulary(incident_id: str, kind: str, options: tuple[str, ...]) -> tuple[str, ...]:
    """The lines of a side-work vocabulary one incident draws from: about half of them, at least two."""
    kept = tuple(line for line in options if unit(incident_id, kind, line) < INCIDENT_VOCABULARY)
    if len(kept) >= min(2, len(options)):
        return kept
    return tuple(sorted(options, key=lambda line: unit(incident_id, kind, line))[:2])


REMEDY_LOGS = {
    "restart": "INFO received SIGTERM, shutting down; replacement pod passed readiness",
    "rollback": "INFO starting {svc} {version}",
    "scale_up": "INFO new replicas joined the pool",
    "escalate": "INFO incident ticket opened with the provider's support",
    "failover": "INFO failover complete: replica promoted to primary",
    "expand_volume": "INFO volume resized online, filesystem grown",
    "renew_certificate": "INFO certificate reloaded for {host}",
    "shed_load": "WARN admission control enabled: excess requests answered 429",
    "terminate_blocker": "LOG backend {blocker} ended: terminating connection due to administrator command",
    "resync_clock": "INFO chronyd: selected source time.internal; system clock stepped into sync",
}
# A remedy's line on a technology where it reads otherwise: memcached has no replica to promote, its
# clients' ring takes a spare server in place of the dead one.
TECH_REMEDY_LOGS = {("failover", "memcached"): "INFO spare server joined the client ring in place of {ip}:11211"}
