"""Action vocabularies of other incident environments, translated so their agents run unchanged.

- the root-cause system: `{"action_type": "read_logs", "target": "db"}`, with `declare_rca` naming
  comma-separated targets;
- the response system: `{"action_type": "investigate", "target_service": "db", "rationale": "..."}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Their action name -> ours. Both vocabularies share one table: their names do not collide.
ACTION_ALIASES: Mapping[str, str] = {
    "read_logs": "inspect_logs",
    "check_metrics": "inspect_metrics",
    "check_health": "check_health",
    "run_db_query": "run_db_query",
    "restart_service": "restart",
    "rollback_deployment": "rollback",
    "declare_rca": "declare_rca",
    "investigate": "inspect_logs",
    "restart": "restart",
    "rollback": "rollback",
    "scale_up": "scale_up",
    "escalate": "escalate",
    "resolve": "resolve",
}


def translate(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Our action object for an aliased one; unknown names pass through for the schema to reject."""
    fields = {key: value for key, value in payload.items() if key not in ("action_type", "target_service")}
    name = payload["action_type"]
    fields["action"] = ACTION_ALIASES.get(name, name) if isinstance(name, str) else name
    target = payload.get("target_service", payload.get("target"))
    if fields["action"] == "declare_rca":
        fields.pop("target", None)
        if isinstance(target, str):
            fields["targets"] = [part.strip() for part in target.split(",") if part.strip()]
    elif target is not None:
        fields["target"] = target
    return fields
