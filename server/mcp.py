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
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
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
from service_incident.models import Action, InvalidAction, InvalidReset, Observation, ResetRequest, parse_action
from service_incident.wire import ProtocolError, decode_json, encode, step_payload

from .bounded import AtCapacity, BoundedStore, Clock
from .generation import Generation, reset_arguments
from .http_episodes import UnknownEpisode
from .sessions import EnvFactory

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000
UNSUPPORTED_PROTOCOL_VERSION = -32022

SERVER_NAME = "service_incident"
# A session that has not called a tool this long after its last request expires: the handshake
# alone is free to send, so holding a slot for it must cost the client something.
UNTRIED_SESSION_S = 60.0
SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = b"mcp-protocol-version"

log = logging.getLogger(__name__)

RequestId = str | int | None


class Steps(Protocol):
    """What a tool call acts on: an environment, or an episode that logs its steps."""

    def step(self, action: Action) -> Observation: ...


EnvResolver = Callable[[str | None], Steps]
# Answers one request of OpenEnv's dialect on behalf of the HTTP request that carried it.
OpenEnvDialect = Callable[["Request", Any], Awaitable["RpcResponse"]]


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


def handle(request: Any, env_for: EnvResolver) -> RpcResponse:
    """Answer one request of OpenEnv's dialect (its session methods: `create_session`, `close_session`)."""
    return _answer(request, lambda call: _dispatch(call, env_for))


def method_of(request: Any) -> Any:
    return request.get("method") if isinstance(request, dict) else None


def session_of(request: Any) -> str | None:
    """The HTTP episode a `tools/call` names, if it names one."""
    params = request.get("params") if isinstance(request, dict) else None
    session_id = params.get("session_id") if isinstance(params, dict) else None
    return session_id if isinstance(session_id, str) else None


async def create_session(request: Any, start: Callable[[ResetRequest], Awaitable[tuple[str, Any]]]) -> RpcResponse:
    """`openenv/session/create`: an HTTP episode, started by `start`."""

    async def create(call: RpcRequest) -> Any:
        try:
            session_id, _ = await start(msgspec.convert(call.params, ResetRequest))
        except (msgspec.ValidationError, InvalidReset) as exc:
            raise _Fault(INVALID_PARAMS, f"Invalid params: {exc}") from None
        except AtCapacity as exc:
            raise _Fault(SERVER_ERROR, str(exc)) from None
        return {"session_id": session_id}

    return await _answer_async(request, create)


async def close_session(request: Any, close: Callable[[str], Awaitable[bool]]) -> RpcResponse:
    """`openenv/session/close`: ends the HTTP episode named."""

    async def closing(call: RpcRequest) -> Any:
        session_id = call.params.get("session_id")
        if not isinstance(session_id, str):
            raise _Fault(INVALID_PARAMS, "Invalid params: session_id must be a string")
        return {"session_id": session_id, "closed": await close(session_id)}

    return await _answer_async(request, closing)


def _parse(request: Any) -> RpcRequest:
    try:
        call = msgspec.convert(request, RpcRequest)
    except msgspec.ValidationError as exc:
        raise _Fault(INVALID_REQUEST, f"Invalid Request: {exc}") from None
    if call.jsonrpc != "2.0":
        raise _Fault(INVALID_REQUEST, "Invalid Request: jsonrpc must be '2.0'")
    return call


def _answer(request: Any, dispatch: Callable[[RpcRequest], Any]) -> RpcResponse:
    request_id = _request_id(request)
    try:
        return RpcResponse("2.0", request_id, result=dispatch(_parse(request)))
    except _Fault as fault:
        return RpcResponse("2.0", request_id, error=RpcError(fault.code, fault.message))
    except Exception as exc:
        return _internal(request_id, exc)


async def _answer_async(request: Any, dispatch: Callable[[RpcRequest], Awaitable[Any]]) -> RpcResponse:
    request_id = _request_id(request)
    try:
        return RpcResponse("2.0", request_id, result=await dispatch(_parse(request)))
    except _Fault as fault:
        return RpcResponse("2.0", request_id, error=RpcError(fault.code, fault.message))
    except Exception as exc:
        return _internal(request_id, exc)


def _internal(request_id: RequestId, exc: Exception) -> RpcResponse:
    # As on the WebSocket: the client learns the exception type, never environment internals.
    log.exception("environment failed on an MCP request")
    return RpcResponse("2.0", request_id, error=RpcError(INTERNAL_ERROR, f"{type(exc).__name__} in the environment"))


def _dispatch(call: RpcRequest, env_for: EnvResolver) -> Any:
    if call.method == "tools/list":
        return {"tools": TOOLS}
    if call.method == "tools/call":
        return _call_tool(call.params, env_for)
    raise _Fault(METHOD_NOT_FOUND, f"Method not found: {call.method}")


def _call_tool(params: dict[str, Any], env_for: EnvResolver) -> dict[str, Any]:
    try:
        call = msgspec.convert(params, _Call)
        action = parse_action({**call.arguments, "action": call.name})
        env = env_for(call.session_id)
    except (msgspec.ValidationError, InvalidAction, UnknownEpisode) as exc:
        raise _Fault(INVALID_PARAMS, f"Invalid params: {exc}") from None
    observation = env.step(action)
    # The payload is both the text and the structured result: encoded once, its bytes are spliced in as the latter.
    encoded = encode(step_payload(observation))
    return {
        "content": [{"type": "text", "text": encoded.decode()}],
        "structuredContent": msgspec.Raw(encoded),
        "isError": observation.last_action_error is not None,
    }


# --- MCP proper, through the official SDK ---------------------------------------------------------


