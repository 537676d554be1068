"""The world model: the true state of every service over time, derived from an incident.

Each service has its own baseline (latency distribution, CPU, memory, background errors, request
rate and capacity) drawn once per incident (`plan`), and its own per-minute noise (`draws`). Requests
flow from the entry points down the dependency graph (`traffic`, `simulation`). Red herrings add real
signals that do not reach users, and faults build up before the page, start, worsen on schedule and
respond to remediation (`course`). The world of one episode (`episode`) applies remedies and grades
severity by the rubric (`rubric`). The state is noise-free per step; telemetry renders it as an
engineer sees it.
"""

from .course import distraction_onset, distraction_strength, fault_lead
from .draws import spread, unit, wobbles
from .episode import HISTORY_MINUTES, World
from .plan import Edge, Node, technology
from .rubric import P0_ERROR_RATE, P0_LATENCY_MS, P1_ERROR_RATE, P1_LATENCY_MS, SEVERITIES, SEVERITY_RUBRIC, rubric
from .simulation import ServiceState

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
    "rubric",
    "spread",
    "technology",
    "unit",
    "wobbles",
]
