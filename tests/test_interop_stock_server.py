"""Our client plays a stock OpenEnv server: a small environment built with openenv's `create_app`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from msgspec import Struct
from serving import STOCK_DIR, process_on_socket

from service_incident.client import CapacityReached, Desynchronised, EnvClient, ServerError


class EchoAction(Struct):
    message: str


class EchoObservation(Struct):
    echoed_message: str = ""
    message_length: int = 0
    metadata: dict[str, Any] = {}


class EchoState(Struct):
    episode_id: str | None = None
    step_count: int = 0


class EchoEnv(EnvClient[EchoAction, EchoObservation, EchoState]):
    pass


@pytest.fixture(scope="module")
def stock_server(openenv_python: Path) -> Iterator[str]:
    """tests/stock/echo_env.py served by the stock package, two sessions at most."""
    command = [str(openenv_python), str(STOCK_DIR / "serve.py"), "{fd}", "echo_env:app"]
    with process_on_socket(command, cwd=STOCK_DIR, env={"MAX_CONCURRENT_ENVS": "2"}) as (url, _):
        yield url


async def test_our_client_plays_a_full_episode_on_a_stock_server(stock_server: str) -> None:
    async with EchoEnv(stock_server) as env:
        reset = await env.reset(seed=42, episode_id="ep-demo")
        assert reset.observation.echoed_message == "ready" and reset.reward == 0.0 and not reset.done
        hello = await env.step(EchoAction("hello"))
        assert (hello.observation.echoed_message, hello.observation.message_length, hello.reward) == ("hello", 5, 0.5)
        assert hello.metadata == {"step": 1} == hello.observation.metadata
        state = await env.state()
        assert (state.episode_id, state.step_count) == ("ep-demo", 1)

        with pytest.raises(ServerError) as invalid:
            await env.step(EchoAction(""))  # violates min_length=1
        assert invalid.value.code == "VALIDATION_ERROR"
        with pytest.raises(ServerError) as failed:
            await env.step(EchoAction("boom"))
        assert failed.value.code == "EXECUTION_ERROR" and "exploded" in failed.value.message

        bye = await env.step(EchoAction("bye"))
        assert bye.done and bye.observation.echoed_message == "bye"
        assert (await env.state()).step_count == 2


async def test_our_client_does_not_desync_on_a_stock_server(stock_server: str) -> None:
    async with EchoEnv(stock_server, message_timeout_s=0.1) as env:
        await env.reset(episode_id="slowpoke")
        with pytest.raises(TimeoutError):
            await env.step(EchoAction("slow"))
        env.message_timeout_s = 5
        # The stock client would take the late observation for the state's reply here. Ours never
        # does: with the reply still owed, it refuses at once, typed, and a reset starts in step.
        with pytest.raises(Desynchronised):
            await env.state()
        await env.reset(episode_id="again")
        state = await env.state()
        assert (state.episode_id, state.step_count) == ("again", 0)
        assert (await env.step(EchoAction("hi"))).observation.echoed_message == "hi"
    # The stock server frees the abandoned session only once its blocking slow step (echo_env.SLOW_S,
    # half a second) has returned.
    await asyncio.sleep(1.0)


async def test_capacity_on_a_stock_server_is_capacity_reached(stock_server: str) -> None:
    async with EchoEnv(stock_server) as first, EchoEnv(stock_server) as second:
        await first.reset()
        await second.reset()
        async with EchoEnv(stock_server) as third:
            with pytest.raises(CapacityReached) as caught:
                await third.reset()
            assert caught.value.data["max_sessions"] == 2
