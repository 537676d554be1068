"""A training or held-out reset generates its incident in a process of its own, off the event loop:
other sessions are answered meanwhile, and the episode is the one generated in process, byte for
byte. A pool whose process dies is replaced, and the reset generates in the server's process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import msgspec
import pytest
from mcp import Client
from scale_support import free_port
from serving import eventually
from test_server_ws import ask, open_ws

from service_incident import tasks
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.integrations import text
from service_incident.models import ResetRequest
from service_incident.server.generation import Generation

EXPERT_RESET = {"task_id": "gen_expert", "seed": 90_210, "episode_id": "ep-generated"}


def in_process(fields: dict[str, object]) -> dict[str, object]:
    """The reset's observation played in process, as a frame carries it (done and reward beside it)."""
    observation = json.loads(msgspec.json.encode(ServiceIncidentEnvironment().reset(**fields)))  # type: ignore[arg-type]
    return {name: value for name, value in observation.items() if name not in ("done", "reward")}


async def test_another_session_is_answered_while_a_reset_generates(make_server: Callable[..., str]) -> None:
    url = make_server(generation_processes=1)
    generating, stepping = await open_ws(url), await open_ws(url)
    calm = await ask(stepping, {"type": "reset", "data": {"task_id": "easy", "seed": 1}})
    service = calm["data"]["observation"]["services"][0]
    # The pool starts with the first draw: the reset waits for its process to start and generate,
    # hundreds of times as long as the other session's steps, which are answered meanwhile.
    await generating.send(json.dumps({"type": "reset", "data": EXPERT_RESET}))
    replied = asyncio.create_task(generating.recv())
    for _ in range(5):
        step = await ask(stepping, {"type": "step", "data": {"action": "inspect_logs", "target": service}})
        assert step["type"] == "observation"
    assert not replied.done()
    async with asyncio.timeout(30):
        reset = json.loads(await replied)
    assert reset["data"]["observation"] == in_process(EXPERT_RESET)


async def test_an_mcp_reset_generates_in_the_pool_while_other_sessions_are_answered(
    make_server: Callable[..., str],
) -> None:
    url = make_server(generation_processes=1)
    stepping = await open_ws(url)
    calm = await ask(stepping, {"type": "reset", "data": {"task_id": "easy", "seed": 2}})
    service = calm["data"]["observation"]["services"][0]
    fields = {"task_id": "gen_expert", "seed": 90_211}
    async with Client(f"{url}/mcp") as client:
        await client.list_tools()  # the session is open: what follows is the reset alone
        resetting = asyncio.create_task(client.call_tool("reset", fields))
        await asyncio.sleep(0.05)  # the call reaches the server: generated on its event loop, it is over
        for _ in range(5):
            step = await ask(stepping, {"type": "step", "data": {"action": "inspect_logs", "target": service}})
            assert step["type"] == "observation"
        assert not resetting.done()
        async with asyncio.timeout(30):
            reset = await resetting
    assert reset.is_error is False
    assert reset.content[0].text == text.page(ServiceIncidentEnvironment().reset(**fields))  # type: ignore[arg-type]


@pytest.mark.parametrize("processes", [0, 1])
async def test_a_generated_episode_is_the_one_generated_in_process(
    make_server: Callable[..., str], processes: int
) -> None:
    url = make_server(generation_processes=processes)
    fields = {"task_id": "gen_hard", "seed": 4_242 + processes, "episode_id": "ep-same"}
    ws = await open_ws(url)
    reset = await ask(ws, {"type": "reset", "data": fields})
    assert reset["data"]["observation"] == in_process(fields)


