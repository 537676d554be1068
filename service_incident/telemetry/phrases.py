"""The phrase tables log lines are drawn from: side work by technology (a red herring's own lines are
in its row of herrings.HERRINGS), the lines remedies leave, and the notes releases carry."""

from __future__ import annotations

from ..faults import PROXY_TECHS

# How many routine lines a two-minute window of a service's logs holds.
ROUTINE_LINES = (2, 5)

# Notes any release carries; a note naming a feature comes with that feature's files (CHANGED_FILES).
RELEASE_NOTES = (
    "dependency updates",
    "feature flag cleanup",
    "logging format change",
    "connection pool settings",
    "retry policy tuning",
)

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
    "noisy_neighbour": ("INFO access log rotation: compressing {int:2:9} files", THROTTLED),
}
TECH_WORK: dict[str, dict[str, tuple[str, ...]]] = {
    **dict.fromkeys(PROXY_TECHS, PROXY_WORK),
    "memcached": {
        "noisy_neighbour": ("INFO slab rebalancer moved {int:2:40} pages between classes", THROTTLED),
    },
    "redis": {
        "noisy_neighbour": ("INFO Background append only file rewriting started ({int:20:80}% done)", THROTTLED),
    },
}

REMEDY_LOGS = {
    "restart": "INFO received SIGTERM, shutting down; replacement pod passed readiness",
    "rollback": "INFO starting {svc} {version}",
    "scale_up": "INFO new replicas joined the pool",
    "escalate": "INFO incident ticket opened with the owning team",
    "failover": "INFO failover complete: replica promoted to primary",
    "expand_volume": "INFO volume resized online, filesystem grown",
    "renew_certificate": "INFO certificate reloaded for {host}",
    "shed_load": "WARN admission control enabled: excess requests answered 429",
}
