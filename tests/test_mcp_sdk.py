"""`/mcp` against the official MCP SDK's clients over real sockets: handshake, sessions, tools, episodes.

OpenEnv's JSON-RPC dialect on the same path (no handshake, `session_id` in params) is covered in
test_server_http.py and, on the WebSocket, in test_server_ws.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import running_server
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from serving import serving

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.integrations import text
from service_incident.models import ACTION_NAMES, parse_action
from service_incident.server.app import create_app
from service_incident.server.mcp import McpSession, session_store
from service_incident.server.settings import Settings

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}},
}


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    with running_server() as url:
        yield f"{url}/mcp"


async def test_the_official_client_lists_reset_and_one_tool_per_action(mcp_url: str) -> None:
    async with Client(mcp_url) as client:
        assert client.server_info is not None and client.server_info.name == "service_incident"
        assert client.protocol_version == "2025-11-25"
        tools = (await client.list_tools()).tools
    assert [tool.name for tool in tools] == ["reset", *ACTION_NAMES]
    for tool in tools:
        properties = tool.input_schema["properties"]
        assert tool.input_schema["type"] == "object" and tool.description
        # No internal fields: the action tag is the tool's name, OpenEnv's metadata is no argument.
        assert "metadata" not in properties and "action" not in properties
        # The session owns the episode, and a model is paid at the end: dense shaping would judge for it.
        assert "episode_id" not in properties and "reward_mode" not in properties
        assert all(prop.get("description") for prop in properties.values()), tool.name


async def test_the_official_client_plays_an_episode_to_its_score(mcp_url: str) -> None:
    local = ServiceIncidentEnvironment()
    first = local.reset(task_id="easy", seed=11)
    target = first.services[0]
    async with Client(mcp_url) as client:
        reset = await client.call_tool("reset", {"task_id": "easy", "seed": 11})
        # The first message is the whole page: the same as the page of the same episode played here.
        assert reset.is_error is False and reset.content[0].text == text.page(first)
        look = await client.call_tool("inspect_metrics", {"target": target})
        after = local.step(parse_action({"action": "inspect_metrics", "target": target}))
        assert look.content[0].text == text.revealed(first, after)
        assert f"visible_metrics:\n  {target} (as of {after.clock[11:16]}):" in look.content[0].text
        assert "topology" not in look.content[0].text  # only what the action revealed
        assert look.structured_content["observation"]["step_count"] == 1
        assert look.structured_content["observation"]["score"] is None
        end = await client.call_tool("declare", {"target": target, "severity": "P1", "rationale": "metrics"})
    payload = end.structured_content
    assert payload["done"] is True and 0 < payload["observation"]["score"] < 1
    assert f"episode over: score {payload['observation']['score']}" in end.content[0].text


async def test_sdk_session_with_an_explicit_handshake_and_ping(mcp_url: str) -> None:
    async with streamable_http_client(mcp_url) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.capabilities.tools is not None
        await session.send_ping()
        result = await session.call_tool("reset", {"task_id": "rca_01", "seed": 2})
        assert "declare_rca" in result.content[0].text
        services = result.structured_content["observation"]["services"]
        rca = await session.call_tool("declare_rca", {"targets": services[:1]})
        assert rca.structured_content["done"] is True


async def test_each_session_owns_its_own_episode(mcp_url: str) -> None:
    async with Client(mcp_url) as a, Client(mcp_url) as b:
        await a.call_tool("reset", {"task_id": "medium", "seed": 1})
        await b.call_tool("reset", {"task_id": "hard", "seed": 2})
        step_a = await a.call_tool("inspect_logs", {"target": "db"})
        step_b = await b.call_tool("inspect_logs", {"target": "db"})
        step_a2 = await a.call_tool("inspect_metrics", {"target": "db"})
    assert step_a.structured_content["observation"]["task_id"] == "medium"
    assert step_b.structured_content["observation"]["task_id"] == "hard"
    assert step_b.structured_content["observation"]["step_count"] == 1
    assert step_a2.structured_content["observation"]["step_count"] == 2


async def test_bad_arguments_are_tool_errors_the_model_can_read(mcp_url: str) -> None:
    async with Client(mcp_url) as client:
        before = await client.call_tool("inspect_logs", {"target": "db"})
        assert before.is_error is True and "call reset first" in before.content[0].text
        bad_reset = await client.call_tool("reset", {"task_id": "no_such_task"})
        assert bad_reset.is_error is True and "unknown task" in bad_reset.content[0].text
        dense = await client.call_tool("reset", {"task_id": "easy", "reward_mode": "dense"})
        assert dense.is_error is True and "reward_mode is not an argument" in dense.content[0].text
        await client.call_tool("reset", {"task_id": "easy", "seed": 4})
        missing = await client.call_tool("declare", {"target": "db"})
        assert missing.is_error is True and "severity" in missing.content[0].text
        unknown_service = await client.call_tool("inspect_logs", {"target": "nowhere"})
        assert unknown_service.is_error is True and "unknown service" in unknown_service.content[0].text
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("drop_tables", {})


async def test_tool_text_stamps_each_view_and_an_unknown_endpoint_is_a_tool_error(mcp_url: str) -> None:
    async with Client(mcp_url) as client:
        reset = await client.call_tool("reset", {"task_id": "gen_medium", "seed": 5})
        observation = reset.structured_content["observation"]
        shown = next(iter(observation["visible_logs"]))
        assert f"  {shown} (as of {observation['clock'][11:16]}):" in reset.content[0].text
        entry = next(card["name"] for card in observation["topology"] if card["user_facing"])
        traced = await client.call_tool("inspect_traces", {"target": entry, "errors_only": True})
        minute = traced.structured_content["observation"]["clock"][11:16]
        assert f"  {entry} (as of {minute}):\n    sampled " in traced.content[0].text
        unknown = await client.call_tool("inspect_traces", {"target": entry, "endpoint": "GET /nowhere"})
        assert unknown.is_error is True and f"unknown endpoint 'GET /nowhere' of {entry}" in unknown.content[0].text
        after = unknown.structured_content["observation"]
        assert after["as_of"]["traces"] == {entry: minute} and unknown.structured_content["done"] is False


def _post(http: httpx.Client, body: Any, session: str | None = None, **headers: str) -> httpx.Response:
    extra = {"Mcp-Session-Id": session} if session else {}
    return http.post("/mcp", json=body, headers={**ACCEPT, **extra, **headers})


def test_the_wire_as_the_specification_has_it(mcp_url: str) -> None:
    with httpx.Client(base_url=mcp_url.removesuffix("/mcp"), timeout=5) as http:
        init = _post(http, INITIALIZE)
        assert init.status_code == 200 and init.json()["result"]["protocolVersion"] == "2025-06-18"
        session = init.headers["Mcp-Session-Id"]
        version = {"MCP-Protocol-Version": "2025-06-18"}
        notified = _post(http, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session, **version)
        assert notified.status_code == 202 and notified.content == b""
        ping = _post(http, {"jsonrpc": "2.0", "id": 2, "method": "ping"}, session, **version)
        assert ping.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        assert _post(http, {"jsonrpc": "2.0", "id": 3, "method": "ping"}, "not-a-session").status_code == 404
        ended = http.delete("/mcp", headers={"Mcp-Session-Id": session, **version})
        assert ended.status_code == 200
        assert _post(http, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, session, **version).status_code == 404


def test_a_protocol_without_handshake_is_told_which_versions_to_use(mcp_url: str) -> None:
    discover = {"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {}}
    with httpx.Client(base_url=mcp_url.removesuffix("/mcp"), timeout=5) as http:
        response = _post(http, discover, **{"MCP-Protocol-Version": "2026-07-28"})
    error = response.json()["error"]
    assert response.status_code == 400 and response.json()["id"] == 9
    assert error["code"] == -32022 and error["data"]["requested"] == "2026-07-28"
    assert "2025-11-25" in error["data"]["supported"] and "2026-07-28" not in error["data"]["supported"]


def test_openenv_requests_without_a_session_keep_their_dialect(mcp_url: str) -> None:
    with httpx.Client(base_url=mcp_url.removesuffix("/mcp"), timeout=5) as http:
        validator = http.post("/mcp", json={})
        listing = _post(http, {"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
        oversize = b" " * (Settings().http_max_body_bytes + 1)
        too_big = http.post("/mcp", content=oversize, headers={"Content-Type": "application/json"})
    assert validator.status_code == 200 and validator.json()["error"]["code"] == -32600
    assert [tool["name"] for tool in listing.json()["result"]["tools"]] == list(ACTION_NAMES)
    assert too_big.status_code == 413


def test_session_store_is_bounded_in_number_and_idle_time() -> None:
    now = [0.0]
    store = session_store(max_sessions=2, per_client=2, idle_timeout_s=10.0, clock=lambda: now[0])
    for key in "ab":
        store.make_room("client")
        store.add(key, McpSession(ServiceIncidentEnvironment, key), "client")
    now[0] = 11.0
    assert store.expire() == 2 and len(store) == 0


async def test_ending_a_session_ends_its_episode() -> None:
    config = Settings.load(environ={}, log_level="warning")
    app = create_app(config)
    (endpoint,) = [route.endpoint for route in app.routes if getattr(route, "path", None) == "/mcp"]
    with serving(app) as url:
        async with Client(f"{url}/mcp") as client:
            await client.call_tool("reset", {"task_id": "easy", "seed": 1})
            assert len(endpoint.sessions) == 1
        # Leaving the client's context sends DELETE for its session.
        assert len(endpoint.sessions) == 0
