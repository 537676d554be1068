"""The three episode stores keep the same promises (the Redis one on a real redis-server): appends
land only at the index the log holds, loads give back what was appended in order, an owner past its
bound loses its oldest episode, idle episodes expire, and a dropped episode is gone."""

from __future__ import annotations

import asyncio
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
from service_incident.server.replay import Replayer, UnknownEpisode

# An episode idle for 1 s is gone within this (Redis expires keys by whole seconds).
IDLE_EXPIRY_WAIT_S = 2.2


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
    episode_id, episode, _ = replayer.begin(ResetRequest(task_id="holdout_hard", seed=3), "client")
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
