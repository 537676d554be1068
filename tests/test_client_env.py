"""The client SDK against our real server (and, for what the server cannot show, a scripted peer)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx
import pytest
from serving import ManualClock, eventually
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request

from service_incident.client import (
    CapacityReached,
    Desynchronised,
    EnvClient,
    NoReply,
    ServerError,
    ServiceIncidentEnv,
    StepResult,
)
from service_incident.client.base import ws_url
from service_incident.models import Declare, InspectLogs, InspectMetrics, Observation, State


async def play(env: ServiceIncidentEnv, **reset: Any) -> list[StepResult[Observation]]:
    results = [await env.reset(**reset)]
    services = results[0].observation.services
    for action in [
        InspectLogs(target=services[1]),
        InspectMetrics(target=services[2]),
        Declare(target=services[0], severity="P1"),
    ]:
        results.append(await env.step(action))
        if results[-1].done:
            break
    return results


async def test_a_typed_episode(server_url: str) -> None:
    async with ServiceIncidentEnv(server_url) as env:
        results = await play(env, task_id="medium", seed=5, episode_id="typed")
        state = await env.state()
    first, last = results[0].observation, results[-1]
    assert isinstance(first, Observation) and first.task_id == "medium"
    assert last.done and last.observation.done and last.observation.reward == last.reward
    assert last.observation.score is not None and last.observation.breakdown
    assert last.metadata == last.observation.metadata and last.metadata["episode_id"] == "typed"
    assert isinstance(state, State)
    assert (state.episode_id, state.step_count, state.seed, state.done) == ("typed", len(results) - 1, 5, True)


async def test_the_bare_client_works_with_dicts(server_url: str) -> None:
    async with EnvClient[Any, Any, Any](server_url) as env:
        reset = await env.reset(seed=1)
        step = await env.step({"action": "inspect_logs", "target": "db"})
        state = await env.state()
    assert isinstance(reset.observation, dict) and step.observation["step_count"] == 1
    assert state["step_count"] == 1


async def test_server_errors_raise_typed_exceptions_and_the_session_goes_on(server_url: str) -> None:
    async with ServiceIncidentEnv(server_url) as env:
        await env.reset(seed=2)
        with pytest.raises(ServerError) as caught:
            await env.reset(task_id="impossible")
        assert caught.value.code == "VALIDATION_ERROR"
        assert "(code: VALIDATION_ERROR)" in str(caught.value)  # the stock client's wording
        assert caught.value.data["errors"]
        with pytest.raises(ServerError, match="VALIDATION_ERROR"):
            await env.step({"action": "inspect_logs"})  # type: ignore[arg-type]
        assert (await env.step(InspectLogs(target="db"))).observation.step_count == 1


async def test_capacity_reached_is_its_own_exception(make_server: Any) -> None:
    url = make_server(max_concurrent_envs=1)
    async with ServiceIncidentEnv(url) as holder:
        await holder.reset()
        async with ServiceIncidentEnv(url) as refused:
            with pytest.raises(CapacityReached) as caught:
                await refused.reset()
            assert caught.value.data["max_sessions"] == 1


async def test_idle_close_is_reported_and_reset_reconnects(make_server: Any) -> None:
    clock = ManualClock()
    url = make_server(clock=clock, session_idle_timeout_s=0.2)
    async with ServiceIncidentEnv(url) as env:
        await env.reset(seed=4)
        clock.advance(0.3)
        await asyncio.to_thread(
            eventually, lambda: httpx.get(f"{url}/health").json()["active_sessions"] == 0, "the idle session reaped"
        )
        # Closed 1001: the client resumes its episode on a new session, where it left off.
        assert (await env.step(InspectLogs(target="db"))).observation.step_count == 1 and env.resumes == 1
        assert (await env.reset(seed=4)).observation.step_count == 0
        assert (await env.step(InspectLogs(target="db"))).observation.step_count == 1


async def test_a_timed_out_call_never_shifts_later_replies(server_url: str) -> None:
    async with ServiceIncidentEnv(server_url) as env:
        await env.reset(task_id="hard", seed=6, episode_id="desync")
        env.message_timeout_s = 0  # gives up before any reply can arrive
        with pytest.raises(NoReply):
            await env.step(InspectLogs(target="db"))
        env.message_timeout_s = 5
        try:  # its reply may have come by this call (it is dropped, the session goes on), or not
            state = await env.state()
        except Desynchronised:  # it had not: nothing more is sent
            # The server took the step all the same, and once the dropped session is over its log says so.
            health = f"{server_url}/health"
            await asyncio.to_thread(eventually, lambda: httpx.get(health).json()["active_sessions"] == 0, "gone")
            assert (await env.resume()).observation.step_count == 1
            state = await env.state()
        assert (state.episode_id, state.step_count) == ("desync", 1)  # the episode survived
        # An outer deadline cancels the call instead. Whether or not its frame left, nothing shifts:
        # the next call gets its own reply, or is refused as out of step until a reset.
        for deadline in (0, 1e-4, 1e-3, 1e-2):
            await env.reset(task_id="hard", seed=6)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(env.step(InspectMetrics(target="db")), deadline)
            try:
                state = await env.state()
            except Desynchronised:
                with pytest.raises(Desynchronised):
                    await env.step(InspectLogs(target="db"))
                continue
            result = await env.step(InspectLogs(target="db"))
            assert result.observation.step_count == state.step_count + 1


async def test_concurrent_calls_on_one_client_take_turns(server_url: str) -> None:
    async with ServiceIncidentEnv(server_url) as env:
        await env.reset(seed=8)
        results = await asyncio.gather(*(env.state() for _ in range(10)))
    assert all(isinstance(r, State) for r in results)


def test_the_blocking_facade(server_url: str) -> None:
    with ServiceIncidentEnv(server_url).sync() as env:
        first = env.reset(task_id="easy", seed=9)
        step = env.step(InspectLogs(target=first.observation.services[-1]))
        assert step.observation.step_count == 1
        assert env.state().step_count == 1
        assert env.resume().observation == step.observation  # a new session, the same episode
        assert env.client.resumes == 1 and env.state().step_count == 1


def test_launch_runs_a_private_server() -> None:
    env = ServiceIncidentEnv.launch({"max_concurrent_envs": 4})
    server = env._server
    assert server is not None and server.process is not None
    process = server.process
    with env.sync() as blocking:
        assert blocking.reset(seed=1).observation.step_count == 0
    assert process.poll() is not None  # closing the client stopped the server


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("http://h:8000", "ws://h:8000/ws"),
        ("https://x.hf.space/", "wss://x.hf.space/ws"),
        ("h:8000", "ws://h:8000/ws"),
        ("ws://h", "ws://h/ws"),
    ],
)
def test_base_url_to_websocket_url(base: str, expected: str) -> None:
    assert ws_url(base) == expected


async def test_headers_reach_the_server_and_frames_are_openenv_text() -> None:
    """A scripted peer records what the client sends: headers, frame kinds and bytes."""
    seen: dict[str, Any] = {"frames": []}

    def record(connection: ServerConnection, request: Request) -> None:
        seen["authorization"] = request.headers.get("Authorization")
        seen["extensions"] = request.headers.get("Sec-WebSocket-Extensions")

    async def peer(connection: ServerConnection) -> None:
        async for message in connection:
            seen["frames"].append(message)
            if json.loads(message)["type"] == "reset":
                await connection.send(
                    json.dumps(
                        {"type": "observation", "data": {"observation": {"message": "hi"}, "reward": 0, "done": False}}
                    )
                )

    async with serve(peer, "127.0.0.1", 0, process_request=record) as server:
        port = server.sockets[0].getsockname()[1]
        env = EnvClient[Any, Any, Any](
            f"http://127.0.0.1:{port}", headers={"Authorization": "Bearer t"}, ping_interval_s=None
        )
        async with env:
            assert (await env.reset(seed=1)).observation == {"message": "hi"}
        await asyncio.sleep(0.05)
    assert seen["authorization"] == "Bearer t"
    assert seen["extensions"] is None  # no per-message deflate unless asked for
    assert [json.loads(f) for f in seen["frames"]] == [{"type": "reset", "data": {"seed": 1}}, {"type": "close"}]
    assert all(isinstance(f, str) for f in seen["frames"])
