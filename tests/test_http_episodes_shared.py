"""HTTP episodes on a store shared by several processes (a real SQLite file): a step of an episode
held here reads nothing from the store, and a copy another process has stepped past learns so from
its write and takes the step on the episode taken over from the log. Stepped in runs through two
stores, or two real servers, an episode shows what one environment alone shows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from scale_support import servers

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import Action, InspectLogs, InspectMetrics, InspectTraces, Observation, ResetRequest
from service_incident.server.episode_log import SqliteLog
from service_incident.server.http_episodes import EpisodeStore
from service_incident.server.replay import Replayer

ACTIONS: list[Action] = [
    InspectLogs(target="api-gateway"),
    InspectMetrics(target="order-service"),
    InspectTraces(target="api-gateway"),
    InspectLogs(target="auth-service"),
    InspectMetrics(target="redis-cache"),
    InspectLogs(target="order-service"),
    InspectTraces(target="auth-service"),
]
# Which of the two processes takes each step: runs long enough to leave the other's copy behind.
TAKERS = [0, 0, 1, 1, 1, 0, 1]
RESET = ResetRequest(task_id="rca_15", seed=11)  # 25 steps: none of these ends it


class CountedLog(SqliteLog):
    """A real SQLite log that counts its reads."""

    def __init__(self, path: str) -> None:
        super().__init__(path, per_owner=64, idle_timeout_s=600)
        self.reads = 0

    async def load(self, key: str) -> Any:
        self.reads += 1
        return await super().load(key)

    async def length(self, key: str) -> int | None:
        self.reads += 1
        return await super().length(key)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[tuple[EpisodeStore, CountedLog]]]:
    """Two episode stores over one SQLite file, as two workers of a box have them."""
    logs = [CountedLog(str(tmp_path / "episodes.sqlite3")) for _ in range(2)]
    yield [(EpisodeStore(Replayer(log, ServiceIncidentEnvironment, None), 64, 64, 600, 60), log) for log in logs]


def alone(episode_id: str) -> list[Observation]:
    env = ServiceIncidentEnvironment()
    return [env.reset(**{**msgspec.structs.asdict(RESET), "episode_id": episode_id}), *map(env.step, ACTIONS)]


async def test_a_held_episode_steps_without_reading_the_store_and_a_copy_left_behind_catches_up(
    workers: list[tuple[EpisodeStore, CountedLog]],
) -> None:
    try:
        (first, _), _ = workers
        episode_id, observation = await first.start(RESET, "client")
        shown = [observation]
        reads: list[int] = []
        for taker, action in zip(TAKERS, ACTIONS, strict=True):
            store, log = workers[taker]
            before = log.reads
            episode = await store.get(episode_id, "client", stepping=True)
            shown.append(await store.step(episode_id, episode, action))
            reads.append(log.reads - before)
        assert shown == alone(episode_id) and not any(o.last_action_error for o in shown)
        # Held and current: no read. Not held (the second's first step): the log, once. Held but left
        # behind (the first's third step, the second's last): the write finds out, then the log, once.
        assert reads == [0, 0, 1, 0, 0, 1, 1]
        # A read writes nothing to find out with: it checks the held copy's length, and catches up.
        for store, log in workers:
            before = log.reads
            state = (await store.get(episode_id, "client")).state
            assert state.step_count == len(ACTIONS) and log.reads - before >= 1
    finally:
        for _, log in workers:
            await log.aclose()


def test_an_episode_stepped_in_runs_through_two_servers_on_one_sqlite_file_equals_one(tmp_path: Path) -> None:
    store = {"EPISODE_STORE": f"sqlite://{tmp_path}/episodes.sqlite3"}
    with servers(2, store) as both, httpx.Client(timeout=30) as http:
        reset = http.post(f"{both[0].url}/reset", json=msgspec.to_builtins(RESET)).json()
        episode_id = reset["episode_id"]
        shown, states = [reset["observation"]], []
        for taker, action in zip(TAKERS, ACTIONS, strict=True):
            body = {"action": msgspec.to_builtins(action), "episode_id": episode_id}
            shown.append(http.post(f"{both[taker].url}/step", json=body).json()["observation"])
            # The other server's copy is behind whenever it held one: its state must not be.
            other = both[1 - taker].url
            states.append(http.get(f"{other}/state", params={"episode_id": episode_id}).json()["step_count"])
        grade = http.get(f"{both[0].url}/grade", params={"episode_id": episode_id}).json()
    wire = [msgspec.to_builtins(observation) for observation in alone(episode_id)]
    for body in wire:
        del body["reward"], body["done"]
    assert shown == wire
    assert states == list(range(1, len(ACTIONS) + 1))
    assert grade["episode_id"] == episode_id and grade["done"] is False and grade["score"] is None
