"""The garbage collector's policy (server/collector.py) in the processes a server runs, and what it rests
on: the core leaves no reference cycles for a collection to find."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import uvicorn

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import ExpertAgent
from service_incident.models import ResetRequest
from service_incident.server import collector
from service_incident.server.app import main, worker_app
from service_incident.server.generation import NICENESS, Generation


@pytest.fixture
def own_collector() -> Iterator[None]:
    """This process's collector as it was, whatever a test settles."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        collector.unsettle()
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_the_core_leaves_no_reference_cycles_behind() -> None:
    env = ServiceIncidentEnvironment()
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        # Generation, every view and remedy the expert takes, the episodes' ends and the next resets.
        for task_id in ("easy", "hard", "gen_hard", "gen_expert"):
            for seed in range(90_000, 90_003):
                obs = env.reset(task_id=task_id, seed=seed)
                agent = ExpertAgent()
                while not obs.done:
                    obs = env.step(agent.act(obs))
        env.close()
        gc.collect()
        garbage = Counter(getattr(o, "__qualname__", type(o).__qualname__) for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert not garbage


def test_a_worker_process_freezes_what_it_started_with(own_collector: None) -> None:
    assert gc.get_freeze_count() == 0
    worker_app()
    assert gc.get_threshold() == collector.THRESHOLDS
    # The modules and the app, every object tracked when the app was built.
    assert gc.get_freeze_count() > 10_000


def test_the_one_process_server_settles_before_it_serves(own_collector: None, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[tuple[int, int, int], int]] = []

    def run(server: uvicorn.Server, sockets: object = None) -> None:
        seen.append((gc.get_threshold(), gc.get_freeze_count()))

    monkeypatch.setattr(uvicorn.Server, "run", run)
    main(["--port", "0"])
    ((thresholds, frozen),) = seen
    assert thresholds == collector.THRESHOLDS and frozen > 10_000


async def test_a_generation_process_settles_its_collector() -> None:
    generation = Generation(1, None)
    try:
        await generation.draw(ResetRequest(task_id="gen_easy", seed=7_001), None)
        pool = generation._running()
        assert pool.submit(gc.get_threshold).result(timeout=60) == collector.THRESHOLDS
        assert pool.submit(gc.get_freeze_count).result(timeout=60) > 10_000
        # Below the server's priority: steps are answered first.
        assert pool.submit(os.nice, 0).result(timeout=60) == min(19, os.nice(0) + NICENESS)
    finally:
        generation.close()


def _turn_over(count: int) -> list[list[object]]:
    """`count` new objects that replaced as many old ones, as sessions that reset replace their
    episodes."""
    old: list[list[object]] = [[] for _ in range(count)]
    gc.collect()  # the old ones are the oldest generation's now
    young: list[list[object]] = []
    for _ in range(count):
        young.append([])
        old.pop()
    return young


def test_young_objects_are_collected_on_a_clock_while_old_ones_die(own_collector: None) -> None:
    gc.set_threshold(*collector.THRESHOLDS)
    # CPython's counts alone: each old object freed cancels a new one, so no young collection comes.
    young = _turn_over(50_000)
    assert len(gc.get_objects(generation=0)) > 45_000
    del young
    collector.settle()
    young = _turn_over(50_000)
    deadline = time.monotonic() + 5.0
    while (held := len(gc.get_objects(generation=0))) > 5_000 and time.monotonic() < deadline:
        time.sleep(collector.YOUNG_PERIOD_S)
    assert held <= 5_000 and len(young) == 50_000


def test_a_tick_takes_what_outlived_the_period_to_the_oldest_generation(own_collector: None) -> None:
    gc.disable()  # no collection but the tick's
    try:
        gc.collect(1)  # the counts from zero: the tick must not owe its middle collection to them
        earlier = [[] for _ in range(20_000)]
        gc.collect(0)  # in the middle generation now, as a burst of allocations between ticks leaves them
        later = [[] for _ in range(20_000)]
        collector.tick()
        oldest = {id(o) for o in gc.get_objects(generation=2)}
        assert all(id(o) in oldest for o in earlier + later)
        assert not gc.get_objects(generation=1)
    finally:
        gc.enable()


def test_unsettling_stops_the_clock(own_collector: None) -> None:
    def ticking() -> bool:
        return any(thread.name == "young-collections" for thread in threading.enumerate())

    collector.settle()
    collector.settle()  # once settled, settling again starts no second clock
    assert sum(thread.name == "young-collections" for thread in threading.enumerate()) == 1
    collector.unsettle()
    assert not ticking()
