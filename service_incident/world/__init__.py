"""The world model: the true state of every service over time, derived from an incident.

Each service has its own baseline (latency distribution, CPU, memory, background errors, request
rate and capacity) drawn once per incident (`plan`), and its own per-minute noise (`draws`). Requests
flow from the entry points down the dependency graph (`traffic`, `simulation`). Red herrings add real
signals that do not reach users, and faults build up before the page, start, worsen on schedule and
respond to remediation (`course`). The world of one episode (`episode`) applies remedies and grades
severity by the rubric (`rubric`). The state is noise-free per step; telemetry renders it as an
engineer sees it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .draws import spread, unit
from .rubric import P0_ERROR_RATE, P0_LATENCY_MS, P1_ERROR_RATE, P1_LATENCY_MS, SEVERITIES, SEVERITY_RUBRIC, rubric

if TYPE_CHECKING:
    from .course import HISTORY_MINUTES, distraction_onset, distraction_strength, fault_lead, pre_incident
    from .episode import World
    from .plan import Edge, Node, technology
    from .simulation import ServiceState

# The simulator's names load with their module on first use: a reader of the rubric alone (an agent, a
# prompt, a tool schema) loads no simulator.
_SIMULATOR = {
    "distraction_onset": "course",
    "distraction_strength": "course",
    "fault_lead": "course",
    "HISTORY_MINUTES": "course",
    "pre_incident": "course",
    "World": "episode",
    "Edge": "plan",
    "Node": "plan",
    "technology": "plan",
    "ServiceState": "simulation",
}


def __getattr__(name: str) -> Any:
    module = _SIMULATOR.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "HISTORY_MINUTES",
    "P0_ERROR_RATE",
    "P0_LATENCY_MS",
    "P1_ERROR_RATE",
    "P1_LATENCY_MS",
    "SEVERITIES",
    "SEVERITY_RUBRIC",
    "Edge",
    "Node",
    "ServiceState",
    "World",
    "distraction_onset",
    "distraction_strength",
    "fault_lead",
    "pre_incident",
    "rubric",
    "spread",
    "technology",
    "unit",
]
