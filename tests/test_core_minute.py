"""The compiled minute (`world/_minute.pyx`, setup.py) against the Python it stands for
(`simulation._service_state`): the same state, encoded byte for byte, for every service of every minute
that generation and the expert's episodes simulate."""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
import pytest

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import ExpertAgent
from service_incident.world import simulation

KERNEL = simulation.compiled_kernel()


@pytest.mark.skipif(KERNEL is None, reason="the kernel is not compiled in this install")
def test_the_compiled_minute_computes_the_states_the_python_one_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    assert KERNEL is not None
    seen: Counter[str] = Counter()

    def both(*args: Any) -> simulation.ServiceState:
        reference = simulation._service_state(*args)
        compiled = KERNEL(*args)
        # Encoded, not compared: a float where Python kept an int would compare equal and print otherwise.
        assert msgspec.json.encode(compiled) == msgspec.json.encode(reference), args[0][0].name
        _, _, _, _, _, faults, scale, side, restarting, _, _, _ = args
        seen.update(
            name
            for name, present in [
                ("fault", bool(faults)),
                ("scaled", scale is not None),
                ("side work", side is not None),
                ("restarting", restarting),
                ("down", reference.health == "down"),
                *((f"calls failing by {cause}", True) for _, _, cause in reference.failing_upstreams),
            ]
            if present
        )
        seen["states"] += 1
        return reference

    monkeypatch.setattr(simulation, "service_state", both)
    env = ServiceIncidentEnvironment()
    # New seeds: a reset generates its incident (every draft and fault strength the generator tries),
    # then the expert's remedies change the minutes that follow.
    for task_id, seeds in [("easy", range(3)), ("hard", range(3)), ("gen_hard", range(70_000, 70_004))]:
        for seed in seeds:
            obs = env.reset(task_id=task_id, seed=seed)
            agent = ExpertAgent()
            while not obs.done:
                obs = env.step(agent.act(obs))
    obs = env.reset(task_id="gen_expert", seed=70_100)
    wanted = {"fault", "scaled", "side work", "restarting", "down", "calls failing by timeout"}
    assert wanted <= seen.keys(), seen
    assert any(cause.startswith("calls failing by") and cause != "calls failing by timeout" for cause in seen), seen
    assert seen["states"] > 1000
