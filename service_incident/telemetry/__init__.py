"""Telemetry rendered from the world: the views an on-call engineer has, and the pages.

Views: logs (lines from the service's pods), metrics (p50/p99 latency, error rate, request rate, CPU,
memory, with minute-by-minute history from before the page), health (pods with identities,
restarts, termination reasons and recent events), deploy history, a database's own diagnostics,
and sampled traces through a service broken down by endpoint. `Telemetry.look` is the one entry
point: it renders a view (in a `Scope`: one endpoint, failures only) and decides, once, whether
anything changed since the agent last looked at it. Alert rules are defined once, in `pages`, and
the generator uses them too.

Every rendering draws from its own RNG keyed by (episode seed, service, view, step), so a service's
text is the same whatever was inspected before it. Identities (pod names, PIDs, versions, hosts)
belong to the system and are keyed by the incident alone. What an episode's telemetry keeps between
looks is its `TelemetryState` (`state`), the one owner of every cache.
"""

from .clock import STEP_MINUTES, clock, clock_text, format_time, minute, parse_time
from .logs import LOG_WINDOW_S
from .look import Look, Scope, Telemetry, View
from .pages import ALERT_RULES, fired
from .templates import LOUD_LEVELS, level
from .traces import TRACE_DEPTH

__all__ = [
    "ALERT_RULES",
    "LOG_WINDOW_S",
    "LOUD_LEVELS",
    "STEP_MINUTES",
    "TRACE_DEPTH",
    "Look",
    "Scope",
    "Telemetry",
    "View",
    "clock",
    "clock_text",
    "fired",
    "format_time",
    "level",
    "minute",
    "parse_time",
]
