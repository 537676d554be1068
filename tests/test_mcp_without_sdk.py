"""A server without the `mcp` extra (as beside stock OpenEnv, whose venv holds the SDK 1.x) answers the
official SDK 2.x client with one plain JSON-RPC error naming the extra: the client stops there, with
no earlier error under it and no handshake after it."""

from __future__ import annotations

import asyncio

import httpx
from mcp import Client
from mcp.shared.exceptions import MCPError

NAMES_THE_EXTRA = "pip install 'openenv-service-incident[mcp]'"


def leaves(error: BaseException) -> list[BaseException]:
    """The errors inside the client's task groups."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


async def connect(url: str) -> None:
    async with Client(f"{url}/mcp"):
        pass


def test_the_official_client_meets_one_error_that_names_the_extra(server_beside_stock_openenv: str) -> None:
    url = server_beside_stock_openenv
    try:
        asyncio.run(connect(url))
    except BaseException as error:  # the client wraps what it met in its task groups
        caught = error
    else:
        raise AssertionError("the client connected to a server that serves no MCP session")
    probe = httpx.post(
        f"{url}/mcp",
        json={"jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {}},
        headers={"MCP-Protocol-Version": "2026-07-28"},
    )
    listing = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 8, "method": "tools/list"})
    [leaf] = leaves(caught)
    assert isinstance(leaf, MCPError) and NAMES_THE_EXTRA in str(leaf)
    assert leaf.__context__ is None and leaf.__cause__ is None
    # On the wire: the probe is refused for want of any served revision, in one plain JSON-RPC error.
    assert probe.status_code == 400
    assert probe.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32022,
            "message": "MCP sessions need the official SDK: " + NAMES_THE_EXTRA,
            "data": {"supported": [], "requested": "2026-07-28"},
        },
    }
    # OpenEnv's dialect, which names no revision, is served as before.
    assert listing.status_code == 200 and listing.json()["result"]["tools"]
