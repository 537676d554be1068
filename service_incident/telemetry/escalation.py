"""Who an escalation pages, and when they act: the acknowledgement the next observation carries.

An escalation pages the provider or partner a service relies on. They acknowledge at once and act
a step later on what they own (a quota, an outage, a certificate of theirs); the acknowledgement
reads the same whatever is wrong, so it tells nothing of the fault.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..world import World, unit
from ..world.episode import ESCALATION_DELAY
from .clock import clock, format_time

_PARTNER = "the partner API provider's support"
# The outside party each kind of service relies on, which an escalation about it pages.
PROVIDERS: Mapping[str, str] = {
    "gateway": "the CDN and edge partner's support",
    "auth": "the identity provider's support",
    "payments": "the payment processor's support",
    "search": "the search vendor's support",
    "notifications": "the messaging provider's support",
    "database": "the managed database vendor's support",
    "cache": "the managed cache vendor's support",
    "queue": "the managed broker vendor's support",
}


def provider_team(world: World, service: str) -> str:
    return PROVIDERS.get(world.incident.service(service).kind, _PARTNER)


def acknowledgement(world: World, service: str, step: int) -> str:
    """What the paged team answers: who they are, their ticket, and when they act."""
    ticket = 1000 + int(unit(world.incident.id, service, "ticket", step) * 9000)
    return (
        f"Escalated {service} to {provider_team(world, service)}: ticket PRV-{ticket} acknowledged at "
        f"{format_time(clock(world, step))}; they act at {format_time(clock(world, step + ESCALATION_DELAY))} "
        "on what they own (a quota, an outage or a certificate of theirs)."
    )
