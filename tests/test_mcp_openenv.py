"""`/mcp` and the stock OpenEnv venv: OpenEnv's `MCPToolClient` plays in its dialect, the MCP SDK 1.x
that OpenEnv pulls in (`streamablehttp_client` + `ClientSession`) plays MCP sessions, and our server
installed there, without the SDK 2.x, still serves the dialect."""

from __future__ import annotations

from pathlib import Path

import httpx
from test_interop_stock_client import run_stock

from service_incident.models import ACTION_NAMES

# Runs in the stock venv: only `openenv` and the standard library are importable there.
STOCK_MCP_CLIENT = r"""
import asyncio, json, sys
from openenv.core.mcp_client import MCPToolClient

async def main(url):
    out = {}
    env = MCPToolClient(base_url=url)
    try:
        out["tools"] = [tool.name for tool in await env.list_tools()]
        out["schemas"] = [tool.input_schema for tool in await env.list_tools()]
        first = await env.call_tool("inspect_logs", target="db")
        services = first["structuredContent"]["observation"]["services"]
        last = await env.call_tool("declare", target=services[0], severity="P1")
        out["first"], out["last"] = first, last
    finally:
        await env.close()
    return out

print(json.dumps(asyncio.run(main(sys.argv[1]))))
"""


def test_stock_mcp_tool_client_plays_an_http_session(openenv_python: Path, server_url: str) -> None:
    out = run_stock(openenv_python, STOCK_MCP_CLIENT, server_url)
    assert out["tools"] == list(ACTION_NAMES)
    assert all("metadata" not in schema["properties"] for schema in out["schemas"])
    assert out["first"]["structuredContent"]["observation"]["step_count"] == 1
    last = out["last"]["structuredContent"]
    assert last["done"] is True and last["observation"]["score"] is not None


# The 1.x SDK's client, as its own documentation has it; it offers the newest handshake revision.
SDK_1X_CLIENT = r"""
import asyncio, json, sys
from importlib.metadata import version
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

async def main(url):
    async with streamablehttp_client(url + "/mcp") as (read, write, _), ClientSession(read, write) as session:
        init = await session.initialize()
        await session.send_ping()
        tools = (await session.list_tools()).tools
        page = await session.call_tool("reset", {"task_id": "medium", "seed": 8})
        services = page.structuredContent["observation"]["services"]
        look = await session.call_tool("inspect_metrics", {"target": services[1]})
        end = await session.call_tool("declare", {"target": services[1], "severity": "P2"})
        return {"sdk": version("mcp"), "protocol": init.protocolVersion, "tools": [t.name for t in tools],
                "look": look.content[0].text, "end": end.structuredContent}

print(json.dumps(asyncio.run(main(sys.argv[1]))))
"""


def test_the_1x_sdk_client_plays_an_episode(openenv_python: Path, server_url: str) -> None:
    out = run_stock(openenv_python, SDK_1X_CLIENT, server_url)
    assert out["sdk"].startswith("1.") and out["protocol"] == "2025-11-25"
    assert out["tools"] == ["reset", *ACTION_NAMES]
    assert out["look"].startswith("Inspected the metrics of ") and "step 1/" in out["look"]
    assert out["end"]["done"] is True and out["end"]["observation"]["score"] is not None


def test_beside_stock_openenv_mcp_speaks_openenv_s_dialect_and_says_how_to_get_sessions(
    server_beside_stock_openenv: str,
) -> None:
    # That venv holds OpenEnv's 1.x SDK, not the 2.x one the `mcp` extra brings: the server still runs.
    with httpx.Client(base_url=server_beside_stock_openenv) as http:
        init = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
        listing = http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        stream = http.get("/mcp")
    assert init.status_code == 200 and init.json()["id"] == 1
    assert "pip install 'openenv-service-incident[mcp]'" in init.json()["error"]["message"]
    assert [tool["name"] for tool in listing.json()["result"]["tools"]] == list(ACTION_NAMES)
    assert stream.status_code == 405
