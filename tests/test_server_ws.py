"""`/ws` over real sockets with a raw websockets client: the frames exactly as OpenEnv defines them."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
from typing import Any

import httpx
import pytest
from serving import ManualClock
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from service_incident.client.base import ws_url
from service_incident.models import ACTION_NAMES

EPISODE = {"task_id": "easy", "seed": 7, "episode_id": "ep-ws"}


async def open_ws(base_url: str) -> ClientConnection:
    return await connect(ws_url(base_url), compression=None, open_timeout=5)


async def ask(ws: ClientConnection, frame: str | bytes | dict[str, Any]) -> dict[str, Any]:
    await ws.send(json.dumps(frame) if isinstance(frame, dict) else frame)
    async with asyncio.timeout(5):
        return json.loads(await ws.recv())


async def closed_with(ws: ClientConnection) -> int | None:
    """Wait for the server to close the socket; the close code it sent."""
    with pytest.raises(ConnectionClosed):
        async with asyncio.timeout(5):
            await ws.recv()
    return ws.close_code


def health(base_url: str) -> dict[str, Any]:
    return httpx.get(f"{base_url}/health").json()


async def play_to_end(ws: ClientConnection) -> list[dict[str, Any]]:
    """Reset, then inspect every service and declare the first one: a whole episode."""
    reset = await ask(ws, {"type": "reset", "data": EPISODE})
    services = reset["data"]["observation"]["services"]
    frames = [reset]
    for action in [{"action": "inspect_logs", "target": s} for s in services[1:]] + [
        {"action": "declare", "target": services[0], "severity": "P1"}
    ]:
        frames.append(await ask(ws, {"type": "step", "data": action}))
        if frames[-1]["data"]["done"]:
            break
    return frames


async def test_full_episode_frames_are_openenv_shaped(server_url: str) -> None:
    async with await open_ws(server_url) as ws:
        frames = await play_to_end(ws)
        state = await ask(ws, {"type": "state"})
        await ws.send(json.dumps({"type": "close"}))
        assert await closed_with(ws) == 1000
    for index, frame in enumerate(frames):
        assert frame["type"] == "observation"
        data = frame["data"]
        # The reset's reply adds the id that resumes the episode on another socket.
        assert set(data) == {"observation", "reward", "done", "metadata"} | ({"episode_id"} if index == 0 else set())
        # reward and done travel beside the observation, metadata inside and beside it
        assert "reward" not in data["observation"] and "done" not in data["observation"]
        assert data["observation"]["metadata"] == data["metadata"]
        assert data["metadata"]["episode_id"] == "ep-ws"
    assert frames[0]["data"]["reward"] == 0.0 and not frames[0]["data"]["done"]
    last = frames[-1]["data"]
    assert last["done"] is True
    assert isinstance(last["observation"]["score"], float) and last["observation"]["breakdown"]
    assert state == {
        "type": "state",
        "data": {
            "episode_id": "ep-ws",
            "step_count": len(frames) - 1,
            "task_id": "easy",
            "incident_id": frames[0]["data"]["observation"]["incident_id"],
            "seed": 7,
            "done": True,
        },
    }


async def test_pipelined_frames_are_answered_in_order(server_url: str) -> None:
    async with await open_ws(server_url) as ws:
        await ask(ws, {"type": "reset", "data": EPISODE})
        for _ in range(2):
            await ws.send(json.dumps({"type": "step", "data": {"action": "inspect_metrics", "target": "db"}}))
        await ws.send(json.dumps({"type": "state"}))
        replies = [json.loads(await ws.recv()) for _ in range(3)]
    assert [r["type"] for r in replies] == ["observation", "observation", "state"]
    assert [r["data"]["observation"]["step_count"] for r in replies[:2]] == [1, 2]
    assert replies[2]["data"]["step_count"] == 2


VALIDATION = "VALIDATION_ERROR"
STEP = {"type": "step", "data": {"action": "inspect_logs", "target": "db"}}
# (frame, error code, loc of the first error or None, whether the server closes the socket)
BAD_FRAMES: dict[str, tuple[str | bytes, str, list[Any] | None, bool]] = {
    "not json": ("not json", "INVALID_JSON", None, False),
    "truncated json": ('{"type": "step", "data": {', "INVALID_JSON", None, False),
    "non-object json": ("[1, 2]", "SESSION_ERROR", None, True),
    "json string": ('"reset"', "SESSION_ERROR", None, True),
    "binary frame": (json.dumps(STEP).encode(), "SESSION_ERROR", None, True),
    "unknown type": ('{"type": "frobnicate"}', "UNKNOWN_TYPE", None, False),
    "missing type": ('{"data": {}}', "UNKNOWN_TYPE", None, False),
    "missing data": ('{"type": "step"}', VALIDATION, ["data"], False),
    "data on state": ('{"type": "state", "data": {}}', VALIDATION, ["data"], False),
    "extra envelope field": (json.dumps({**STEP, "timeout_s": 3}), VALIDATION, ["timeout_s"], False),
    "null reset data": ('{"type": "reset", "data": null}', VALIDATION, ["data"], False),
    "unknown reset field": (
        '{"type": "reset", "data": {"difficulty": "easy"}}',
        VALIDATION,
        ["data", "difficulty"],
        False,
    ),
    "unknown task": ('{"type": "reset", "data": {"task_id": "impossible"}}', VALIDATION, [], False),
    "unknown action": (
        json.dumps({"type": "step", "data": {"action": "reboot", "target": "db"}}),
        VALIDATION,
        ["action"],
        False,
    ),
    "action missing field": (
        '{"type": "step", "data": {"action": "declare", "target": "db"}}',
        VALIDATION,
        ["severity"],
        False,
    ),
    "action extra field": (
        json.dumps({"type": "step", "data": {**STEP["data"], "force": True}}),
        VALIDATION,
        ["force"],
        False,
    ),
    "action wrong type": (
        '{"type": "step", "data": {"action": "inspect_logs", "target": 5}}',
        VALIDATION,
        ["target"],
        False,
    ),
}


@pytest.mark.parametrize("name", list(BAD_FRAMES))
async def test_bad_frame_gets_its_answer_and_nothing_else_is_lost(make_server: Any, name: str) -> None:
    frame, code, loc, fatal = BAD_FRAMES[name]
    url = make_server(max_concurrent_envs=2)
    async with await open_ws(url) as victim, await open_ws(url) as bystander:
        await ask(victim, {"type": "reset", "data": EPISODE})
        await ask(victim, STEP)
        await ask(bystander, {"type": "reset", "data": {**EPISODE, "episode_id": "bystander"}})

        reply = await ask(victim, frame)
        assert reply["type"] == "error"
        assert reply["data"]["code"] == code
        assert reply["data"]["message"]
        if loc is not None:
            assert reply["data"]["errors"][0]["loc"] == loc
        if fatal:
            assert await closed_with(victim) == 1000
        else:  # the session goes on with its episode intact
            state = await ask(victim, {"type": "state"})
            assert state["data"]["episode_id"] == "ep-ws" and state["data"]["step_count"] == 1

        after = await ask(bystander, STEP)
        assert after["type"] == "observation" and after["data"]["observation"]["step_count"] == 1
        assert (await ask(bystander, {"type": "state"}))["data"]["episode_id"] == "bystander"
    assert health(url)["active_sessions"] == 0


async def test_oversized_frame_closes_with_1009_and_others_carry_on(make_server: Any) -> None:
    url = make_server(max_concurrent_envs=2, ws_max_message_bytes=4096)
    async with await open_ws(url) as victim, await open_ws(url) as bystander:
        await ask(bystander, {"type": "reset", "data": EPISODE})
        big = {"type": "step", "data": {"action": "inspect_logs", "target": "db", "rationale": "x" * 5000}}
        await victim.send(json.dumps(big))
        assert await closed_with(victim) == 1009
        assert (await ask(bystander, STEP))["type"] == "observation"
    assert health(url)["active_sessions"] == 0


async def test_step_before_reset_is_an_observation_with_an_error(server_url: str) -> None:
    async with await open_ws(server_url) as ws:
        reply = await ask(ws, STEP)
        assert reply["type"] == "observation"
        assert "reset" in reply["data"]["observation"]["last_action_error"]
        assert (await ask(ws, {"type": "reset", "data": EPISODE}))["type"] == "observation"


async def test_step_after_done_is_an_observation_with_an_error(server_url: str) -> None:
    async with await open_ws(server_url) as ws:
        frames = await play_to_end(ws)
        reply = await ask(ws, STEP)
        assert reply["type"] == "observation"
        assert reply["data"]["done"] is True
        assert "over" in reply["data"]["observation"]["last_action_error"]
        state = (await ask(ws, {"type": "state"}))["data"]
        assert state["step_count"] == len(frames) - 1 and state["done"] is True


async def test_capacity_reached_then_close_and_the_slot_comes_back(make_server: Any) -> None:
    url = make_server(max_concurrent_envs=2)
    first, second = await open_ws(url), await open_ws(url)
    refused = await open_ws(url)  # the upgrade is accepted; the refusal comes as a frame
    async with asyncio.timeout(5):
        reply = json.loads(await refused.recv())
    assert reply == {
        "type": "error",
        "data": {
            "message": "Server at capacity: 2/2 sessions active. Cannot accept new connections.",
            "code": "CAPACITY_REACHED",
            "active_sessions": 2,
            "max_sessions": 2,
        },
    }
    assert await closed_with(refused) == 1000
    await first.close()
    async with await open_ws(url) as third:
        assert (await ask(third, {"type": "reset", "data": EPISODE}))["type"] == "observation"
    await second.close()


async def test_idle_session_is_closed_and_its_slot_freed(make_server: Any) -> None:
    clock = ManualClock()
    url = make_server(clock=clock, max_concurrent_envs=1, session_idle_timeout_s=0.2)
    ws = await open_ws(url)
    await ask(ws, {"type": "reset", "data": EPISODE})
    assert health(url)["active_sessions"] == 1
    clock.advance(0.3)
    assert await closed_with(ws) == 1001
    assert "idle" in ws.close_reason
    assert health(url)["active_sessions"] == 0
    async with await open_ws(url) as again:  # capacity 1: only possible if the slot was freed
        assert (await ask(again, {"type": "reset", "data": EPISODE}))["type"] == "observation"


async def test_an_active_session_is_not_reaped(make_server: Any) -> None:
    clock = ManualClock()
    url = make_server(clock=clock, session_idle_timeout_s=0.2)
    async with await open_ws(url) as ws:
        await ask(ws, {"type": "reset", "data": EPISODE})
        for _ in range(12):  # 1.2 s in all, far past the idle deadline, never 0.2 s without a frame
            clock.advance(0.1)
            assert (await ask(ws, {"type": "state"}))["type"] == "state"


async def test_a_session_reaped_while_it_answers_a_frame_sends_its_reply_before_closing(make_server: Any) -> None:
    clock = ManualClock()
    holding = asyncio.Event()

    def wrap(app: ASGIApp) -> ASGIApp:
        async def held(scope: Scope, receive: Receive, send: Send) -> None:
            async def send_late(message: Message) -> None:
                if message["type"] == "websocket.send" and holding.is_set():
                    # The reply is on its way when the session goes idle past its deadline: the reaper
                    # (every 50 ms here) stops it meanwhile.
                    clock.advance(0.3)
                    await asyncio.sleep(0.3)
                await send(message)

            await app(scope, receive, send_late)

        return held

    url = make_server(clock=clock, session_idle_timeout_s=0.2, wrap=wrap)
    ws = await open_ws(url)
    await ask(ws, {"type": "reset", "data": EPISODE})
    holding.set()
    reply = await ask(ws, {"type": "step", "data": {"action": "inspect_logs", "target": "api"}})
    assert reply["type"] == "observation" and reply["data"]["observation"]["step_count"] == 1
    assert await closed_with(ws) == 1001
    assert "idle" in ws.close_reason


def test_a_peer_that_stops_answering_pings_is_dropped(make_server: Any) -> None:
    """Half-open sockets (a dead peer, a dropped tunnel) must not hold slots: keepalive catches them."""
    url = make_server(max_concurrent_envs=1, ws_ping_interval_s=0.3, ws_ping_timeout_s=0.3)
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        key = base64.b64encode(os.urandom(16)).decode()
        raw.sendall(
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        assert raw.recv(1024).startswith(b"HTTP/1.1 101")
        assert health(url)["active_sessions"] == 1
        # Never answer the pings: the server must give up and close the connection.
        received = b""
        while chunk := raw.recv(4096):
            received += chunk
        assert b"keepalive ping timeout" in received
    assert health(url)["active_sessions"] == 0


async def test_mcp_message_lists_and_calls_tools_on_this_session(server_url: str) -> None:
    async with await open_ws(server_url) as ws:
        await ask(ws, {"type": "reset", "data": EPISODE})
        tools = await ask(ws, {"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list", "id": 7}})
        assert tools["type"] == "mcp" and tools["data"]["id"] == 7
        assert [t["name"] for t in tools["data"]["result"]["tools"]] == list(ACTION_NAMES)
        call = {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "id": "c1",
            "params": {"name": "inspect_metrics", "arguments": {"target": "db"}},
        }
        result = (await ask(ws, {"type": "mcp", "data": call}))["data"]["result"]
        assert result["structuredContent"]["observation"]["step_count"] == 1
        assert (await ask(ws, {"type": "state"}))["data"]["step_count"] == 1


async def test_views_keep_their_minute_and_an_unknown_endpoint_is_refused_losing_nothing(server_url: str) -> None:
    async with await open_ws(server_url) as ws:
        reset = (await ask(ws, {"type": "reset", "data": {"task_id": "gen_medium", "seed": 5}}))["data"]["observation"]
        entry = next(card["name"] for card in reset["topology"] if card["user_facing"])
        traced = await ask(ws, {"type": "step", "data": {"action": "inspect_traces", "target": entry}})
        bad = {"action": "inspect_traces", "target": entry, "endpoint": "GET /no/such/route", "errors_only": True}
        refused = await ask(ws, {"type": "step", "data": bad})
        logged = await ask(ws, {"type": "step", "data": {"action": "inspect_logs", "target": entry}})
    shown = next(iter(reset["visible_logs"]))
    traced, refused, logged = (frame["data"]["observation"] for frame in (traced, refused, logged))
    minutes = [obs["clock"][11:16] for obs in (reset, traced, refused, logged)]
    assert len(set(minutes)) == 4
    # Each view keeps the minute it was taken: the one from reset and the traces no longer read as current.
    assert logged["as_of"] == {"logs": {shown: minutes[0], entry: minutes[3]}, "traces": {entry: minutes[1]}}
    assert refused["last_action_error"].startswith(
        f"unknown endpoint 'GET /no/such/route' of {entry}; its endpoints are: "
    )
    assert refused["visible_traces"] == traced["visible_traces"] and refused["as_of"] == traced["as_of"]
    assert logged["last_action_error"] is None and logged["visible_traces"] == traced["visible_traces"]
