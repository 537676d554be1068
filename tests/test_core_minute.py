"""The compiled minute (`world/_minute.pyx`, setup.py) against the Python it stands for
(`simulation._minute_states`): the same states, encoded byte for byte, and the same services left in
their quiet state, in every minute that generation and the expert's episodes simulate."""

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

    def both(*args: Any) -> dict[str, simulation.ServiceState]:
        reference = simulation._minute_states(*args)
        compiled = KERNEL(*args)
        # Encoded, not compared: a float where Python kept an int would compare equal and print otherwise.
        assert msgspec.json.encode(compiled) == msgspec.json.encode(reference)
        _, _, _, minute, _, only, quiet, _, _, _ = args
        # The services each left in their quiet state rather than simulated are the same ones.
        kept = {name for name, state in reference.items() if quiet is not None and state is quiet[name]}
        assert kept == {name for name, state in compiled.items() if quiet is not None and state is quiet[name]}
        simulated = [(name, state) for name, state in reference.items() if name not in kept]
        seen.update(
            label
            for name, state in simulated
            for label, present in [
                ("fault", name in minute.live),
                ("scaled", name in minute.scaled),
                ("side work", name in minute.side),
                ("restarting", name in minute.restarting),
                ("down", state.health == "down"),
                *((f"calls failing by {cause}", True) for _, _, cause in state.failing_upstreams),
            ]
            if present
        )
        seen.update(["quiet states kept"] * bool(kept) + ["some services only"] * (only is not None))
        seen["states"] += len(simulated)
        return reference

    monkeypatch.setattr(simulation, "minute_states", both)
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
    wanted |= {"quiet states kept", "some services only"}
    assert wanted <= seen.keys(), seen
    assert any(cause.startswith("calls failing by") and cause != "calls failing by timeout" for cause in seen), seen
    assert seen["states"] > 1000
