"""The stock OpenEnv `MCPToolClient` (its own venv) plays an episode through our `/mcp`, in its dialect."""

from __future__ import annotations

from pathlib import Path

from test_interop_stock_client import run_stock

from service_incident.models import ACTION_NAMES

# Runs in the stock venv: only `openenv` and the standard library are importable there.
STOCK_MCP_CLIENT = r'''
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
'''


def test_stock_mcp_tool_client_plays_an_http_session(openenv_python: Path, server_url: str) -> None:
    out = run_stock(openenv_python, STOCK_MCP_CLIENT, server_url)
    assert out["tools"] == list(ACTION_NAMES)
    assert all("metadata" not in schema["properties"] for schema in out["schemas"])
    assert out["first"]["structuredContent"]["observation"]["step_count"] == 1
    last = out["last"]["structuredContent"]
    assert last["done"] is True and last["observation"]["score"] is not None