class McpSession:
    """An MCP session's episode, made by its first tool call: a session that never called one is
    cheap to hold for its client and expires sooner."""

    __slots__ = ("ended", "episode", "new_env", "session_id")

    def __init__(self, new_env: EnvFactory, session_id: str) -> None:
        self.new_env = new_env
        self.session_id = session_id
        self.episode: TextEpisode | None = None
        self.ended = False  # the SDK has ended it (DELETE, its own idle timeout)

    @property
    def used(self) -> bool:
        return self.episode is not None

    def play(self) -> TextEpisode:
        if self.episode is None:
            self.episode = TextEpisode(self.new_env())
        return self.episode

    def close(self) -> None:
        if self.episode is not None:
            self.episode.env.close()


def session_store(
    max_sessions: int,
    per_client: int,
    idle_timeout_s: float,
    clock: Clock = time.monotonic,
    on_drop: Callable[[McpSession], None] = McpSession.close,
) -> BoundedStore[McpSession]:
    """MCP sessions, bounded like every store (bounded.py): a client past its bound is refused unless
    one of its own sessions is idle; a full server lets an idle session of anyone make way."""
    return BoundedStore(
        capacity=max_sessions,
        per_owner=per_client,
        idle_timeout_s=idle_timeout_s,
        live_s=min(UNTRIED_SESSION_S, idle_timeout_s),
        what="MCP sessions",
        clock=clock,
        on_drop=on_drop,
        evict_own=False,
    )


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
        max_sessions_per_client: int = 16,
        generation: Generation | None = None,
    ) -> None:
        self.openenv = openenv
        self.new_env = new_env
        # The server's generation pool, as its other doors reset through it: a training reset's
        # generation would otherwise hold the event loop, and every other session, while it runs.
        self.generation = generation or Generation(0, None)
        self.sessions = session_store(max_sessions, max_sessions_per_client, idle_timeout_s, clock, self._ended)
        self._ending: list[str] = []
        self._wake: anyio.Event | None = None
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
            # Ours is the bound that refuses, with a reply that says whose; the SDK's is a backstop.
            max_sessions=max_sessions + 1,
            max_request_body_size=max_body_bytes,
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        if self.manager is None:
            yield
            return
        async with self.manager.run(), anyio.create_task_group() as tasks:
            tasks.start_soon(self._end_sessions)
            yield
            tasks.cancel_scope.cancel()

    def expire(self) -> int:
        """End the sessions idle past the timeout, and sooner those that never called a tool."""
        return self.sessions.expire() + self.sessions.expire(UNTRIED_SESSION_S, where=lambda s: not s.used)

    def _ended(self, session: McpSession) -> None:
        session.close()
        if not session.ended and self.manager is not None:
            # Evicted or expired here: the SDK must end it too, which takes a request (below).
            self._ending.append(session.session_id)
            if self._wake is not None:
                self._wake.set()

    async def _end_sessions(self) -> None:
        assert self.manager is not None
        while True:
            self._wake = anyio.Event()
            if not self._ending:
                await self._wake.wait()
            ending, self._ending = self._ending, []
            for session_id in ending:
                await self.manager.handle_request(_delete_scope(session_id), _no_body, _discard)

    async def _initialize(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        """Open an MCP session within the bounds, and keep it in the store under its client."""
        assert self.manager is not None
        client = scope["client"][0] if scope.get("client") else ""
        try:
            self.sessions.make_room(client)
        except AtCapacity as full:
            status = 429 if full.whose == "owner" else 503
            error = RpcError(SERVER_ERROR, str(full), {"held": full.held, "limit": full.limit, "whose": full.whose})
            await _reply(send, status, RpcResponse("2.0", None, error=error))
            return

        async def opened(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                session_id = dict(message.get("headers", [])).get(SESSION_HEADER)
                if session_id is not None:
                    key = session_id.decode("latin-1")
                    self.sessions.add(key, McpSession(self.new_env, key), client)
            await send(message)

        await self.manager.handle_request(scope, _replay(body, receive), opened)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self.manager
        headers = dict(scope["headers"])
        session_id = headers.get(SESSION_HEADER)
        if manager is None and (scope["method"] != "POST" or session_id is not None):
            await _reply(send, 405 if scope["method"] != "POST" else 404, _WITHOUT_SDK)
            return
        if manager is not None and (scope["method"] != "POST" or session_id is not None):
            key = session_id.decode("latin-1") if session_id is not None else None
            if key is not None:
                self.sessions.touch(key)
            await manager.handle_request(scope, receive, send)
            if scope["method"] == "DELETE" and key is not None:
                session = self.sessions.get(key)
                if session is not None:
                    session.ended = True
                    self.sessions.pop(key)
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
            await self._initialize(scope, body, receive, send)
            return
        await _reply(send, 200, await self.openenv(Request(scope), request))

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
        session = self.sessions.get(session_id)
        if session is None:
            raise _mcp_error(INVALID_REQUEST, "this MCP session has expired: send initialize for a new one")
        episode = session.play()
        arguments = dict(params.arguments or {})
        try:
            if params.name == RESET_TOOL.name:
                withheld = sorted(RESET_WITHHELD.keys() & arguments.keys())
                if withheld:
                    raise InvalidReset(f"{RESET_WITHHELD[withheld[0]]}: {withheld[0]} is not an argument of reset")
                reset = await self.generation.ready(msgspec.convert(arguments, ResetRequest))
                shown = episode.reset(**reset_arguments(episode.env, reset))
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


def _delete_scope(session_id: str) -> Scope:
    headers = [(SESSION_HEADER, session_id.encode("latin-1"))]
    return {
        "type": "http",
        "method": "DELETE",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "headers": headers,
        "scheme": "http",
        "http_version": "1.1",
        "root_path": "",
        "server": None,
        "client": None,
    }


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _discard(message: Message) -> None:
    pass


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
