"""The tables each kind of service keeps in the databases it uses: what its statements name."""

from __future__ import annotations

from collections.abc import Mapping

from ..world import World, unit

# Two tables per kind: a transaction of the service updates both, which is how two of its sessions deadlock.
OWN_TABLES: Mapping[str, tuple[str, str]] = {
    "gateway": ("api_keys", "rate_limit_buckets"),
    "web": ("carts", "saved_items"),
    "auth": ("users", "refresh_tokens"),
    "payments": ("payments", "ledger_entries"),
    "orders": ("orders", "order_items"),
    "checkout": ("checkouts", "cart_items"),
    "inventory": ("stock_levels", "reservations"),
    "search": ("search_documents", "reindex_jobs"),
    "notifications": ("notifications", "deliveries"),
    "app": ("items", "jobs"),
}
ANY_TABLES = ("records", "record_versions")


def client_of(world: World, service: str) -> str:
    """The client a service's own lines and diagnostics name: one of the services that call it."""
    incident = world.incident
    callers = [s.name for s in incident.services if service in s.depends_on] or [service]
    return callers[int(unit(incident.id, service, "client") * len(callers))]


def client_tables(world: World, database: str) -> tuple[str, str]:
    """The tables of a datastore's client that its statements name."""
    return OWN_TABLES.get(world.incident.service(client_of(world, database)).kind, ANY_TABLES)


def blocker_pid(world: World, database: str) -> str:
    """The backend PID of the session holding the locks a deadlocked database's other sessions wait on."""
    return str(1000 + int(unit(world.incident.id, database, "blocker") * 9000))
