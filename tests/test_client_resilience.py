"""The client against servers that are full, frozen, gone, never there or losing replies: it raises
its own typed errors, never wedges, and a server it launched never outlives it. An evaluation
resumes an episode whose reply came too late rather than failing it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from scale_support import disturbing, trace
from serving import eventually
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from service_incident.client import (
    CapacityReached,
    ConnectionFailed,
    Desynchronised,
    EnvClient,
    LocalServer,
    NoReply,
    ServerBusy,
    ServiceIncidentEnv,
    SessionClosed,
)
from service_incident.harness.evaluation import evaluate, reference_policy
from service_incident.harness.records import EpisodeSpec
from service_incident.harness.session import InProcess, WebSocket
from service_incident.models import InspectLogs

LOOK = InspectLogs(target="db")
# A call that fails fast takes a small share of FAST; one that waits for a reply that never comes waits a
# message timeout of LOST, three times as long. The margin between them absorbs a loaded machine's
# stalls (a process of the whole suite was once seen off its core for half a second).
FAST = 1.0
LOST = 3 * FAST


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


async def fails_fast(call: Callable[[], Awaitable[object]]) -> Desynchronised:
    """The call raises `Desynchronised`, saying how to recover, in far less than any message timeout."""
    recovery = r"out of step .*reset\(\) starts a new episode, resume\(\) continues this one"
    started = time.monotonic()
    with pytest.raises(Desynchronised, match=recovery) as caught:
        await call()
    assert time.monotonic() - started < FAST
    return caught.value


async def test_after_a_reply_that_never_comes_every_call_fails_fast(frozen: tuple[str, Any]) -> None:
    url, freeze = frozen
    async with ServiceIncidentEnv(url, message_timeout_s=LOST, ping_interval_s=None) as env:
        await env.reset(seed=1)
        freeze(True)
        with pytest.raises(NoReply):
            await env.step(LOOK)  # maybe only slow: a late reply that has come by the next call is skipped
        # It has not come: the session is out of step, and no call waits another timeout behind it.
        lost = await fails_fast(lambda: env.step(LOOK))
        assert isinstance(lost, SessionClosed) and "step frame has not come" in str(lost)
        await fails_fast(env.state)
        await fails_fast(lambda: env.step(LOOK))
        freeze(False)
        result = await env.reset(seed=2)  # a new session; the frozen one's late reply is never read
        assert result.observation.step_count == 0
        assert (await env.step(LOOK)).observation.step_count == 1


async def test_resume_carries_the_episode_on_once_the_server_answers_again(frozen: tuple[str, Any]) -> None:
    url, freeze = frozen
    async with ServiceIncidentEnv(url, message_timeout_s=LOST, connect_timeout_s=0.5, ping_interval_s=None) as env:
        await env.reset(seed=3)
        await env.step(LOOK)
        freeze(True)
        with pytest.raises(NoReply):
            await env.step(LOOK)
        await fails_fast(lambda: env.step(LOOK))
        with pytest.raises(ConnectionFailed, match="no handshake within"):
            await env.resume()  # still frozen: a resume is only as patient as the connect timeout
        await fails_fast(env.state)  # and the session is still out of step
        freeze(False)
        # The frozen session's end: whatever it does with the step it held is in the log by then.
        health = f"{url}/health"
        await asyncio.to_thread(eventually, lambda: httpx.get(health).json()["active_sessions"] == 0, "session gone")
        result = await env.resume()
        taken = result.observation.step_count  # 2 if the server took the step whose reply was lost
        assert taken in (1, 2) and env.resumes == 1  # the attempt that found no handshake is not one
        assert (await env.step(LOOK)).observation.step_count == taken + 1
        assert (await env.state()).step_count == taken + 1


class LossyServer:
    """A real WebSocket server on loopback that speaks OpenEnv's frames, never answers the steps
    numbered in `lose`, and answers those in `late` that many seconds late."""

    def __init__(self, lose: frozenset[int] = frozenset(), late: dict[int, float] | None = None) -> None:
        self.lose, self.late = lose, late or {}
        self.received: list[dict[str, Any]] = []
        self.connections = 0
        self.late_sent = asyncio.Event()

    @staticmethod
    def result(steps: int) -> dict[str, Any]:
        return {"observation": {"steps": steps}, "reward": 0.0, "done": False, "episode_id": "e1"}

    async def session(self, ws: ServerConnection) -> None:
        self.connections += 1
        with contextlib.suppress(ConnectionClosed):  # the client dropped a session out of step
            await self.answer(ws)

    async def answer(self, ws: ServerConnection) -> None:
        steps = 0
        async for raw in ws:
            message = json.loads(raw)
            self.received.append(message)
            match message["type"]:
                case "reset":
                    steps = 0
                    reply: dict[str, Any] = {"type": "observation", "data": self.result(steps)}
                case "step":
                    steps += 1
                    reply = {"type": "observation", "data": self.result(steps)}
                case "resume":
                    steps = message["data"]["steps"]
                    reply = {"type": "resumed", "data": {"steps": steps, "result": self.result(steps)}}
                case _:
                    reply = {"type": "state", "data": {"steps": steps}}
            if message["type"] == "step" and steps in self.lose:
                continue
            if message["type"] == "step" and steps in self.late:
                await asyncio.sleep(self.late[steps])  # holds this session's next frames back too, in order
                await ws.send(json.dumps(reply))
                self.late_sent.set()
                continue
            await ws.send(json.dumps(reply))

    @asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        async with serve(self.session, "127.0.0.1", 0) as server:
            host, port = next(iter(server.sockets)).getsockname()[:2]
            yield f"http://{host}:{port}"

    def sent(self) -> list[str]:
        return [message["type"] for message in self.received]


async def test_a_lost_reply_fails_every_later_call_at_once_without_sending_it() -> None:
    server = LossyServer(lose=frozenset({2}))
    async with server.running() as url, EnvClient[Any, Any, Any](url, message_timeout_s=LOST) as env:
        await env.reset()
        await env.step({"n": 1})
        with pytest.raises(NoReply):
            await env.step({"n": 2})
        for call in (lambda: env.step({"n": 3}), env.state, lambda: env.step({"n": 3})):
            await fails_fast(call)
        assert server.sent() == ["reset", "step", "step"]  # nothing was sent on a session out of step
        # A reset resynchronises: a new session, at once, with nothing of the old one's to read.
        started = time.monotonic()
        assert (await env.reset()).observation == {"steps": 0}
        assert time.monotonic() - started < FAST and server.connections == 2
        assert (await env.step({"n": 1})).observation == {"steps": 1}
        assert await env.state() == {"steps": 1}


async def test_a_late_reply_that_came_by_the_next_call_is_skipped_and_its_step_counted() -> None:
    server = LossyServer(late={2: 0.3})
    async with server.running() as url, EnvClient[Any, Any, Any](url, message_timeout_s=0.1) as env:
        await env.reset()
        await env.step({"n": 1})
        with pytest.raises(NoReply):
            await env.step({"n": 2})
        await server.late_sent.wait()
        await asyncio.sleep(0.05)  # for the loop to read it off the socket
        assert await env.state() == {"steps": 2}  # this call's own reply, the late observation skipped
        assert server.connections == 1  # the session went on
        # The server took the step whose reply came late: a resume counts it.
        assert (await env.resume()).observation == {"steps": 2}
        assert server.received[-1] == {"type": "resume", "data": {"episode_id": "e1", "steps": 2}}


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
        # Never resumed on its own (a frozen server would not answer the handshake either), but the
        # episode is in the log: once the server answers again, resume() continues it.
        freeze(False)
        health = f"{url}/health"
        await asyncio.to_thread(eventually, lambda: httpx.get(health).json()["active_sessions"] == 0, "session gone")
        taken = (await env.resume()).observation.step_count  # 1 if the server took the step in flight
        assert taken in (0, 1)
        assert (await env.step(LOOK)).observation.step_count == taken + 1


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


async def test_an_address_over_its_connection_share_gets_server_busy_with_the_servers_words(make_server: Any) -> None:
    url = make_server(max_connections_per_client=1)
    async with ServiceIncidentEnv(url) as holder:
        await holder.reset()
        with pytest.raises(ServerBusy, match="HTTP 503: Too many connections from this address") as busy:
            await ServiceIncidentEnv(url).reset()
        assert isinstance(busy.value, ConnectionFailed) and busy.value.retry_after_s == 1
    async with ServiceIncidentEnv(url) as after:  # the holder's connection is given back
        assert (await after.reset(seed=1)).observation.step_count == 0


async def test_an_evaluation_resumes_an_episode_whose_reply_came_too_late(frozen: tuple[str, Any]) -> None:
    # The server freezes just before one step goes out, for longer than the message timeout: that
    # step gets no reply in time, and the evaluation resumes the episode from the server's log
    # instead of failing it. Every episode ends as an undisturbed in-process run of it does.
    url, freeze = frozen
    specs = [EpisodeSpec(name=f"hard-{seed}", task_id="hard", incident_id=None, seed=seed) for seed in range(3)]
    expert = reference_policy("expert")

    def freeze_awhile() -> None:
        freeze(True)
        threading.Timer(2.5, freeze, (False,)).start()

    freezing_once = disturbing(expert, {3}, freeze_awhile)
    sessions = WebSocket(url, message_timeout_s=1.0)
    records = await evaluate(freezing_once, specs, sessions=sessions, concurrency=1)
    undisturbed = await evaluate(expert, specs, sessions=InProcess())
    assert sessions.resumes >= 1 and sum(r.resumes for r in records) == sessions.resumes
    assert [r.failure for r in records] == [None] * len(specs)
    assert [trace(r) for r in records] == [trace(r) for r in undisturbed]


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
