"""The actions as tools: one per action type, named by its tag, with the JSON Schema of its arguments.

MCP's `tools/list`, TRL's tool methods and provider function calling all read these specs, so a new
action type is a new tool everywhere without an edit here.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import msgspec

from service_incident.models import ACTION_TYPES, ERRORS_ONLY_FLOOR, ResetRequest
from service_incident.world.rubric import SEVERITY_RUBRIC

# Accepted on every action because OpenEnv's pydantic actions always send it, and ignored: a caller
# has nothing to put there, so it is no argument of a tool.
HIDDEN_FIELDS = frozenset({"metadata"})

# What each argument means, for fields whose type carries no description of its own. A language
# model reads these in the tool schema; a type's own `Meta(description=...)` takes precedence.
ARGUMENT_NOTES: dict[str, str] = {
    "target": "The service to act on, by its name as listed in the observation's services.",
    "targets": "Every root-cause service, by name.",
    "severity": f"The incident severity, from user-facing impact: {SEVERITY_RUBRIC}",
    "additional_targets": "Further root-cause services, when more than one is at fault.",
    "rationale": "Why you take this action, citing what you observed. Required in some tasks.",
    "endpoint": (
        "Only this row of the view's breakdown by endpoint: a request endpoint in route form (such as "
        "`POST /v1/charges` or `GET /v1/orders/{id}`) or, in metrics, a background job (`nightly-export`); "
        "one the service does not have is refused."
    ),
    "errors_only": (
        "Only what failed: in traces the failed requests and the endpoints that failed any; in metrics the "
        f"breakdown's rows failing at least {ERRORS_ONLY_FLOOR:.0%} of their requests or runs."
    ),
    "task_id": "The task to play (see GET /tasks); the default task when omitted.",
    "seed": (
        "Seed of the incident drawn and of its telemetry; when omitted, a random one, told once the episode is over."
    ),
    "incident_id": "A specific incident of the task, instead of one drawn by the seed.",
}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]
    # The Struct whose fields are the arguments (an action type, or the reset request).
    arguments: type[msgspec.Struct]


def _spec(name: str, cls: type[msgspec.Struct], component: dict[str, Any], hidden: frozenset[str]) -> ToolSpec:
    schema = copy.deepcopy(component)
    schema.pop("title", None)
    description = schema.pop("description", "")
    properties = schema["properties"]
    for field in hidden & properties.keys():
        del properties[field]
    for field, prop in properties.items():
        if "description" not in prop and field in ARGUMENT_NOTES:
            prop["description"] = ARGUMENT_NOTES[field]
    schema["required"] = [field for field in schema.get("required", []) if field not in hidden]
    return ToolSpec(name, description, schema, cls)


def _action_tools() -> tuple[ToolSpec, ...]:
    _, components = msgspec.json.schema_components(ACTION_TYPES, ref_template="#/$defs/{name}")
    specs = []
    for cls in ACTION_TYPES:
        config = cls.__struct_config__
        assert config.tag_field is not None
        # The tool's name is the action's tag, so the tag is no argument.
        hidden = HIDDEN_FIELDS | {config.tag_field}
        specs.append(_spec(str(config.tag), cls, components[cls.__name__], hidden))
    return tuple(specs)


ACTION_TOOLS: tuple[ToolSpec, ...] = _action_tools()
TOOLS_BY_NAME: dict[str, ToolSpec] = {spec.name: spec for spec in ACTION_TOOLS}


# Reset fields a model calling the tool may not set, and why.
RESET_WITHHELD: dict[str, str] = {
    "episode_id": "the session owns its episode",
    # Dense shaping is paid from the truth; a model playing through tools is paid at the end.
    "reward_mode": "a model playing through tools is paid at the end only (dense shaping would judge for it)",
}


def _reset_tool() -> ToolSpec:
    _, components = msgspec.json.schema_components([ResetRequest], ref_template="#/$defs/{name}")
    spec = _spec("reset", ResetRequest, components[ResetRequest.__name__], frozenset(RESET_WITHHELD))
    description = "Start a new incident (ends the current one): you are paged and see its first telemetry."
    return ToolSpec(spec.name, description, spec.input_schema, ResetRequest)


RESET_TOOL = _reset_tool()


def argument_fields(spec: ToolSpec) -> list[msgspec.structs.FieldInfo]:
    """The Struct fields a tool takes, in schema order."""
    shown = spec.input_schema["properties"]
    return [field for field in msgspec.structs.fields(spec.arguments) if field.encode_name in shown]
