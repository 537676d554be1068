"""A warm process renders what a cold one does: what the world and telemetry keep between looks and
between episodes (the states, pages and identities an incident's episodes share, each episode's renderings that
its remedies outdate) changes how fast an observation comes, never a byte of it.

The cold run is a fresh interpreter playing the episodes once; the warm run plays them in this
process after other episodes of the same incidents, with other actions and remedies at other steps,
and after the same episodes themselves."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable

import msgspec
import pytest

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.faults import FAULTS
from service_incident.harness.agents import Agent, ExpertAgent
from service_incident.models import (
    ACTIONS_BY_NAME,
    REMEDIATIONS,
    Action,
    Declare,
    DeclareRootCauses,
    Observation,
    Resolve,
    action_name,
)
from service_incident.tasks import TASKS, resolve_incident
from service_incident.telemetry import state as telemetry_state

# (task, seed, incident): a triage incident, a long root-cause analysis, a generated incident and a
# task with the status page, so every view, the pages and the dashboard are rendered.
EPISODES: tuple[tuple[str, int, str | None], ...] = (
    ("hard", 5, "hard_004"),
    ("rca_03", 2, None),
    ("gen_hard", 31, None),
    ("easy_incident_triage", 7, None),
)
_ENCODER = msgspec.json.Encoder(order="deterministic")
# The actions on one service: the inspections and the remedies.
_ON_A_SERVICE = {name for name, kind in ACTIONS_BY_NAME.items() if kind not in (Declare, DeclareRootCauses, Resolve)}


class Wanderer:
    """Inspects and remedies any service at random and never answers: the episode runs out its steps.

    It takes the actions in shuffled rounds, each action once a round, so a long episode takes them all.
    """

    name: str = "wanderer"

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(f"wanderer:{seed}")
        self._round: list[str] = []

    def act(self, observation: Observation) -> Action:
        if not self._round:
            self._round = [name for name in observation.available_actions if name in _ON_A_SERVICE]
            self._rng.shuffle(self._round)
        chosen = {"action": self._round.pop(), "target": self._rng.choice(observation.services)}
        return msgspec.convert(chosen, Action)


def transcript(task_id: str, seed: int, incident_id: str | None, agent: Agent) -> list[str]:
    """Every observation of one episode, as its bytes on the wire."""
    env = ServiceIncidentEnvironment()
    observation = env.reset(task_id=task_id, seed=seed, incident_id=incident_id, episode_id="transcript")
    shown = [_ENCODER.encode(observation).decode()]
    while not observation.done:
        observation = env.step(agent.act(observation))
        shown.append(_ENCODER.encode(observation).decode())
    return shown


def transcripts() -> list[list[str]]:
    agents: list[Callable[[int], Agent]] = [lambda _: ExpertAgent(), Wanderer]
    return [transcript(*episode, agent(episode[1])) for episode in EPISODES for agent in agents]


def test_a_warm_process_renders_what_a_cold_one_does() -> None:
    cold_run = subprocess.run([sys.executable, __file__], capture_output=True, text=True, check=True, timeout=300)
    cold = json.loads(cold_run.stdout)
    for task_id, seed, incident_id in EPISODES:
        for other in range(3):
            # The same incident and seed with remedies at other steps: the pages of steps no remedy
            # touched yet are shared, the rest are the episode's own.
            transcript(task_id, seed, incident_id, Wanderer(1000 + other))
            # The same incident with another seed: what follows from the incident alone (pods, pages,
            # evidence) is shared whatever the seed, what the seed draws is not.
            transcript(task_id, seed + 1 + other, incident_id, Wanderer(2000 + other))
    transcripts()
    warm = transcripts()
    assert len(warm) == len(cold) == 2 * len(EPISODES)
    for index, (warm_episode, cold_episode) in enumerate(zip(warm, cold, strict=True)):
        assert len(warm_episode) == len(cold_episode), EPISODES[index // 2]
        for step, (warm_shown, cold_shown) in enumerate(zip(warm_episode, cold_episode, strict=True)):
            assert warm_shown == cold_shown, (EPISODES[index // 2], step)


def test_the_episodes_remedy_and_render_every_view() -> None:
    # The comparison means something only if the episodes change the world and look at all of it.
    done = set()
    for episode in EPISODES:
        for line in transcript(*episode, Wanderer(episode[1]))[1:]:
            last = json.loads(line)["action_history"][-1]
            done.add(last["action"])
    assert {action_name(remedy) for remedy in REMEDIATIONS} <= done
    assert {"inspect_logs", "inspect_metrics", "check_health", "inspect_deploys", "inspect_traces"} <= done


def _root_logs(task_id: str, seed: int, fix: bool) -> str:
    """The logs of the incident's first root as an episode sees them the step after it applied the
    root's fix (or looked at its metrics instead)."""
    fault = resolve_incident(TASKS[task_id], None, seed, None).faults[0]
    first = FAULTS[fault.type].fix if fix else "inspect_metrics"
    env = ServiceIncidentEnvironment()
    env.reset(task_id=task_id, seed=seed)
    for name in (first, "inspect_logs"):
        observation = env.step(msgspec.convert({"action": name, "target": fault.service, "rationale": "-"}, Action))
        assert observation.last_action_error is None
    return observation.visible_logs[fault.service]


@pytest.mark.parametrize("task_id", ["rca_01", "rca_03", "rca_05"])
def test_an_episode_shows_nothing_of_a_remedy_another_episode_applied(
    task_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What episodes of an incident share follows from the incident alone: an episode that fixed the
    # root leaves another one, which did not, the logs it would see in a process of its own.
    fixed = _root_logs(task_id, 1, fix=True)
    unfixed = _root_logs(task_id, 2, fix=False)
    monkeypatch.setattr(telemetry_state, "_SHARED", {})
    assert _root_logs(task_id, 2, fix=False) == unfixed
    assert _root_logs(task_id, 1, fix=True) == fixed


if __name__ == "__main__":
    print(json.dumps(transcripts()))
