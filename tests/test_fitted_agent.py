"""The fitted reference agent: it beats `expert` on training incidents it was not fitted on, plays
from observations alone, needs no scikit-learn to play, and its model matches the world it plays."""

from __future__ import annotations

import statistics
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import pytest

from service_incident import dataset
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.faults import FAULTS
from service_incident.harness.agents import AGENTS, REFERENCE_AGENTS, Agent, ExpertAgent
from service_incident.harness.fitted import FittedAgent, world
from service_incident.harness.fitted import __main__ as command
from service_incident.harness.fitted.build import _fit
from service_incident.harness.fitted.model import load
from service_incident.models import Observation

# Training seeds past the ones the model was fitted on: neither evaluation nor held-out incidents.
UNSEEN = 40


def play(agent: Agent, task_id: str, seed: int) -> Observation:
    env = ServiceIncidentEnvironment()
    obs = env.reset(task_id=task_id, seed=seed)
    while not obs.done:
        obs = env.step(agent.act(obs))
    return obs


@pytest.mark.parametrize("tier", ["hard", "expert"])
def test_it_beats_expert_on_training_incidents_it_was_not_fitted_on(tier: str) -> None:
    seeds = range(load().seeds, load().seeds + UNSEEN)
    fitted = [play(FittedAgent(), f"gen_{tier}", s).score or 0.0 for s in seeds]
    expert = [play(ExpertAgent(), f"gen_{tier}", s).score or 0.0 for s in seeds]
    assert statistics.mean(fitted) > statistics.mean(expert), (fitted, expert)


@contextmanager
def answers_sealed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every way to an incident's answers raises while it is in force."""

    def sealed(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the agent read an incident's answers")

    with monkeypatch.context() as patch:
        for name in ("labels", "training_incident", "frozen", "build"):
            patch.setattr(dataset, name, sealed)
        yield


def test_it_never_reads_the_incidents_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    env = ServiceIncidentEnvironment()
    obs = env.reset(task_id="gen_expert", seed=load().seeds + 1)
    agent = FittedAgent()
    actions = []
    while not obs.done:
        with answers_sealed(monkeypatch):
            action = agent.act(obs)
        actions.append(action)
        obs = env.step(action)
    assert actions[-1].__struct_config__.tag == "declare" and len(actions) > 3


def test_the_model_loads_and_plays_without_scikit_learn() -> None:
    script = (
        "import sys\n"
        "sys.modules['sklearn'] = None\n"  # any import of scikit-learn now fails
        "from service_incident.environment import ServiceIncidentEnvironment\n"
        "from service_incident.harness.fitted import FittedAgent\n"
        "env = ServiceIncidentEnvironment()\n"
        "obs = env.reset(task_id='gen_hard', seed=5)\n"
        "agent = FittedAgent()\n"
        "while not obs.done:\n"
        "    obs = env.step(agent.act(obs))\n"
        "assert not any(name.startswith('sklearn') and sys.modules[name] for name in sys.modules)\n"
        "print(obs.score)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert 0.0 < float(done.stdout.strip()) < 1.0


def test_the_model_was_fitted_on_the_world_as_it_is() -> None:
    assert load().world == world.fingerprint(), (
        "the world changed since the fitted agent's model was built: "
        "run `python -m service_incident.harness.fitted build`"
    )


def test_the_fingerprint_moves_with_the_answers_and_the_check_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = dataset.training_incident

    def relabelled(tier: str, seed: int) -> Any:
        incident = real(tier, seed)
        fault = incident.faults[0]
        kind = incident.service(fault.service).kind
        other = next(t for t, k in FAULTS.items() if t != fault.type and kind in k.kinds)
        return msgspec.structs.replace(incident, faults=[msgspec.structs.replace(fault, type=other)])

    before = world.fingerprint()
    monkeypatch.setattr(dataset, "training_incident", relabelled)
    assert world.fingerprint() != before
    monkeypatch.setattr(command, "fingerprint", lambda: "0" * 64)
    assert command.main(["check"]) == 1
    assert "rebuild" in capsys.readouterr().err


def test_exported_trees_give_scikit_learns_probabilities() -> None:
    rows = [[float(i % 7), float(i % 3), float(i % 11) / 10] for i in range(300)]
    labels = [str((r[0] > 3) != (r[1] == 1)) for r in rows]
    forest = _fit(rows, labels, (30, 8))
    probe = [[4.0, 1.0, 0.45], [6.0, 0.0, 0.0], [0.0, 2.0, 1.0]]
    assert [forest.predict(r) for r in probe] == ["False", "True", "False"]
    several = _fit(rows, [str(int(r[0]) % 3) for r in rows], (20, 8))
    assert several.classes == ["0", "1", "2"]
    assert [several.predict(r) for r in rows[:6]] == [str(i % 7 % 3) for i in range(6)]


def test_it_stands_above_the_ladder_and_plays_every_task_to_the_end() -> None:
    assert list(AGENTS) == [*REFERENCE_AGENTS, "fitted"]
    # Outside the generated tiers it plays as the expert does.
    for task_id in ("easy", "hard", "gen_easy"):
        assert play(AGENTS["fitted"](3), task_id, 3).done
    assert play(AGENTS["fitted"](3), "easy", 3).score == play(ExpertAgent(), "easy", 3).score
