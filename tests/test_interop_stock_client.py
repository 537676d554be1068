"""The stock OpenEnv client (package `openenv`, in its own venv) plays our server over real sockets."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from service_incident.models import ACTION_NAMES

# Runs in the stock venv: only `openenv` and the standard library are importable there.
STOCK_CLIENT = r"""
import asyncio, json, sys
from typing import Optional
from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server.types import Action, Observation, State
from openenv.core.generic_client import GenericEnvClient

url = sys.argv[1]
out = {}

# 1. GenericEnvClient, blocking: a whole episode.
with GenericEnvClient(base_url=url) as env:
    first = env.reset(task_id="easy", seed=11, episode_id="stock-ep")
    services = first.observation["services"]
    results = [first]
    for action in [{"action": "inspect_logs", "target": s} for s in services[1:]] + [
            {"action": "declare", "target": services[0], "severity": "P0"}]:
        results.append(env.step(action))
        if results[-1].done:
            break
    out["episode"] = [{"observation": r.observation, "reward": r.reward, "done": r.done,
                       "metadata": r.metadata} for r in results]
    out["state"] = env.state()
    try:
        env.step({"action": "reboot", "target": "db"})
    except RuntimeError as exc:
        out["bad_action"] = str(exc)
    out["after_error"] = env.state()

# 2. A typed EnvClient subclass with pydantic models, async, as OpenEnv templates write them.
class SIAction(Action):
    action: str
    target: str
    severity: Optional[str] = None

class SIObservation(Observation):
    services: list = []
    step_count: int = 0
    message: str = ""
    score: Optional[float] = None

class SIEnv(EnvClient[SIAction, SIObservation, State]):
    def _step_payload(self, action):
        return action.model_dump(exclude_none=True)
    def _parse_result(self, payload):
        o = payload["observation"]
        obs = SIObservation(services=o["services"], step_count=o["step_count"], message=o["message"],
                            score=o["score"], reward=payload.get("reward"), done=payload.get("done", False),
                            metadata=payload.get("metadata") or {})
        return StepResult(observation=obs, reward=payload.get("reward"), done=payload.get("done", False),
                          metadata=payload.get("metadata"))
    def _parse_state(self, payload):
        return State(**payload)

async def typed():
    async with SIEnv(base_url=url) as env:
        r = await env.reset(task_id="hard", seed=3)
        steps = 0
        while not r.done:
            r = await env.step(SIAction(action="inspect_metrics", target=r.observation.services[steps % 3]))
            steps += 1
        state = await env.state()
        return {"steps": steps, "done": r.done, "score": r.observation.score,
                "state": state.model_dump(), "metadata": r.metadata}

out["typed"] = asyncio.run(typed())
print(json.dumps(out))
"""


def run_stock(openenv_python: Path, script: str, *args: str, timeout: float = 60) -> Any:
    completed = subprocess.run(
        [str(openenv_python), "-c", script, *args], capture_output=True, text=True, timeout=timeout
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_stock_client_plays_a_full_episode_on_our_server(openenv_python: Path, server_url: str) -> None:
    out = run_stock(openenv_python, STOCK_CLIENT, server_url)

    episode = out["episode"]
    assert episode[0]["observation"]["task_id"] == "easy" and episode[0]["reward"] == 0.0
    assert episode[-1]["done"] is True
    assert episode[-1]["observation"]["score"] is not None  # score and breakdown reach stock clients
    assert episode[-1]["observation"]["breakdown"]
    assert all(step["metadata"]["episode_id"] == "stock-ep" for step in episode)  # 0.10.0 top-level metadata
    assert out["state"]["episode_id"] == "stock-ep" and out["state"]["step_count"] == len(episode) - 1
    assert "(code: VALIDATION_ERROR)" in out["bad_action"]
    assert ", ".join(ACTION_NAMES) in out["bad_action"]  # the error says what would have been valid
    assert out["after_error"] == out["state"]  # the bad frame cost nothing

    typed = out["typed"]
    assert typed["done"] is True and typed["score"] is not None and typed["steps"] >= 1
    assert typed["state"]["step_count"] == typed["steps"] and typed["state"]["done"] is True
