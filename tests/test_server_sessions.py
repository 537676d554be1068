"""The session registry and the HTTP episode store on a clock the test moves: capacity, idle
deadlines, owners and bounds, without a socket and without waiting."""

from __future__ import annotations

import pytest
from serving import ManualClock

from service_incident.models import InvalidReset, ResetRequest
from service_incident.server.http_episodes import EpisodeStore, UnknownEpisode
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
    busy.touch()
    assert registry.reap() == 0
    clock.advance(1.5)  # idle: 10.5 s without a frame; busy: 1.5 s
    assert registry.reap() == 1
    assert idle.scope.cancel_called and idle.idle and not busy.scope.cancel_called
    assert registry.reap() == 0  # already on its way out: its handler releases it
    clock.advance(10)
    assert registry.reap() == 1 and busy.scope.cancel_called


def store(clock: ManualClock | None = None, total: int = 8, per_client: int = 3) -> EpisodeStore:
    return EpisodeStore(total, per_client, idle_timeout_s=60, clock=clock or ManualClock())


def test_episode_ids_are_drawn_by_the_server_and_a_chosen_name_stays_a_name() -> None:
    episodes = store()
    ids = {episodes.start(ResetRequest(episode_id="ep-1"), "a")[0] for _ in range(3)}
    assert len(ids) == 3 and "ep-1" not in ids and all(len(i) >= 24 for i in ids)
    assert {episodes.get(i).state.episode_id for i in ids} == {"ep-1"}
    unnamed, _ = episodes.start(ResetRequest(), "a")
    assert episodes.get(unnamed).state.episode_id == unnamed


def test_a_client_past_its_bound_evicts_its_own_oldest_episode_only() -> None:
    episodes = store(per_client=3)
    theirs, _ = episodes.start(ResetRequest(), "victim")
    mine = [episodes.start(ResetRequest(), "attacker")[0] for _ in range(10)]
    assert len(episodes) == 4
    episodes.get(theirs)
    for gone in mine[:7]:
        with pytest.raises(UnknownEpisode):
            episodes.get(gone)
    assert all(episodes.get(kept) for kept in mine[7:])


def test_the_store_evicts_the_least_recently_used_episode_past_its_size() -> None:
    episodes = store(total=3, per_client=3)
    a, b, c = (episodes.start(ResetRequest(), client)[0] for client in "abc")
    episodes.get(a)  # now b is the least recently used
    episodes.start(ResetRequest(), "d")
    with pytest.raises(UnknownEpisode):
        episodes.get(b)
    assert episodes.get(a) and episodes.get(c)


def test_idle_episodes_expire_on_the_clock() -> None:
    clock = ManualClock()
    episodes = store(clock)
    old, _ = episodes.start(ResetRequest(), "a")
    clock.advance(50)
    fresh, _ = episodes.start(ResetRequest(), "a")
    clock.advance(20)  # old: 70 s idle, fresh: 20 s
    assert episodes.expire() == 1
    with pytest.raises(UnknownEpisode):
        episodes.get(old)
    assert episodes.get(fresh) and episodes.latest == fresh


def test_a_failed_start_leaves_no_latest_episode_and_keeps_the_others() -> None:
    episodes = store()
    first, _ = episodes.start(ResetRequest(), "a")
    with pytest.raises(InvalidReset):
        episodes.start(ResetRequest(task_id="no-such-task"), "a")
    assert episodes.latest is None and len(episodes) == 1 and episodes.get(first)


def test_a_closed_episode_is_gone() -> None:
    episodes = store()
    episode, _ = episodes.start(ResetRequest(), "a")
    assert episodes.close(episode) and not episodes.close(episode)
    assert episodes.latest is None
    with pytest.raises(UnknownEpisode):
        episodes.get(episode)
