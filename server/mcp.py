"""The actions as MCP tools: the Model Context Protocol at `/mcp`, and OpenEnv's JSON-RPC dialect of it.

MCP clients (the official SDKs, IDEs, agent frameworks) speak streamable HTTP: `initialize`, then
requests that carry the `Mcp-Session-Id` it issued. The official `mcp` SDK (the `mcp` extra) serves
that part (sessions, `ping`, notifications answered 202, DELETE); here each session owns one episode, which
its `reset` tool starts and its action tools play. Tool text is what the action revealed, not the
whole observation again; the structured result is the step's full payload. Protocol revisions
without a handshake (2026-07-28 on) have no session that could own an episode, so their discovery
probe is answered with the handshake revisions, and clients fall back to `initialize`.

OpenEnv's clients send bare JSON-RPC requests instead: `tools/list`, `tools/call` on the WebSocket's
environment (the `mcp` message) or on an HTTP episode named by `session_id`, and
`openenv/session/create|close`. `handle` answers those, sans-I/O; every outcome is a JSON-RPC
response, because OpenEnv's validator requires HTTP 200 with `"jsonrpc": "2.0"`.
"""

from __future__ import annotations

import importlib.metadata
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import msgspec
from msgspec import UNSET, Struct, UnsetType
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

try:
    import mcp.types as sdk
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.shared.exceptions import MCPError
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
except ImportError:
    # The `mcp` extra (SDK 2.x) is not installed, as beside stock OpenEnv, which pins the 1.x SDK:
    # /mcp then speaks OpenEnv's dialect only, and says how to get MCP sessions.
    sdk = None  # type: ignore[assignment]

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.integrations.text import TextEpisode
from service_incident.integrations.tools import ACTION_TOOLS, RESET_TOOL, RESET_WITHHELD, TOOLS_BY_NAME, ToolSpec
from service_incident.models import InvalidAction, InvalidReset, Observation, ResetRequest, parse_action
from service_incident.wire import ProtocolError, decode_json, encode, step_payload

from .http_episodes import UnknownEpisode
from .sessions import EnvFactory

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_PROTOCOL_VERSION = -32022

SERVER_NAME = "service_incident"
SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"

log = logging.getLogger(__name__)

RequestId = str | int | None
EnvResolver = Callable[[str | None], ServiceIncidentEnvironment]


class SessionMethods(Protocol):
    """The episodes OpenEnv's `openenv/session/*` methods start and close, on behalf of one client."""

    def reset(self, request: ResetRequest) -> tuple[str, Observation]: ...

    def close(self, episode_id: str) -> bool: ...


# Answers one request of OpenEnv's dialect on behalf of the HTTP request that carried it.
OpenEnvDialect = Callable[["Request", Any], "RpcResponse"]


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


def _listing(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description, "inputSchema": spec.input_schema}


TOOLS = [_listing(spec) for spec in ACTION_TOOLS]


def parse_error(message: str) -> RpcResponse:
    return RpcResponse("2.0", None, error=RpcError(PARSE_ERROR, f"Parse error: {message}"))


def handle(request: Any, env_for: EnvResolver, episodes: SessionMethods | None = None) -> RpcResponse:
    """Answer one request of OpenEnv's dialect. `episodes` enables its session methods (HTTP only)."""
    request_id = _request_id(request)
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


def _dispatch(call: RpcRequest, env_for: EnvResolver, episodes: SessionMethods | None) -> Any:
    if call.method == "tools/list":
        return {"tools": TOOLS}
    if call.method == "tools/call":
        return _call_tool(call.params, env_for)
    if episodes is not None and call.method == "openenv/session/create":
        try:
            created, _ = episodes.reset(msgspec.convert(call.params, ResetRequest))
        except (msgspec.ValidationError, InvalidReset) as exc:
            raise _Fault(INVALID_PARAMS, f"Invalid params: {exc}") from None
        return {"session_id": created}
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


