"""Endpoints in route form: what a view breaks a service's requests down by, and what its filter names.

A request's operation is drawn from a template (`GET /v1/charges/ch_{hex:8}`); its route is the
template with every drawn path segment or key written `{id}` and the query left out
(`GET /v1/charges/{id}`), as a tracing backend groups spans.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING

from ..topology import KINDS, OPERATIONS

if TYPE_CHECKING:
    from ..world import ServiceState

# A path segment, or the part of a key after its prefix, that holds a drawn field.
_DRAWN = re.compile(r"[\w.-]*\{[^{}/]*\}[\w.-]*")


@cache
def route(template: str) -> str:
    """The route a request drawn from `template` is grouped under."""
    return _DRAWN.sub("{id}", template.split("?", 1)[0])


def operations(kind: str) -> tuple[str, ...]:
    """The templates of the requests a service of this kind serves: a datastore's reads, else its endpoints."""
    ops = OPERATIONS.get(kind)
    return ops[0] if ops else KINDS[kind].endpoints


def routes(kind: str) -> tuple[str, ...]:
    """The routes of a kind's requests, in the catalogue's order, each once."""
    return tuple(dict.fromkeys(route(template) for template in operations(kind)))


def request_templates(kind: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """The requests a service of this kind serves (a datastore's reads and writes) and which of them write."""
    ops = OPERATIONS.get(kind)
    templates = (*ops[0], *ops[1]) if ops else KINDS[kind].endpoints
    return templates, frozenset(ops[1]) if ops else frozenset(t for t in templates if not t.startswith("GET"))


def fails_writes(state: ServiceState) -> bool:
    """Whether a service's own failures fall on its writes: a refused write, or a fault in the code that
    parses their payloads."""
    return state.fault_strength > 0.0 and (state.mode == "write" or state.fails_writes)


def own_error(state: ServiceState) -> float:
    """The share of a service's requests that fail of its own doing, not by a failing dependency."""
    # A loop rather than math.prod over a generator: the same products in the same order, without a
    # generator built for each of a trace sample's services.
    upstream_ok = 1.0
    for _, share, _ in state.failing_upstreams:
        upstream_ok *= 1.0 - share
    return max(0.0, 1.0 - (1.0 - state.error_rate) / max(upstream_ok, 1e-9))


def on_path(error: float, everyday: float, share: float, taken: bool) -> float:
    """The error rate of requests on (`taken`) or off the code path a fault breaks, which carries `share`
    of the requests: the path takes the failures beyond the everyday rate, up to all of its requests,
    and the rest fare as every day but for what the path cannot take; both average to `error`."""
    if not 0.0 < share < 1.0 or error <= everyday:
        return error
    path = min(1.0, everyday + (error - everyday) / share)
    return path if taken else everyday + (error - everyday - (path - everyday) * share) / (1.0 - share)
