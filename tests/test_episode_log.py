"""The three episode stores keep the same promises (the Redis one on a real redis-server): appends
land only at the index the log holds, loads give back what was appended in order, an owner past its
bound loses its oldest episode, idle episodes expire, and a dropped episode is gone."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from scale_support import missing_services, redis_server

from service_incident.server.episode_log import open_log


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield "memory"
    elif request.param == "sqlite":
        yield f"sqlite://{tmp_path}/episodes.sqlite3"
    else:
        if missing_services() is not None:
            pytest.skip(missing_services() or "")
        with redis_server() as url:
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
            await asyncio.sleep(2.2)
            await log.expire()
            assert await log.load("theirs") is None
    finally:
        await log.aclose()
