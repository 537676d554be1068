"""The session registry and the HTTP episode store on a clock the test moves: capacity, idle
deadlines, owners and bounds, without a socket and without waiting."""

from __future__ import annotations

import pytest
from serving import ManualClock

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import InvalidReset, ResetRequest
from service_incident.server.bounded import AtCapacity
from service_incident.server.episode_log import MemoryLog
from service_incident.server.http_episodes import EpisodeStore, UnknownEpisode
from service_incident.server.replay import Replayer
from service_incident.server.sessions import SessionRegistry


async def test_sessions_fill_to_capacity_and_free_their_slot() -> None:
    registry = SessionRegistry(capacity=2, idle_timeout_s=10, clock=ManualClock())
    first, second = registry.open(), registry.open()
    assert first is not None and second is not None and registry.open() is None
    registry.release(first)
    assert registry.active == 1 and registry.open() is not None


async def test_only_sessions_idle_past_the_deadline_are_reaped_and_only_once() -> None:
    clock = ManualClock()
    registry = SessionRegistry(capacity=4, idle_timeout_s=10, clock=clock)
    idle, busy = registry.open(), registry.open()
    assert idle is not None and busy is not None
    clock.advance(9)
    registry.touch(busy)
    assert registry.reap() == 0
    clock.advance(1.5)  # idle: 10.5 s without a frame; busy: 1.5 s
    assert registry.reap() == 1
    assert idle.scope.cancel_called and idle.idle and not busy.scope.cancel_called
    assert registry.reap() == 0  # already on its way out: its handler releases it
    registry.release(idle)
    clock.advance(10)
    assert registry.reap() == 1 and busy.scope.cancel_called


def store(clock: ManualClock | None = None, total: int = 8, per_client: int = 3) -> EpisodeStore:
    clock = clock or ManualClock()
    log = MemoryLog(64, 64, 60, clock)
    return EpisodeStore(Replayer(log, ServiceIncidentEnvironment, None), total, per_client, 60, 30, clock)


async def test_episode_ids_are_drawn_by_the_server_and_a_chosen_name_stays_a_name() -> None:
    episodes = store()
    ids = {(await episodes.start(ResetRequest(episode_id="ep-1"), "a"))[0] for _ in range(3)}
    assert len(ids) == 3 and "ep-1" not in ids and all(len(i) >= 24 for i in ids)
    assert {(await episodes.get(i, "a")).state.episode_id for i in ids} == {"ep-1"}
    unnamed, _ = await episodes.start(ResetRequest(), "a")
    assert (await episodes.get(unnamed, "a")).state.episode_id == unnamed


async def test_a_client_past_its_bound_evicts_its_own_oldest_episode_only() -> None:
    episodes = store(per_client=3)
    theirs, _ = await episodes.start(ResetRequest(), "victim")
    mine = [(await episodes.start(ResetRequest(), "attacker"))[0] for _ in range(10)]
    assert len(episodes) == 4
    await episodes.get(theirs, "victim")
    for gone in mine[:7]:
        with pytest.raises(UnknownEpisode):
            await episodes.get(gone, "attacker")
    assert all([await episodes.get(kept, "attacker") for kept in mine[7:]])


async def test_a_full_store_evicts_an_idle_episode_never_a_live_one_of_another_client() -> None:
    clock = ManualClock()
    episodes = store(clock, total=3, per_client=3)
    a, b = [(await episodes.start(ResetRequest(), client))[0] for client in "ab"]
    clock.advance(40)  # past the live window (30 s): a and b are idle
    await episodes.get(a, "a")  # a is live again, b still idle
    c, _ = await episodes.start(ResetRequest(), "c")
    d, _ = await episodes.start(ResetRequest(), "d")  # full: the idle b makes way
    with pytest.raises(UnknownEpisode):
        await episodes.get(b, "b")
    with pytest.raises(AtCapacity, match="the server holds 3 of its 3 HTTP episodes") as full:
        await episodes.start(ResetRequest(), "e")  # a, c and d are live and not e's
    assert full.value.whose == "server"
    assert all([await episodes.get(key, "x") for key in (a, c, d)])


async def test_idle_episodes_expire_on_the_clock() -> None:
    clock = ManualClock()
    episodes = store(clock)
    old, _ = await episodes.start(ResetRequest(), "a")
    clock.advance(50)
    fresh, _ = await episodes.start(ResetRequest(), "a")
    clock.advance(20)  # old: 70 s idle, fresh: 20 s
    assert await episodes.expire() == 1
    with pytest.raises(UnknownEpisode):
        await episodes.get(old, "a")
    assert await episodes.get(fresh, "a") and episodes.latest == fresh


async def test_a_failed_start_leaves_no_latest_episode_and_keeps_the_others() -> None:
    episodes = store()
    first, _ = await episodes.start(ResetRequest(), "a")
    with pytest.raises(InvalidReset):
        await episodes.start(ResetRequest(task_id="no-such-task"), "a")
    assert episodes.latest is None and len(episodes) == 1 and await episodes.get(first, "a")


async def test_a_closed_episode_is_gone() -> None:
    episodes = store()
    episode, _ = await episodes.start(ResetRequest(), "a")
    assert await episodes.close(episode) and not await episodes.close(episode)
    assert episodes.latest is None
    with pytest.raises(UnknownEpisode):
        await episodes.get(episode, "a")
