"""Our client plays a stock OpenEnv server: a small environment built with openenv's `create_app`."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from msgspec import Struct

from service_incident.client import CapacityReached, EnvClient, ServerError

# The stock side (runs in the stock venv), after openenv-wire.md section 11, plus two messages that
# make the environment fail ("boom") or answer late ("slow").
ECHO_ENV = r'''
import os, time
from typing import Any, Optional
from uuid import uuid4
from pydantic import Field
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

class EchoAction(Action):
    message: str = Field(..., min_length=1)

class EchoObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0

class EchoEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    def __init__(self):
        super().__init__()
        self._state = State(episode_id=str(uuid4()))
    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kw: Any):
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return EchoObservation(echoed_message="ready", reward=0.0, metadata={"seed": seed})
    def step(self, action: EchoAction, timeout_s=None, **kw):
        if action.message == "boom":
            raise ValueError("env exploded on purpose")
        if action.message == "slow":
            time.sleep(0.5)
        self._state.step_count += 1
        n = len(action.message)
        return EchoObservation(echoed_message=action.message, message_length=n, reward=min(n * 0.1, 1.0),
                               done=action.message == "bye", metadata={"step": self._state.step_count})
    @property
    def state(self):
        return self._state

app = create_app(EchoEnvironment, EchoAction, EchoObservation, env_name="echo_env",
                 max_concurrent_envs=int(os.getenv("MAX_CONCURRENT_ENVS", "2")))
'''


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
def stock_server(openenv_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    app_dir = tmp_path_factory.mktemp("echo")
    (app_dir / "echo_env.py").write_text(ECHO_ENV)
    listener = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    # Not `uvicorn --fd`: it takes the descriptor for a Unix socket and leaves Nagle on.
    serve = "import socket, sys, uvicorn; uvicorn.Server(uvicorn.Config('echo_env:app', log_level='warning'))" \
            ".run(sockets=[socket.socket(fileno=int(sys.argv[1]))])"
    process = subprocess.Popen(
        [str(openenv_python), "-c", serve, str(listener.fileno())],
        cwd=app_dir,
        pass_fds=(listener.fileno(),),
        env={**os.environ, "MAX_CONCURRENT_ENVS": "2"},
    )
    listener.close()
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "stock server exited"
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "stock server did not start"
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


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
        state = await env.state()  # the stock client would get the late observation here
        assert (state.episode_id, state.step_count) == ("slowpoke", 1)
        assert (await env.step(EchoAction("hi"))).observation.echoed_message == "hi"


async def test_capacity_on_a_stock_server_is_capacity_reached(stock_server: str) -> None:
    async with EchoEnv(stock_server) as first, EchoEnv(stock_server) as second:
        await first.reset()
        await second.reset()
        async with EchoEnv(stock_server) as third:
            with pytest.raises(CapacityReached) as caught:
                await third.reset()
            assert caught.value.data["max_sessions"] == 2