# --- MCP proper, through the official SDK ---------------------------------------------------------


class _Entry:
    __slots__ = ("episode", "last_active")

    def __init__(self, now: float, env: ServiceIncidentEnvironment) -> None:
        self.episode = TextEpisode(env)
        self.last_active = now


class SessionEpisodes:
    """The episode each MCP session owns: bounded in number (least recently used evicted first) and
    in idle time, like the SDK's sessions themselves."""

    def __init__(
        self,
        max_episodes: int,
        idle_timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        new_env: EnvFactory = ServiceIncidentEnvironment,
    ) -> None:
        self.max_episodes = max_episodes
        self.idle_timeout_s = idle_timeout_s
        self.clock = clock
        self.new_env = new_env
        self._episodes: OrderedDict[str, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._episodes)

    def of(self, session_id: str) -> TextEpisode:
        now = self.clock()
        entry = self._episodes.get(session_id)
        if entry is None:
            self.expire(now)
            entry = self._episodes[session_id] = _Entry(now, self.new_env())
            while len(self._episodes) > self.max_episodes:
                self.close(next(iter(self._episodes)))
        entry.last_active = now
        self._episodes.move_to_end(session_id)
        return entry.episode

    def close(self, session_id: str) -> None:
        entry = self._episodes.pop(session_id, None)
        if entry is not None:
            entry.episode.env.close()

    def expire(self, now: float) -> None:
        deadline = now - self.idle_timeout_s
        for key in [k for k, e in self._episodes.items() if e.last_active < deadline]:
            self.close(key)


