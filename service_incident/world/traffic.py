"""Requests through the dependency graph, and the queueing that slows a service as it saturates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .plan import Node

# Queueing: a service slows as utilisation nears 1 and sheds the requests beyond its capacity.
MAX_UTILISATION = 0.97


def flow(
    nodes: tuple[Node, ...],
    load: Mapping[str, float],
    shed: Mapping[str, float],
    healthy: Mapping[str, float] | None = None,
    fanout: Mapping[tuple[str, str], float] | None = None,
) -> dict[str, float]:
    """Requests per second reaching each service: callers first, each sending its share down.

    A surge at a service (`load`, extra requests as a share of its healthy traffic) is requests that
    come from somewhere: from its callers in proportion to what each sends it, and from outside in
    proportion to its own entry traffic. A caller carries those requests on toward the surging
    service alone, so its own request rate rises by what it forwards, and so on up to the entry
    points; the surging service serves them like any request, calling its own dependencies. A
    caller's extra calls on an edge (`fanout`, a multiple of its usual calls there) reach that
    dependency alone.
    """
    rps = {n.name: n.entry_rps for n in nodes}
    # Of the requests a service would receive with the surge and nothing shed: the share it serves
    # itself, and the share it forwards to each dependency toward a surging service.
    served: dict[str, float] = {}
    toward: dict[tuple[str, str], float] = {}
    if load:
        base = healthy or flow(nodes, {}, {})
        need = {name: base[name] * extra for name, extra in load.items()}
        passing: dict[str, float] = {}
        callers: dict[str, list[tuple[str, float]]] = {}
        for node in nodes:
            for edge in node.edges:
                callers.setdefault(edge.dep, []).append((node.name, edge.share))
        # Dependencies first: a service's own surge and what it forwards are known before it is split.
        for node in nodes:
            wanted = need.get(node.name, 0.0)
            if wanted <= 0.0 or base[node.name] <= 0.0:
                continue
            rps[node.name] += wanted * node.entry_rps / base[node.name]
            for caller, share in callers.get(node.name, ()):
                sent = wanted * base[caller] * share / base[node.name]
                toward[(caller, node.name)] = toward.get((caller, node.name), 0.0) + sent
                passing[caller] = passing.get(caller, 0.0) + sent
                need[caller] = need.get(caller, 0.0) + sent
        served = {name: 1.0 - forwarded / (base[name] + need[name]) for name, forwarded in passing.items()}
        toward = {(caller, dep): sent / (base[caller] + need[caller]) for (caller, dep), sent in toward.items()}
    for node in reversed(nodes):
        # Shedding turns away a share of every request, the surging ones included; what passes is
        # split as planned, so a surge shed upstream arrives smaller.
        total = rps[node.name]
        if node.name in shed:
            total = min(total, shed[node.name])
        rps[node.name] = total
        normal = total * served.get(node.name, 1.0)
        for edge in node.edges:
            sent = normal * edge.share + total * toward.get((node.name, edge.dep), 0.0)
            if fanout and (node.name, edge.dep) in fanout:
                sent += normal * edge.share * fanout[(node.name, edge.dep)]
            rps[edge.dep] += sent
    return rps


def queueing(utilisation: float) -> float:
    """How many times its unloaded latency a service takes at this utilisation."""
    rho = min(utilisation, MAX_UTILISATION)
    return 1.0 + 0.5 * rho * rho / (1.0 - rho)
