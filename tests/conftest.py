"""Shared fixtures: our real server on a free 127.0.0.1 port, served by uvicorn in a background thread.

The tests talk to it over real sockets. `make_server(**settings)` starts one with chosen settings
(capacity, timeouts, limits, `clock=`, a ManualClock for the idle deadlines, and `wrap=`); `server_url` is a
default one shared by a test module. The session's fixtures do costly work once for every test that
reads it: `reference_ladder` (the reference agents' evaluation), `run_snippet` (a block of the docs run
as written), `browser` (a Chromium) and `server_beside_stock_openenv`.
"""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
from browser_support import chromium
from install_support import environment
from serving import serving
from starlette.types import ASGIApp

from service_incident.client import LocalServer
from service_incident.harness.agents import REFERENCE_AGENTS
from service_incident.harness.evaluation import evaluate, plan, reference_policy
from service_incident.harness.records import EpisodeRecord
from service_incident.server.app import create_app
from service_incident.server.sessions import Clock
from service_incident.server.settings import Settings
from service_incident.tasks import TASKS

ROOT = Path(__file__).resolve().parent.parent
OPENENV_PYTHON = Path(os.environ.get("OPENENV_PYTHON", ROOT / ".venv" / "openenv" / "bin" / "python"))


@contextmanager
def running_server(
    clock: Clock = time.monotonic, wrap: Callable[[ASGIApp], ASGIApp] = lambda app: app, **settings: Any
) -> Iterator[str]:
    """Serve the app with these settings (environment variables ignored), idle deadlines timed by
    `clock` and the app wrapped by `wrap` (a test's recording middleware); yields the base URL."""
    config = Settings.load(environ={}, log_level="warning", **settings)
    options = config.uvicorn_options()
    del options["host"], options["port"], options["workers"]
    with serving(wrap(create_app(config, clock)), **options) as url:
        yield url


@pytest.fixture
def make_server() -> Iterator[Callable[..., str]]:
    with ExitStack() as stack:
        yield lambda **settings: stack.enter_context(running_server(**settings))


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with running_server() as url:
        yield url


@pytest.fixture(scope="session")
def openenv_python() -> Path:
    """The interpreter of the separate venv holding the stock `openenv` package (`make test` builds it)."""
    if not OPENENV_PYTHON.exists():
        message = f"stock OpenEnv venv missing at {OPENENV_PYTHON}: run `make test` (or set OPENENV_PYTHON)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return OPENENV_PYTHON


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One Chromium for every page test of the run: starting one takes longer than most of them."""
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="session")
def server_beside_stock_openenv(openenv_python: Path) -> Iterator[str]:
    """Our server run by the stock OpenEnv venv, where it is installed without the `mcp` extra (that
    venv holds OpenEnv's SDK 1.x); yields its base URL."""
    with LocalServer(python=str(openenv_python)) as server:
        yield server.base_url


@pytest.fixture(scope="session")
def reference_ladder() -> dict[str, list[EpisodeRecord]]:
    """Each reference agent, weakest first, over the whole evaluation set through the WebSocket
    server, as `python inference.py --agent random,symptom_chaser,structured,expert` plays it."""

    async def ladder(url: str) -> dict[str, list[EpisodeRecord]]:
        specs = plan(TASKS.values())
        return {
            name: await evaluate(reference_policy(name), specs, agent=name, base_url=url) for name in REFERENCE_AGENTS
        }

    with running_server() as url:
        return asyncio.run(ladder(url))


@pytest.fixture(scope="session")
def run_snippet(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], subprocess.CompletedProcess[str]]:
    """Runs a ```python block of the docs as written, in a fresh interpreter, from an empty folder so
    that whatever it writes (results/) stays out of the repository; each block once."""

    @functools.cache
    def run(code: str) -> subprocess.CompletedProcess[str]:
        folder = tmp_path_factory.mktemp("snippet")
        script = folder / "snippet.py"
        script.write_text(code)
        return subprocess.run(
            [sys.executable, str(script)],
            cwd=folder,
            env=environment(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    return run
