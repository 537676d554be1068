"""Who an escalation pages, and when they act: the acknowledgement the next observation carries.

An escalation pages the provider or partner a service relies on. They acknowledge at once and act
a step later on what they own (a quota, an outage of theirs); the acknowledgement
reads the same whatever is wrong, so it tells nothing of the fault.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..world import World, unit
from ..world.episode import ESCALATION_DELAY
from .clock import clock, format_time

PARTNER_NAME = "partner API"
# The outside party each kind of service relies on: what its own lines call it, and whose support an
# escalation about it pages.
PROVIDER_NAMES: Mapping[str, str] = {
    "gateway": "CDN and edge partner",
    "auth": "identity provider",
    "payments": "payment processor",
    "search": "search vendor",
    "notifications": "messaging provider",
    "database": "managed database vendor",
    "cache": "managed cache vendor",
    "queue": "managed broker vendor",
}


# The call a service of each kind makes to that outside party, as its own client span names it.
PARTNER_CALLS: Mapping[str, str] = {
    "gateway": "POST https://api.edge-partner.example/v1/bot-score",
    "auth": "POST https://idp.example/oauth2/token",
    "payments": "POST https://api.payment-processor.example/v1/charges",
    "search": "GET https://api.search-vendor.example/v2/query",
    "notifications": "POST https://api.messaging-provider.example/v1/messages",
}
PARTNER_CALL = "POST https://api.partner.example/v2/requests"


def partner_call(kind: str) -> str:
    """The operation of a service's client span to its outside party."""
    return PARTNER_CALLS.get(kind, PARTNER_CALL)


def provider_name(world: World, service: str) -> str:
    """What a service's own lines call the outside party it relies on."""
    return PROVIDER_NAMES.get(world.incident.service(service).kind, PARTNER_NAME)


def provider_team(world: World, service: str) -> str:
    return f"the {provider_name(world, service)}'s support"


def acknowledgement(world: World, service: str, step: int) -> str:
    """What the paged team answers: who they are, their ticket, and when they act."""
    ticket = 1000 + int(unit(world.incident.id, service, "ticket", step) * 9000)
    return (
        f"Escalated {service} to {provider_team(world, service)}: ticket PRV-{ticket} acknowledged at "
        f"{format_time(clock(world, step))}; they act at {format_time(clock(world, step + ESCALATION_DELAY))} "
        "on what they own (a quota or an outage of theirs)."
    )
