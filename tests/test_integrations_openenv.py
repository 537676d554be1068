"""OpenEnv's own discovery finds the installed package: `AutoEnv.from_env` and `AutoAction.from_env`
(stock `openenv`, in its own venv), by the distribution name and the manifest packaged with the module."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Runs in the stock venv, where this package is installed beside `openenv`.
DISCOVERY = r"""
import asyncio, json, sys
from openenv import AutoAction, AutoEnv

url = sys.argv[1]
Action = AutoAction.from_env("service_incident")
env = AutoEnv.from_env("service_incident", base_url=url)

async def play():
    async with env:
        first = await env.reset(task_id="easy", seed=11)
        target = first.observation.services[0]
        look = await env.step(Action(action="inspect_logs", target=target))
        end = await env.step(Action(action="declare", target=target, severity="P1"))
        return {"look": look.observation.step_count, "done": end.done, "score": end.observation.score}

out = {"client": type(env).__module__ + "." + type(env).__name__, "action": Action.__name__}
out.update(asyncio.run(play()))
print(json.dumps(out))
"""


def test_the_distribution_carries_the_manifest_openenv_reads() -> None:
    assert importlib.metadata.distribution("openenv-service-incident").metadata["Name"].startswith("openenv-")
    packaged = importlib.resources.files("service_incident") / "openenv.yaml"
    # One manifest: the repository root's is the packaged one (`openenv push` and `validate` read the root).
    assert packaged.read_text() == (ROOT / "openenv.yaml").read_text()
    assert "\nname: service_incident\n" in packaged.read_text()


def test_stock_autoenv_and_autoaction_find_and_play_the_installed_environment(
    openenv_python: Path, server_url: str, tmp_path: Path
) -> None:
    # A private discovery cache: OpenEnv caches what it found under the user's cache folder.
    environ = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    done = subprocess.run(
        [str(openenv_python), "-c", DISCOVERY, server_url], capture_output=True, text=True, timeout=60, env=environ
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["client"] == "service_incident.client.ServiceIncidentEnv"
    assert out["action"] == "ServiceIncidentAction"
    assert out["look"] == 1 and out["done"] is True and 0 < out["score"] < 1
