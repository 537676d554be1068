"""Past one process, on real parts: two servers behind nginx (hashing on Episode-Id, passing WebSocket
upgrades) with a redis-server as their episode store. An evaluation survives one of them killed
(SIGKILL) or drained (SIGTERM) mid-run and restarted: every episode completes, each trace the same
as an undisturbed in-process run of the same seeds. HTTP episodes stepped through both servers in
turn equal one server's; `server --workers 2` shares an embedded store without any setting."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from collections.abc import Iterator

import httpx
import msgspec
import pytest
from scale_support import FAIL_TIMEOUT_S, ServerProcess, missing_services, nginx, redis_server, servers, trace
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosedOK

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.evaluation import evaluate, reference_policy
from service_incident.harness.records import EpisodeRecord, EpisodeSpec
from service_incident.harness.session import InProcess
from service_incident.models import InspectLogs, InspectMetrics

pytestmark = pytest.mark.skipif(missing_services() is not None, reason=missing_services() or "")

EPISODES = 200
SPECS = [EpisodeSpec(name=f"hard-{seed}", task_id="hard", incident_id=None, seed=seed) for seed in range(EPISODES)]
AGENT = "expert"


@pytest.fixture(scope="module")
def undisturbed() -> dict[str, bytes]:
    records = asyncio.run(evaluate(reference_policy(AGENT), SPECS, sessions=InProcess(), concurrency=32))
    return {record.name: trace(record) for record in records}


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as url:
        yield url


@pytest.fixture(scope="module")
def pair(redis_url: str) -> Iterator[tuple[list[ServerProcess], str]]:
    with servers(2, {"EPISODE_STORE": redis_url}) as both, nginx(both) as balancer:
        yield both, balancer


def interrupt_midway(
    victim: ServerProcess, signum: int, after: int, done: list[EpisodeRecord], seen: dict[str, int]
) -> threading.Thread:
    """Once `after` episodes are done and `victim` serves sessions, send it `signum`, then start it
    again on its port; `seen` gets what it held when it went."""

    def run() -> None:
        while len(done) < after:
            threading.Event().wait(0.005)
        # nginx takes a server out of rotation for a while after one slow connect (a busy machine), and
        # the run may be a third done by then: the signal waits for the victim to hold sessions again.
        while (held := httpx.get(f"{victim.url}/health").json()["active_sessions"]) == 0 and len(done) < EPISODES:
            threading.Event().wait(0.005)
        seen["active_sessions"] = held
        victim.signal(signum)
        victim.start()
        # nginx keeps a server it saw fail out of rotation for a while: the drill ends once the restarted
        # one is back in it, so that the next run finds both serving.
        threading.Event().wait(FAIL_TIMEOUT_S)
        seen["restarted"] = 1

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_an_evaluation_survives_a_server_going_midway(
    pair: tuple[list[ServerProcess], str], undisturbed: dict[str, bytes], signum: int
) -> None:
    (victim, _), balancer = pair
    done: list[EpisodeRecord] = []
    seen: dict[str, int] = {}
    interrupting = interrupt_midway(victim, signum, EPISODES // 3, done, seen)
    records = asyncio.run(
        evaluate(reference_policy(AGENT), SPECS, base_url=balancer, concurrency=48, on_episode=done.append)
    )
    interrupting.join(timeout=180)
    assert seen.get("restarted") and httpx.get(f"{balancer}/health").status_code == 200
    assert seen["active_sessions"] > 0  # it went with sessions in flight, which resumed on the other
    failed = [(r.name, r.error) for r in records if r.failure is not None or not r.graded]
    assert not failed
    assert {record.name: trace(record) for record in records} == undisturbed


def test_http_episodes_stepped_through_both_servers_in_turn_equal_one(pair: tuple[list[ServerProcess], str]) -> None:
    both, _ = pair
    actions = [InspectLogs(target="api"), InspectMetrics(target="db"), InspectLogs(target="db")] * 2
    with httpx.Client(timeout=10) as http:
        reset = http.post(f"{both[0].url}/reset", json={"task_id": "hard", "seed": 11}).json()
        episode_id = reset["episode_id"]
        shown = [reset["observation"]]
        for n, action in enumerate(actions):
            body = {"action": msgspec.to_builtins(action), "episode_id": episode_id}
            shown.append(http.post(f"{both[n % 2].url}/step", json=body).json()["observation"])
        state = http.get(f"{both[1].url}/state", params={"episode_id": episode_id}).json()
    env = ServiceIncidentEnvironment()
    alone = [env.reset(task_id="hard", seed=11, episode_id=episode_id), *map(env.step, actions)]
    wire = [msgspec.to_builtins(observation) for observation in alone]
    for body in wire:
        del body["reward"], body["done"]
    assert shown == wire and state["step_count"] == len(actions)


def test_workers_share_an_embedded_store_without_a_setting() -> None:
    with servers(1, {}, workers=2) as (server,), httpx.Client(timeout=10) as http:
        episode_id = http.post(f"{server.url}/reset", json={"task_id": "rca_15", "seed": 5}).json()["episode_id"]
        # A new connection per request: the kernel hands each to either worker.
        for _ in range(20):
            body = {"action": "inspect_logs", "target": "api", "episode_id": episode_id}
            assert httpx.post(f"{server.url}/step", json=body, timeout=10).status_code == 200
        state = http.get(f"{server.url}/state", params={"episode_id": episode_id}).json()
    assert state["step_count"] == 20


async def test_sigterm_closes_sessions_going_away_after_their_frame_in_flight() -> None:
    with servers(1, {"EPISODE_STORE": "memory"}) as (server,):
        async with connect(server.url.replace("http", "ws", 1) + "/ws") as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"task_id": "hard", "seed": 1}}))
            await ws.recv()
            await ws.send(json.dumps({"type": "step", "data": {"action": "inspect_logs", "target": "api"}}))
            assert server.process is not None
            server.process.send_signal(signal.SIGTERM)
            replies = []
            with pytest.raises(ConnectionClosedOK):
                while True:
                    replies.append(json.loads(await ws.recv()))
        # The step is answered if the server had read it (else the client resumes and the log decides).
        assert [reply["type"] for reply in replies] in (["observation"], [])
        assert ws.close_code == 1001 and "resume" in (ws.close_reason or "")


def test_an_evaluation_spreads_its_sessions_across_several_urls_and_reports_the_lost_apart(
    pair: tuple[list[ServerProcess], str],
) -> None:
    # Two URLs, the second with nothing behind it: every other session goes there and fails, reported
    # apart as the environment's failure; the others play on the first (one of the pair, never stopped).
    (_, server), _ = pair
    nowhere = ServerProcess({})  # a free port no server listens on
    specs = SPECS[:10]
    records = asyncio.run(
        evaluate(reference_policy(AGENT), specs, base_url=f"{server.url},{nowhere.url}", concurrency=1)
    )
    assert [r.failure for r in records] == [None, "environment"] * 5
    assert all("cannot open a session at" in (r.error or "") for r in records[1::2])
