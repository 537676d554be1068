"""Endpoints in route form: what a view breaks a service's requests down by, and what its filter names.

A request's operation is drawn from a template (`GET /v1/charges/ch_{hex:8}`); its route is the
template with every drawn path segment or key written `{id}` and the query left out
(`GET /v1/charges/{id}`), as a tracing backend groups spans.
"""

from __future__ import annotations

import re
from functools import cache

from ..topology import KINDS, OPERATIONS

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
