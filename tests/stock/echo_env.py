"""A stock OpenEnv server: an echo environment (each step echoes its message back, rewarded by its
length, and "bye" ends the episode) built with OpenEnv's own `create_app`, the baseline of
docs/transport-benchmarks.md. It runs in the stock venv (only `openenv` is importable there), for
the interop tests and the transport benchmark alike: `uvicorn echo_env:app` with this folder as the
working directory. Two more messages make the environment fail ("boom") or answer late ("slow").
"""

import os
import time
from typing import Any, Optional
from uuid import uuid4

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

SLOW_S = 0.5


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

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, **kw: Any):  # noqa: UP045
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return EchoObservation(echoed_message="ready", reward=0.0, metadata={"seed": seed})

    def step(self, action: EchoAction, timeout_s=None, **kw):
        if action.message == "boom":
            raise ValueError("env exploded on purpose")
        if action.message == "slow":
            time.sleep(SLOW_S)
        self._state.step_count += 1
        n = len(action.message)
        return EchoObservation(
            echoed_message=action.message,
            message_length=n,
            reward=min(n * 0.1, 1.0),
            done=action.message == "bye",
            metadata={"step": self._state.step_count},
        )

    @property
    def state(self):
        return self._state


app = create_app(
    EchoEnvironment,
    EchoAction,
    EchoObservation,
    env_name="echo_env",
    max_concurrent_envs=int(os.getenv("MAX_CONCURRENT_ENVS", "2")),
)
