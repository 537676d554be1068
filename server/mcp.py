"""JSON-RPC 2.0 for `POST /mcp` and the WebSocket `mcp` message: the actions exposed as MCP tools.

Sans-I/O: `handle` maps one decoded request to one response. Every outcome, errors included, is a
JSON-RPC response object, because OpenEnv's validator requires HTTP 200 with `"jsonrpc": "2.0"`.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET, Struct, UnsetType

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import ACTION_TYPES, InvalidAction, InvalidReset, ResetRequest, parse_action

from .http_episodes import EpisodeStore, UnknownEpisode
from .protocol import encode, step_payload

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

log = logging.getLogger(__name__)

RequestId = str | int | None
EnvResolver = Callable[[str | None], ServiceIncidentEnvironment]


class RpcError(Struct):
    code: int
    message: str
    data: Any = None


class RpcResponse(Struct):
    """Exactly one of `result` and `error` is set; the other is left out of the JSON."""

    jsonrpc: str
    id: RequestId
    result: Any | UnsetType = UNSET
    error: RpcError | UnsetType = UNSET


class RpcRequest(Struct, forbid_unknown_fields=True):
    jsonrpc: str
    method: str
    params: dict[str, Any] = {}
    id: RequestId = None


class _Call(Struct, forbid_unknown_fields=True):
    name: str
    arguments: dict[str, Any] = {}
    session_id: str | None = None


class _Fault(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _tools() -> list[dict[str, Any]]:
    # The tool name is the action tag, so the tag leaves the arguments schema.
    _, components = msgspec.json.schema_components(ACTION_TYPES, ref_template="#/$defs/{name}")
    tools = []
    for cls in ACTION_TYPES:
        tag = cls.__struct_config__.tag_field
        schema = copy.deepcopy(components[cls.__name__])
        del schema["properties"][tag]
        schema["required"] = [name for name in schema.get("required", []) if name != tag]
        tools.append(
            {"name": cls.__struct_config__.tag, "description": schema.pop("description", ""), "inputSchema": schema}
        )
    return tools


TOOLS = _tools()


def parse_error(message: str) -> RpcResponse:
    return RpcResponse("2.0", None, error=RpcError(PARSE_ERROR, f"Parse error: {message}"))


def handle(request: Any, env_for: EnvResolver, episodes: EpisodeStore | None = None) -> RpcResponse:
    """Answer one JSON-RPC request. `episodes` enables OpenEnv's session methods (HTTP only)."""
    request_id = request.get("id") if isinstance(request, dict) else None
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        request_id = None
    try:
        try:
            call = msgspec.convert(request, RpcRequest)
        except msgspec.ValidationError as exc:
            raise _Fault(INVALID_REQUEST, f"Invalid Request: {exc}") from None
        if call.jsonrpc != "2.0":
            raise _Fault(INVALID_REQUEST, "Invalid Request: jsonrpc must be '2.0'")
        return RpcResponse("2.0", request_id, result=_dispatch(call, env_for, episodes))
    except _Fault as fault:
        return RpcResponse("2.0", request_id, error=RpcError(fault.code, fault.message))
    except Exception as exc:
        # As on the WebSocket: the client learns the exception type, never environment internals.
        log.exception("environment failed on an MCP request")
        error = RpcError(INTERNAL_ERROR, f"{type(exc).__name__} in the environment")
        return RpcResponse("2.0", request_id, error=error)


def _dispatch(call: RpcRequest, env_for: EnvResolver, episodes: EpisodeStore | None) -> Any:
    if call.method == "tools/list":
        return {"tools": TOOLS}
    if call.method == "tools/call":
        return _call_tool(call.params, env_for)
    if episodes is not None and call.method == "openenv/session/create":
        try:
            session_id, _ = episodes.reset(msgspec.convert(call.params, ResetRequest))
        except (msgspec.ValidationError, InvalidReset) as exc:
            raise _Fault(INVALID_PARAMS, f"Invalid params: {exc}") from None
        return {"session_id": session_id}
    if episodes is not None and call.method == "openenv/session/close":
        session_id = call.params.get("session_id")
        if not isinstance(session_id, str):
            raise _Fault(INVALID_PARAMS, "Invalid params: session_id must be a string")
        return {"session_id": session_id, "closed": episodes.close(session_id)}
    raise _Fault(METHOD_NOT_FOUND, f"Method not found: {call.method}")


def _call_tool(params: dict[str, Any], env_for: EnvResolver) -> dict[str, Any]:
    try:
        call = msgspec.convert(params, _Call)
        action = parse_action({**call.arguments, "action": call.name})
        env = env_for(call.session_id)
    except (msgspec.ValidationError, InvalidAction, UnknownEpisode) as exc:
        raise _Fault(INVALID_PARAMS, f"Invalid params: {exc}") from None
    payload = step_payload(env.step(action))
    return {
        "content": [{"type": "text", "text": encode(payload).decode()}],
        "structuredContent": payload,
        "isError": payload.observation["last_action_error"] is not None,
    }
