"""Bounds that hold per client on a real loopback server: many addresses cannot evict a victim's live
HTTP episode, one address cannot take every MCP session, a session that never called a tool expires
sooner, and every refusal says whose bound is full. And resuming: only the id resumes an episode."""

from __future__ import annotations

import json
import secrets
from typing import Any

import httpx
import pytest
from serving import ManualClock, eventually
from test_mcp_sdk import ACCEPT, INITIALIZE
from websockets.asyncio.client import connect

from service_incident.client import EpisodeLost, ServiceIncidentEnv
from service_incident.models import InspectLogs


def from_address(url: str, host: str) -> httpx.Client:
    """A client whose requests come from `host`, one of the 127.0.0.0/8 loopback addresses."""
    return httpx.Client(base_url=url, transport=httpx.HTTPTransport(local_address=host), timeout=10)


def test_seventeen_addresses_resetting_cannot_evict_a_live_episode_of_another(make_server: Any) -> None:
    # Before, the least recently used episode went whoever held it: 17 x 16 resets evicted the victim.
    # A clock that stands still: however slow the machine, every episode stays live (used within 60 s).
    url = make_server(
        clock=ManualClock(), http_max_episodes=256, http_max_episodes_per_client=16, http_implicit_episode="false"
    )
    with from_address(url, "127.0.0.100") as victim:
        episode = victim.post("/reset", json={"task_id": "easy", "seed": 1}).json()["episode_id"]
        refused = []
        for n in range(17):
            with from_address(url, f"127.0.0.{n + 2}") as attacker:
                for _ in range(16):
                    reply = attacker.post("/reset", json={"task_id": "easy"})
                    if reply.status_code != 200:
                        refused.append(reply)
        step = victim.post("/step", json={"action": "inspect_logs", "target": "api", "episode_id": episode})
    assert step.status_code == 200 and step.json()["episode_id"] == episode
    # 255 slots were free for the attackers: once full, an attacker holding some gives up its own
    # oldest, and the one holding none (the 17th) is refused every time, told whose bound is full.
    assert len(refused) == 16 and {r.status_code for r in refused} == {503}
    assert "the server holds 256 of its 256 HTTP episodes" in refused[0].json()["detail"]


def test_one_address_holds_a_bounded_share_of_mcp_sessions(make_server: Any) -> None:
    # Before, 300 initialize calls from one address took all 256 slots and others got 503.
    url = make_server(mcp_max_sessions_per_client=4)
    with from_address(url, "127.0.0.2") as greedy, from_address(url, "127.0.0.3") as other:
        opened = [greedy.post("/mcp", json=INITIALIZE, headers=ACCEPT) for _ in range(4)]
        refused = greedy.post("/mcp", json=INITIALIZE, headers=ACCEPT)
        theirs = other.post("/mcp", json=INITIALIZE, headers=ACCEPT)
    assert all(reply.status_code == 200 for reply in opened)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert "this client already holds 4 of its 4 MCP sessions" in error["message"]
    assert error["data"] == {"held": 4, "limit": 4, "whose": "owner"}
    assert theirs.status_code == 200 and theirs.headers["Mcp-Session-Id"]


def test_a_session_that_never_called_a_tool_expires_sooner(make_server: Any) -> None:
    clock = ManualClock()
    url = make_server(clock=clock, mcp_max_sessions_per_client=1, http_episode_idle_timeout_s=900)
    with httpx.Client(base_url=url, timeout=10) as http:
        first = http.post("/mcp", json=INITIALIZE, headers=ACCEPT)
        assert http.post("/mcp", json=INITIALIZE, headers=ACCEPT).status_code == 429
        clock.advance(61)  # past the untried sessions' deadline, far within the idle timeout

        def reopened() -> bool:
            return http.post("/mcp", json=INITIALIZE, headers=ACCEPT).status_code == 200

        eventually(reopened, "the untried session expired and freed the client's slot")
        version = {"MCP-Protocol-Version": "2025-06-18", "Mcp-Session-Id": first.headers["Mcp-Session-Id"]}
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        assert http.post("/mcp", json=ping, headers={**ACCEPT, **version}).status_code == 404  # ended in the SDK too


async def test_resuming_with_a_wrong_id_is_a_typed_error_and_never_reaches_another_episode(make_server: Any) -> None:
    url = make_server()
    async with ServiceIncidentEnv(url) as owner:
        first = await owner.reset(task_id="easy", seed=3)
        assert first.episode_id is not None
        await owner.step(InspectLogs(target="api"))
        await owner.step(InspectLogs(target="api"))
        guesses = [secrets.token_urlsafe(18), first.episode_id[:-1] + ("A" if first.episode_id[-1] != "A" else "B")]
        async with connect(url.replace("http", "ws") + "/ws") as ws:
            for guess in guesses:
                await ws.send(json.dumps({"type": "resume", "data": {"episode_id": guess, "steps": 2}}))
                reply = json.loads(await ws.recv())
                assert reply["type"] == "error" and reply["data"]["code"] == "UNKNOWN_EPISODE"
            # The right id at the wrong step count is refused too: a resume never rewinds an episode.
            await ws.send(json.dumps({"type": "resume", "data": {"episode_id": first.episode_id, "steps": 0}}))
            assert json.loads(await ws.recv())["data"]["code"] == "UNKNOWN_EPISODE"
            await ws.send(json.dumps({"type": "resume", "data": {"episode_id": first.episode_id, "steps": 2}}))
            resumed = json.loads(await ws.recv())
        assert resumed["type"] == "resumed" and resumed["data"]["steps"] == 2
        assert resumed["data"]["result"]["observation"]["step_count"] == 2


async def test_a_session_whose_episode_is_gone_fails_fast_until_a_reset(make_server: Any) -> None:
    clock = ManualClock()
    url = make_server(clock=clock, session_idle_timeout_s=5, http_episode_idle_timeout_s=5)
    env = ServiceIncidentEnv(url)
    try:
        await env.reset(task_id="easy", seed=3)
        clock.advance(6)  # the session idles out (closed 1001) and its logged episode expires with it
        eventually(lambda: httpx.get(f"{url}/health").json()["active_sessions"] == 0, "the session idled out")
        with pytest.raises(EpisodeLost, match="unknown or expired"):
            await env.step(InspectLogs(target="api"))
        with pytest.raises(EpisodeLost):
            await env.step(InspectLogs(target="api"))  # at once: nothing left to resume
        assert (await env.reset(task_id="easy", seed=3)).observation.step_count == 0
    finally:
        await env.close()
