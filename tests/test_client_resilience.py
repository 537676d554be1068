"""The client against servers that are full, frozen, gone or never there: it raises its own typed
errors, never wedges, and a server it launched never outlives it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serving import eventually

from service_incident.client import (
    CapacityReached,
    ConnectionFailed,
    LocalServer,
    NoReply,
    ServiceIncidentEnv,
    SessionClosed,
)
from service_incident.models import InspectLogs

LOOK = InspectLogs(target="db")


async def test_capacity_reached_is_raised_on_every_attempt_until_a_slot_frees(make_server: Any) -> None:
    url = make_server(max_concurrent_envs=1)
    holder = ServiceIncidentEnv(url)
    await holder.reset()
    async with ServiceIncidentEnv(url) as refused:
        for _ in range(3):
            with pytest.raises(CapacityReached):
                await refused.reset()
        await holder.close()
        assert (await refused.reset(seed=1)).observation.step_count == 0


@pytest.fixture(scope="module")
def own_process() -> Iterator[LocalServer]:
    with LocalServer() as server:
        yield server


@pytest.fixture
def frozen(own_process: LocalServer) -> Iterator[tuple[str, Any]]:
    """A real server in its own process, and a way to freeze it (SIGSTOP) or thaw it (SIGCONT);
    thawed again after the test."""
    process = own_process.process
    assert process is not None

    def freeze(on: bool) -> None:
        process.send_signal(signal.SIGSTOP if on else signal.SIGCONT)

    try:
        yield own_process.base_url, freeze
    finally:
        freeze(False)


async def test_a_reply_that_never_comes_does_not_wedge_later_calls(frozen: tuple[str, Any]) -> None:
    url, freeze = frozen
    async with ServiceIncidentEnv(url, message_timeout_s=0.3, ping_interval_s=None) as env:
        await env.reset(seed=1)
        freeze(True)
        with pytest.raises(NoReply):
            await env.step(LOOK)  # maybe only slow: the session is kept, its late reply will be skipped
        with pytest.raises(NoReply):
            await env.step(LOOK)  # not even the first reply came in a whole timeout: given up
        with pytest.raises(SessionClosed):
            await env.state()  # at once, rather than one more timeout behind replies that never come
        freeze(False)
        result = await env.reset(seed=2)  # a new session; the frozen one's late replies are never read
        assert result.observation.step_count == 0
        assert (await env.step(LOOK)).observation.step_count == 1


async def test_a_frozen_server_is_noticed_within_the_ping_timeout(frozen: tuple[str, Any]) -> None:
    url, freeze = frozen
    # The message timeout is far longer than pings need to notice, and far shorter than the 10 s a
    # close handshake would wait for a peer that answers nothing.
    async with ServiceIncidentEnv(url, message_timeout_s=5, ping_interval_s=0.2, ping_timeout_s=0.2) as env:
        await env.reset(seed=1)
        freeze(True)
        with pytest.raises(SessionClosed) as caught:
            await env.step(LOOK)
        assert caught.value.code == 1011 and "ping" in caught.value.reason


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return probe.getsockname()[1]


async def test_connection_failures_are_the_clients_own_errors_with_the_url(make_server: Any) -> None:
    port = free_port()  # nothing listens there any more
    with pytest.raises(ConnectionFailed, match=f"ws://127.0.0.1:{port}/ws") as refused:
        await ServiceIncidentEnv(f"http://127.0.0.1:{port}").reset()
    assert isinstance(refused.value, ConnectionError)
    mute = socket.create_server(("127.0.0.1", 0))  # accepts (the kernel does) and never answers
    with mute, pytest.raises(ConnectionFailed, match="no handshake within"):
        await ServiceIncidentEnv(f"http://127.0.0.1:{mute.getsockname()[1]}", connect_timeout_s=0.2).reset()
    url = make_server()
    with pytest.raises(ConnectionFailed, match="HTTP 403"):
        await ServiceIncidentEnv(url, headers={"Origin": "https://elsewhere.example"}).reset()


LAUNCHER = """
import sys, time
from service_incident.client import ServiceIncidentEnv
env = ServiceIncidentEnv.launch()
print(env._server.process.pid, flush=True)
if sys.argv[1] == "wait":
    time.sleep(600)
"""


def gone(pid: int) -> bool:
    """The process has exited (reaped, or a zombie waiting for a reaper that never comes)."""
    status = Path(f"/proc/{pid}/status")
    try:
        return "zombie" in status.read_text().split("State:", 1)[1].splitlines()[0]
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("ending", ["sigkill", "sigterm", "return without close"])
def test_a_launched_server_exits_with_its_parent(ending: str) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, "return" if ending.startswith("return") else "wait"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert not gone(child)
        if ending == "sigkill":
            parent.kill()
        elif ending == "sigterm":
            parent.terminate()
        parent.wait(timeout=30)
        eventually(lambda: gone(child), f"the server outlived its parent ({ending})")
    finally:
        if not gone(child):
            os.kill(child, signal.SIGKILL)