def kept(task_id: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether a reset of this draw would play an incident kept, generating nothing."""
    with monkeypatch.context() as patched:
        patched.setattr(tasks.dataset, "training_incident", _refuse)
        try:
            tasks.resolve_incident(tasks.TASKS[task_id], None, seed)
        except LookupError:
            return False
    return True


def _refuse(difficulty: str, seed: int) -> None:
    raise LookupError("not kept")


async def test_the_event_loop_runs_while_the_pool_generates_and_the_draw_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    generation = Generation(1, None)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    try:
        await generation.draw(ResetRequest(task_id="gen_expert", seed=77_001), None)
    finally:
        ticker.cancel()
        generation.close()
    assert ticks > 1
    assert kept("gen_expert", 77_001, monkeypatch)
    assert tasks.resolve_incident(tasks.TASKS["gen_expert"], None, 77_001) == tasks.dataset.training_incident(
        "expert", 77_001
    )


async def test_a_pool_whose_process_died_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    generation = Generation(1, None)
    try:
        await generation.draw(ResetRequest(task_id="gen_easy", seed=5_001), None)
        pool = generation._running()
        for pid in list(pool._processes):  # the standard library's own record of its processes
            os.kill(pid, signal.SIGKILL)
        await generation.draw(ResetRequest(task_id="gen_easy", seed=5_002), None)
        await generation.draw(ResetRequest(task_id="gen_easy", seed=5_003), None)
        assert kept("gen_easy", 5_003, monkeypatch)
        assert generation._running() is not pool
    finally:
        generation.close()


# Plays the digest's episodes (every reference agent and a random player, remedies included) of some
# generated draws in a process of its own, each draw made first by a pool of this many processes (0:
# none); prints how many draws found every service's pods and breakdown rendered, and the states and
# pages of every step through the task's budget, before their first reset; and the digest.
PLAYED_AFTER_DRAWS = """
import asyncio, hashlib, sys
sys.path.insert(0, sys.argv[2])
from digest import play
from service_incident import tasks
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import ResetRequest
from service_incident.server.generation import Generation
from service_incident.telemetry.state import shared
from service_incident.world.steps import untouched_steps

DRAWS = [("gen_hard", 6_101), ("gen_expert", 6_102), ("gen_expert", 6_103), ("gen_easy", 6_104)]

async def main():
    generation = Generation(int(sys.argv[1]), None)
    digest, env, rendered = hashlib.sha256(), ServiceIncidentEnvironment(), 0
    try:
        for task_id, seed in DRAWS:
            await generation.draw(ResetRequest(task_id=task_id, seed=seed), None)
            incident = tasks.resolve_incident(tasks.TASKS[task_id], None, seed)
            kept, names = shared(incident), {spec.name for spec in incident.services}
            ahead = {key[0] for key in kept.pods} == names == set(kept.breakdowns)
            steps = range(tasks.TASKS[task_id].max_steps + 1)
            lagged = {max(0, step - incident.metrics_lag) for step in steps}  # the minutes the steps page on
            rendered += ahead and set(steps) <= set(untouched_steps(incident)) and lagged <= set(kept.pages)
            play(env, digest, task_id, seed, None)
    finally:
        generation.close()
    print(rendered, digest.hexdigest())

asyncio.run(main())
"""


def test_episodes_of_an_incident_drawn_in_the_pool_are_those_played_from_scratch() -> None:
    """What the pool's process simulated and rendered of an incident (the states up to the page, its
    reset's pages and first look; ahead, every service's pods and metrics breakdown, and the states and
    pages of every step of the budget), kept for every episode of it, leaves each frame of every
    episode as a process that simulated and rendered everything itself shows it."""
    bench = str(Path(__file__).resolve().parent.parent / "bench")

    def played(processes: int) -> tuple[int, str]:
        command = [sys.executable, "-c", PLAYED_AFTER_DRAWS, str(processes), bench]
        rendered, digest = subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()
        return int(rendered), digest

    pooled, alone = played(1), played(0)
    assert (pooled[0], alone[0]) == (4, 0)  # the pool's renderings were there before the first reset
    assert pooled[1] == alone[1]


POOL_OWNER = """
import asyncio, time
from service_incident.models import ResetRequest
from service_incident.server.generation import Generation

generation = Generation(1, None)
asyncio.run(generation.draw(ResetRequest(task_id="gen_easy", seed=3), None))
print(*generation._running()._processes, flush=True)
time.sleep(120)
"""


def running(pid: int) -> bool:
    """Whether a process runs (an exited one its new parent has not reaped yet does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
def test_a_pool_process_ends_with_the_server_that_was_killed() -> None:
    owner = subprocess.Popen([sys.executable, "-c", POOL_OWNER], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        (pool_pid,) = map(int, owner.stdout.readline().split())
        assert running(pool_pid)
    finally:
        owner.kill()
        owner.wait()
    eventually(lambda: not running(pool_pid), "the pool's process ends once its server is killed")


def test_a_server_stopped_with_sigterm_ends_its_pool_and_leaves_nothing_to_clean_up() -> None:
    port = free_port()
    command = [sys.executable, "-m", "service_incident.server", "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        eventually(lambda: _answers(url), "the server answers")
        reset = httpx.post(f"{url}/reset", json={"task_id": "gen_easy", "seed": 12}, timeout=30)
        assert reset.status_code == 200
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=30)
    finally:
        server.kill()
    assert "Application shutdown complete" in stderr
    assert "leaked" not in stderr


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
