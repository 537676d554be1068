"""`AutoEnv.from_env("service_incident")` without a base_url: OpenEnv's provider route. Stock `openenv`
(its own venv) discovers the package and calls `ServiceIncidentEnv.from_docker_image` with the image
its naming convention gives, which starts it through the stock `LocalDockerProvider`. No Docker engine
runs here, so the `docker` command that provider runs is tests/stock/docker_cli.py, which serves the
image's `server` as a local process; everything else is the real thing, over real sockets.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from service_incident.client import LocalServer, ServiceIncidentEnv

ROOT = Path(__file__).resolve().parent.parent
DOCKER_CLI = ROOT / "tests" / "stock" / "docker_cli.py"

# Runs in the stock venv, where this package is installed beside `openenv`.
AUTOENV_WITHOUT_URL = r"""
import asyncio, json
from openenv import AutoAction, AutoEnv

Action = AutoAction.from_env("service_incident")
env = AutoEnv.from_env("service_incident")

async def play():
    async with env:
        first = await env.reset(task_id="easy", seed=11)
        target = first.observation.services[0]
        end = await env.step(Action(action="declare", target=target, severity="P1"))
        return {"done": end.done, "score": end.observation.score}

out = {"client": type(env).__name__, "base_url": env.base_url,
       "image": AutoEnv.get_env_info("service_incident")["default_image"]}
out.update(asyncio.run(play()))
print(json.dumps(out))
"""


def documented_image() -> str:
    text = (ROOT / "docs" / "integrations.md").read_text()
    match = re.search(r"docker build -t ([\w.-]+) \.", text)
    assert match, "docs/integrations.md says which image to build"
    return f"{match.group(1)}:latest"


def docker_calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def docker_on_path(openenv_python: Path, tmp_path: Path) -> Any:
    """PATH with a `docker` that runs docker_cli.py; yields (environment, log). Any server it left
    running is stopped afterwards."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(f'#!/bin/sh\nexec "{openenv_python}" "{DOCKER_CLI}" "$@"\n')
    docker.chmod(0o755)
    log = tmp_path / "docker" / "calls.jsonl"
    log.parent.mkdir()
    environ = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "DOCKER_CLI_LOG": str(log),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),  # OpenEnv's discovery cache, private to the test
    }
    yield environ, log
    for pid_file in log.parent.glob("*.pid"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_autoenv_without_a_url_starts_the_documented_image_through_local_docker_provider(
    openenv_python: Path, docker_on_path: tuple[dict[str, str], Path]
) -> None:
    environ, log = docker_on_path
    done = subprocess.run(
        [str(openenv_python), "-c", AUTOENV_WITHOUT_URL], capture_output=True, text=True, timeout=120, env=environ
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["client"] == "ServiceIncidentEnv"
    assert out["image"] == documented_image()
    assert out["done"] is True and 0 < out["score"] < 1
    calls = docker_calls(log)
    runs = [call for call in calls if call[0] == "run"]
    assert len(runs) == 1 and runs[0][-1] == documented_image()
    port = runs[0][runs[0].index("-p") + 1].split(":")[0]
    assert out["base_url"] == f"http://localhost:{port}"
    # Closing the client stopped the container and removed it.
    container = [call[1] for call in calls if call[0] == "stop"]
    assert [call[0] for call in calls[-2:]] == ["stop", "rm"] and len(container) == 1
    assert not list(log.parent.glob("*.pid"))


class ServerProvider:
    """A container provider of the caller's own (any object with OpenEnv's three methods will do):
    here a local server process stands for the container."""

    def __init__(self, ready: bool = True) -> None:
        self.ready = ready
        self.started: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.stops = 0
        self.server: LocalServer | None = None

    def start_container(self, image: str, *, env_vars: dict[str, str] | None = None, **options: Any) -> str:
        self.started.append((image, dict(env_vars or {}), options))
        self.server = LocalServer()
        return self.server.start()

    def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None:
        if not self.ready:
            raise TimeoutError(f"Container at {base_url} did not become ready within {timeout_s}s")

    def stop_container(self) -> None:
        self.stops += 1
        if self.server is not None:
            self.server.stop()


async def test_from_docker_image_plays_through_a_given_provider_and_stops_it_on_close() -> None:
    provider = ServerProvider()
    env = await ServiceIncidentEnv.from_docker_image("si:test", provider, env_vars={"A": "1"}, port=9)
    assert provider.started == [("si:test", {"A": "1"}, {"port": 9})]
    async with env:
        result = await env.reset(task_id="easy", seed=3)
        assert result.observation.step_count == 0
        assert provider.stops == 0
    assert provider.stops == 1


async def test_a_container_that_never_gets_ready_is_stopped() -> None:
    provider = ServerProvider(ready=False)
    with pytest.raises(TimeoutError, match=r"did not become ready within 0\.5s"):
        await ServiceIncidentEnv.from_docker_image("si:test", provider, wait_timeout=0.5)
    assert provider.stops == 1


async def test_without_openenv_or_a_provider_the_error_says_what_to_install() -> None:
    if importlib.util.find_spec("openenv") is not None:
        pytest.skip("openenv is installed here: its LocalDockerProvider would be used")
    with pytest.raises(ImportError, match=r"pip install openenv"):
        await ServiceIncidentEnv.from_docker_image("si:test")
