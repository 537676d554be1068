"""Who an escalation pages, and when they act: the acknowledgement the next observation carries.

An escalation pages the provider or partner a service relies on. They acknowledge at once and act
a step later on what they own (a quota, an outage of theirs); the acknowledgement
reads the same whatever is wrong, so it tells nothing of the fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ..world import World, unit
from ..world.episode import ESCALATION_DELAY
from .clock import clock_text


class Partner(NamedTuple):
    """The outside party a kind of service relies on: what its own lines call it (and whose support an
    escalation about it pages), and the call its client span names, for the kinds that call it."""

    name: str
    call: str = "POST https://api.partner.example/v2/requests"


PARTNER = Partner("partner API")
PARTNERS: Mapping[str, Partner] = {
    "gateway": Partner("CDN and edge partner", "POST https://api.edge-partner.example/v1/bot-score"),
    "auth": Partner("identity provider", "POST https://idp.example/oauth2/token"),
    "payments": Partner("payment processor", "POST https://api.payment-processor.example/v1/charges"),
    "search": Partner("search vendor", "GET https://api.search-vendor.example/v2/query"),
    "notifications": Partner("messaging provider", "POST https://api.messaging-provider.example/v1/messages"),
    "web": Partner("feature flag vendor", "GET https://flags.flag-vendor.example/v1/evaluate"),
    "orders": Partner("tax provider", "POST https://api.tax-provider.example/v1/quotes"),
    "checkout": Partner("fraud screening provider", "POST https://api.fraud-screen.example/v1/assess"),
    "inventory": Partner("warehouse partner", "GET https://api.warehouse-partner.example/v1/stock"),
    "database": Partner("managed database vendor"),
    "cache": Partner("managed cache vendor"),
    "queue": Partner("managed broker vendor"),
}
# Services that share a kind with another of the same topology, each with a party of its own: one
# party's outage would fail every service that calls it, so no two callers of a topology share one.
OWN_PARTNERS: Mapping[str, Partner] = {
    "shipping": Partner("shipping carrier", "POST https://api.carrier.example/v1/labels"),
    "recommendations": Partner("recommendation model vendor", "POST https://api.model-vendor.example/v1/predict"),
    "mobile-api": Partner("app attestation provider", "POST https://api.attestation.example/v1/verify"),
}


def partner(kind: str, service: str) -> Partner:
    """The outside party a service relies on."""
    return OWN_PARTNERS.get(service) or PARTNERS.get(kind, PARTNER)


def partner_call(kind: str, service: str) -> str:
    """The operation of a service's client span to its outside party."""
    return partner(kind, service).call


def provider_name(world: World, service: str) -> str:
    """What a service's own lines call the outside party it relies on."""
    return partner(world.incident.service(service).kind, service).name


def provider_team(world: World, service: str) -> str:
    return f"the {provider_name(world, service)}'s support"


def acknowledgement(world: World, service: str, step: int) -> str:
    """What the paged team answers: who they are, their ticket, and when they act."""
    ticket = 1000 + int(unit(world.incident.id, service, "ticket", step) * 9000)
    return (
        f"Escalated {service} to {provider_team(world, service)}: ticket PRV-{ticket} acknowledged at "
        f"{clock_text(world, step)}; they act at {clock_text(world, step + ESCALATION_DELAY)} "
        "on what they own (a quota or an outage of theirs)."
    )
