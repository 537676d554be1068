"""The three episode stores keep the same promises (the Redis one on a real redis-server): appends
land only at the index the log holds, loads give back what was appended in order, an owner past its
bound loses its oldest episode, idle episodes expire, and a dropped episode is gone. Writes made at
once go to a store in batches, and none is acknowledged before its batch is written: a step a
SQLite log acknowledged survives the process's kill -9."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import redis
from scale_support import missing_services, redis_server

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.holdout import HoldoutKey, fingerprint
from service_incident.models import InspectLogs, ResetRequest
from service_incident.server.episode_log import open_log
from service_incident.server.group_commit import GroupCommit
from service_incident.server.replay import Replayer, Reset, UnknownEpisode

# An episode idle for 1 s is gone within this: Redis expires keys by whole seconds, and on a loaded
# machine (the suite runs a worker a core) the polls run late. An episode that never expires still fails.
IDLE_EXPIRY_WAIT_S = 10.0


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    if missing_services() is not None:
        pytest.skip(missing_services() or "")
    with redis_server() as url:
        yield url


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory"
    elif request.param == "sqlite":
        yield f"sqlite://{tmp_path}/episodes.sqlite3"
    else:
        url = request.getfixturevalue("redis_url")
        with redis.from_url(url) as client:
            client.flushdb()  # each test starts on an empty store, as on a server of its own
        yield url


async def test_appends_land_only_where_the_log_ends_and_load_in_order(store: str) -> None:
    log = open_log(store, 1000, 1000, 60)
    try:

        async def one(i: int) -> None:
            await log.create(f"k{i}", b"head", "client")
            assert await log.append(f"k{i}", 0, [b"a", b"b"])
            assert not await log.append(f"k{i}", 0, [b"stale"])  # another process was behind
            assert await log.append(f"k{i}", 2, [b"c"])
            logged = await log.load(f"k{i}")
            assert logged is not None and logged.head == b"head" and logged.actions == [b"a", b"b", b"c"]

        await asyncio.gather(*(one(i) for i in range(100)))
        assert await log.length("k7") == 3 and await log.length("never") is None
        assert not await log.append("never", 0, [b"a"])
        await log.drop("k7")
        assert await log.load("k7") is None
    finally:
        await log.aclose()


async def test_any_bytes_come_back_as_appended(store: str) -> None:
    # The stores frame actions by length: no byte inside one (NUL, newline, invalid UTF-8) ends it.
    actions = [b"", b"\x00\x00\x00\x05", b"line\nbreak", bytes(range(256)), b"x" * 70_000]
    log = open_log(store, 10, 10, 60)
    try:
        await log.create("k", b"head", "client")
        assert await log.append("k", 0, actions[:2]) and await log.append("k", 2, actions[2:])
        logged = await log.load("k")
        assert logged is not None and logged.actions == actions and await log.length("k") == len(actions)
    finally:
        await log.aclose()


async def test_an_owner_past_its_bound_loses_its_oldest_and_idle_episodes_expire(store: str) -> None:
    log = open_log(store, 1000, 3, 1.0)
    try:
        for i in range(5):
            await log.create(f"mine{i}", b"h", "greedy")
        await log.create("theirs", b"h", "other")
        assert [await log.length(f"mine{i}") for i in range(5)] == [None, None, 0, 0, 0]
        assert await log.length("theirs") == 0
        if store != "memory":  # the in-memory log runs on the server's clock: tested with the store
            async with asyncio.timeout(IDLE_EXPIRY_WAIT_S):
                while await log.load("theirs") is not None:
                    await asyncio.sleep(0.05)
                    await log.expire()
    finally:
        await log.aclose()


async def test_a_held_out_log_holds_its_index_and_key_fingerprint_never_the_generator_seed() -> None:
    key, other = "k" * 16 + "-held-out", "o" * 16 + "-elsewhere"
    log = open_log("memory", 10, 10, 60)
    replayer = Replayer(log, lambda: ServiceIncidentEnvironment(holdout_key=key), key)
    episode_id, episode, _ = replayer.begin(Reset(ResetRequest(task_id="holdout_hard", seed=3), None), "client")
    episode.step(InspectLogs(target="api"))
    await replayer.save(episode)
    logged = await log.load(episode.key)
    assert logged is not None
    head = msgspec.json.decode(logged.head)
    assert head["request"]["seed"] == 3 and head["holdout"] == fingerprint(key)
    everything = logged.head + b"".join(logged.actions)
    assert str(HoldoutKey(key).generator_seed("hard", 3)).encode() not in everything
    assert key.encode() not in everything and episode_id.encode() not in everything
    assert (await replayer.restore(episode_id, "client")).steps == 1
    elsewhere = Replayer(log, lambda: ServiceIncidentEnvironment(holdout_key=other), other)
    with pytest.raises(UnknownEpisode, match="another holdout key"):
        await elsewhere.restore(episode_id, "client")


async def test_writes_made_at_once_go_in_batches_and_each_learns_its_result_once_its_batch_is_written() -> None:
    batches: list[list[int]] = []
    release = asyncio.Event()

    async def write_batch(batch: list[int]) -> list[int]:
        batches.append(batch)
        await release.wait()
        return [item * 10 for item in batch]

    commits: GroupCommit[int, int] = GroupCommit(write_batch, limit=30)
    writes = [asyncio.ensure_future(commits.write(i)) for i in range(100)]
    await asyncio.sleep(0.01)
    assert batches == [list(range(30))]  # the rest wait for the batch being written
    assert not any(write.done() for write in writes)  # nothing is acknowledged before it is written
    release.set()
    assert await asyncio.gather(*writes) == [i * 10 for i in range(100)]
    assert [len(batch) for batch in batches] == [30, 30, 30, 10]
    assert await commits.write(7) == 70 and batches[-1] == [7]  # alone, a write goes at once


async def test_a_failed_batch_fails_each_of_its_writes_and_the_next_batch_still_goes() -> None:
    async def write_batch(batch: list[int]) -> list[int]:
        if 0 in batch:
            raise sqlite3.OperationalError("disk I/O error")
        return batch

    commits: GroupCommit[int, int] = GroupCommit(write_batch)
    failed = await asyncio.gather(commits.write(0), commits.write(1), return_exceptions=True)
    assert all(isinstance(error, sqlite3.OperationalError) for error in failed)
    assert await asyncio.gather(commits.write(2), commits.write(3)) == [2, 3]
    await commits.aclose()


# Appends steps to a SQLite log and says which it was told are written; killed at any moment.
_APPENDER = """
import asyncio, sys
from service_incident.server.episode_log import open_log
from service_incident.server.group_commit import GroupCommit
async def main():
    log = open_log(sys.argv[1], 100, 100, 3600)
    await log.create("episode", b"head", "client")
    for i in range(100000):
        assert await log.append("episode", i, [str(i).encode()])
        print(i, flush=True)
asyncio.run(main())
"""


async def test_a_sqlite_step_acknowledged_before_kill_9_is_in_the_log(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path}/episodes.sqlite3"
    appender = subprocess.Popen([sys.executable, "-c", _APPENDER, store], stdout=subprocess.PIPE, text=True)
    assert appender.stdout is not None
    for _ in range(200):
        acknowledged = int(appender.stdout.readline())
    appender.kill()
    appender.wait(timeout=30)
    log = open_log(store, 100, 100, 3600)
    try:
        logged = await log.load("episode")
        assert logged is not None and len(logged.actions) > acknowledged
        assert logged.actions[: acknowledged + 1] == [str(i).encode() for i in range(acknowledged + 1)]
    finally:
        await log.aclose()