class McpEndpoint:
    """The ASGI app at `/mcp`: MCP sessions through the SDK, OpenEnv's dialect through `handle`.

    A request that carries no session id and is not `initialize` cannot belong to an MCP client
    (nothing else is valid before the handshake), so it is OpenEnv's; everything else is MCP.
    Serve it inside `running()`, which runs the SDK's session manager.
    """

    def __init__(
        self,
        openenv: OpenEnvDialect,
        max_sessions: int,
        idle_timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        max_body_bytes: int = 1024 * 1024,
        new_env: EnvFactory = ServiceIncidentEnvironment,
    ) -> None:
        self.openenv = openenv
        self.mcp_episodes = SessionEpisodes(max_sessions, idle_timeout_s, clock, new_env)
        self.manager: StreamableHTTPSessionManager | None = None
        if sdk is None:
            return
        self.handshake_versions = frozenset(HANDSHAKE_PROTOCOL_VERSIONS)
        tools = [
            sdk.Tool(name=spec.name, description=spec.description, input_schema=spec.input_schema)
            for spec in (RESET_TOOL, *ACTION_TOOLS)
        ]
        listing = sdk.ListToolsResult(tools=tools)

        async def list_tools(ctx: Any, params: Any) -> Any:
            return listing

        self.server = Server(
            SERVER_NAME,
            version=_version(),
            instructions=(
                "You are the on-call engineer for a paged incident. Call `reset` to start one, inspect the "
                "services you choose, remediate, and end the episode with the terminal action it names."
            ),
            on_list_tools=list_tools,
            on_call_tool=self._call_tool,
        )
        self.manager = StreamableHTTPSessionManager(
            self.server,
            json_response=True,
            session_idle_timeout=idle_timeout_s,
            max_sessions=max_sessions,
            max_request_body_size=max_body_bytes,
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        if self.manager is None:
            yield
            return
        async with self.manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self.manager
        headers = dict(scope["headers"])
        session_id = headers.get(SESSION_HEADER)
        if manager is None and (scope["method"] != "POST" or session_id is not None):
            await _reply(send, 405 if scope["method"] != "POST" else 404, _WITHOUT_SDK)
            return
        if manager is not None and (scope["method"] != "POST" or session_id is not None):
            await manager.handle_request(scope, receive, send)
            if scope["method"] == "DELETE" and session_id is not None:
                self.mcp_episodes.close(session_id.decode("latin-1"))
            return
        body = await _read_body(receive)
        try:
            request = decode_json(body)
        except ProtocolError as error:
            await _reply(send, 200, parse_error(error.message))
            return
        version = headers.get(VERSION_HEADER, b"").decode("latin-1")
        if manager is None and version:
            # Only MCP clients name a protocol revision. No revision is served without the SDK, and
            # saying so (an empty `supported`) stops a client at this one error, naming the extra,
            # rather than at a handshake after it that could only fail the same way.
            refusal = RpcError(UNSUPPORTED_PROTOCOL_VERSION, _NEEDS_SDK, {"supported": [], "requested": version})
            await _reply(send, 400, RpcResponse("2.0", _request_id(request), error=refusal))
            return
        if manager is not None and version and version not in self.handshake_versions:
            await _reply(send, 400, self._unsupported(request, version))
            return
        if isinstance(request, dict) and request.get("method") == "initialize":
            if manager is None:
                await _reply(send, 200, msgspec.structs.replace(_WITHOUT_SDK, id=_request_id(request)))
                return
            await manager.handle_request(scope, _replay(body, receive), send)
            return
        await _reply(send, 200, self.openenv(Request(scope), request))

    def _unsupported(self, request: Any, version: str) -> RpcResponse:
        supported = sorted(self.handshake_versions)
        message = f"Protocol version {version} is not served: sessions need the initialize handshake"
        error = RpcError(UNSUPPORTED_PROTOCOL_VERSION, message, {"supported": supported, "requested": version})
        return RpcResponse("2.0", _request_id(request), error=error)

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        request = ctx.request
        session_id = request.headers.get(SESSION_HEADER.decode()) if request is not None else None
        if session_id is None:
            raise _mcp_error(INVALID_REQUEST, "tools/call needs an MCP session: send initialize first")
        if params.name != RESET_TOOL.name and params.name not in TOOLS_BY_NAME:
            raise _mcp_error(INVALID_PARAMS, f"Unknown tool: {params.name}")
        episode = self.mcp_episodes.of(session_id)
        arguments = dict(params.arguments or {})
        try:
            if params.name == RESET_TOOL.name:
                withheld = sorted(RESET_WITHHELD.keys() & arguments.keys())
                if withheld:
                    raise InvalidReset(f"{RESET_WITHHELD[withheld[0]]}: {withheld[0]} is not an argument of reset")
                request = msgspec.convert(arguments, ResetRequest)
                shown = episode.reset(**msgspec.structs.asdict(request))
            else:
                shown = episode.step(parse_action({**arguments, "action": params.name}))
        except (msgspec.ValidationError, InvalidReset, InvalidAction) as exc:
            # A tool's input error goes back to the model as a failed result, so it can correct itself.
            return sdk.CallToolResult(content=[sdk.TextContent(text=str(exc))], is_error=True)
        observation = episode.observation
        assert observation is not None
        return sdk.CallToolResult(
            content=[sdk.TextContent(text=shown)],
            structured_content=msgspec.to_builtins(step_payload(observation)),
            is_error=observation.last_action_error is not None,
        )


_NEEDS_SDK = "MCP sessions need the official SDK: pip install 'openenv-service-incident[mcp]'"
_WITHOUT_SDK = RpcResponse("2.0", None, error=RpcError(METHOD_NOT_FOUND, _NEEDS_SDK))


def _request_id(request: Any) -> RequestId:
    request_id = request.get("id") if isinstance(request, dict) else None
    return request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None


def _version() -> str:
    return importlib.metadata.version("openenv-service-incident")


def _mcp_error(code: int, message: str) -> Exception:
    return MCPError(code=code, message=message)


async def _read_body(receive: Receive) -> bytes:
    """The whole request body; the app's request guard bounds its size."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the body already read to the next app, then listens to the real one."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _reply(send: Send, status: int, response: RpcResponse) -> None:
    body = encode(response)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
