"""The garbage collector's policy (server/collector.py) in the processes a server runs, and what it rests
on: the core leaves no reference cycles for a collection to find."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator

import pytest
import uvicorn

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import ExpertAgent
from service_incident.models import ResetRequest
from service_incident.server import collector
from service_incident.server.app import main, worker_app
from service_incident.server.generation import Generation


@pytest.fixture
def own_collector() -> Iterator[None]:
    """This process's collector as it was, whatever a test settles."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
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
    finally:
        generation.close()
