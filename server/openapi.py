"""`/openapi.json`, generated from the same msgspec types that validate and encode the traffic.

`info.version` 1.x is what OpenEnv's validator reads to pick its `openapi-http/1.x` profile.
"""

from __future__ import annotations

from typing import Any

import msgspec

from service_incident.models import Action, ResetRequest, State
from service_incident.tasks import Task
from service_incident.wire import HttpStepPayload

from .errors import Failure, ValidationFailure
from .http_api import EPISODE_HEADER, EnvironmentMetadata, Grade, ServerHealth, StepRequest
from .mcp import RpcRequest, RpcResponse

API_VERSION = "1.0.0"

_EPISODE_PARAMETER = {
    "name": EPISODE_HEADER,
    "in": "header",
    "required": False,
    "description": "The id /reset returned. Without one, the latest episode on a loopback-only server; "
    "elsewhere a 400.",
    "schema": {"type": "string"},
}

_GET_EPISODE = [_EPISODE_PARAMETER, {**_EPISODE_PARAMETER, "name": "episode_id", "in": "query"}]

# (path, method, summary, request body types (any one of them), response type, extra parameters)
_OPERATIONS: list[tuple[str, str, str, tuple[Any, ...], Any, list[dict[str, Any]]]] = [
    (
        "/reset",
        "post",
        "Start an HTTP episode; the reply carries its episode_id.",
        (ResetRequest,),
        HttpStepPayload,
        [],
    ),
    (
        "/step",
        "post",
        'Act in an HTTP episode: {"action": {...}} or the flat action object.',
        (StepRequest, Action),
        HttpStepPayload,
        [_EPISODE_PARAMETER],
    ),
    ("/state", "get", "Bookkeeping of an HTTP episode.", (), State, _GET_EPISODE),
    ("/grade", "get", "Score and breakdown of an HTTP episode: null until it ends.", (), Grade, _GET_EPISODE),
    ("/health", "get", "Liveness and session counts.", (), ServerHealth, []),
    ("/metadata", "get", "Name, description and version of the environment.", (), EnvironmentMetadata, []),
    ("/schema", "get", "JSON Schemas of action, observation, reset_observation and state.", (), dict[str, Any], []),
    ("/tasks", "get", "The task catalogue (no answers).", (), list[Task], []),
    (
        "/mcp",
        "post",
        "JSON-RPC 2.0: tools/list, tools/call, openenv/session/create|close.",
        (RpcRequest,),
        RpcResponse,
        [],
    ),
]


def openapi_document() -> dict[str, Any]:
    types = [t for _, _, _, bodies, response, _ in _OPERATIONS for t in (*bodies, response)]
    types += [ValidationFailure, Failure]
    refs, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    schema_of = dict(zip(map(id, types), refs, strict=True))
    paths: dict[str, Any] = {}
    for path, method, summary, bodies, response, parameters in _OPERATIONS:
        operation: dict[str, Any] = {
            "summary": summary,
            "responses": {"200": _content(schema_of[id(response)], "Success")},
        }
        if parameters:
            operation["parameters"] = parameters
        if bodies:
            choices = [schema_of[id(body)] for body in bodies]
            schema = choices[0] if len(choices) == 1 else {"oneOf": choices}
            operation["requestBody"] = {
                "required": path == "/step",
                "content": {"application/json": {"schema": schema}},
            }
            if path != "/mcp":
                operation["responses"]["422"] = _content(schema_of[id(ValidationFailure)], "Invalid request")
        if path in {"/step", "/state", "/grade"}:
            operation["responses"]["400"] = _content(schema_of[id(Failure)], "No episode named")
            operation["responses"]["404"] = _content(schema_of[id(Failure)], "Unknown or expired episode")
        if bodies:
            operation["responses"]["413"] = _content(schema_of[id(Failure)], "Body over the size limit")
            operation["responses"]["415"] = _content(schema_of[id(Failure)], "Body not sent as application/json")
        paths[path] = {method: operation}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Service Incident - OpenEnv Environment HTTP API",
            "version": API_VERSION,
            "description": "Training traffic belongs on the WebSocket `/ws` (one environment per socket).",
        },
        "paths": paths,
        "components": {"schemas": components},
    }


def _content(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}
