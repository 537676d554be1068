"""Whole episodes: the reference policies, determinism, and the anti-gaming properties of the score."""

from __future__ import annotations

import msgspec
import pytest

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import Agent, ExpertAgent, LoudestSignalAgent
from service_incident.models import Action, Declare, InspectLogs, InspectMetrics, Observation
from service_incident.tasks import TASKS, resolve_incident
from service_incident.world import World

ALL = [(task.id, incident) for task in TASKS.values() if task.suite == "triage" for incident in task.incidents]


def play(agent: Agent, task_id: str, incident_id: str, seed: int = 11) -> list[Observation]:
    env = ServiceIncidentEnvironment()
    trajectory = [env.reset(task_id=task_id, seed=seed, incident_id=incident_id)]
    while not trajectory[-1].done:
        trajectory.append(env.step(agent.act(trajectory[-1])))
    return trajectory


def scripted(task_id: str, incident_id: str, actions: list[Action], seed: int = 11) -> list[Observation]:
    env = ServiceIncidentEnvironment()
    trajectory = [env.reset(task_id=task_id, seed=seed, incident_id=incident_id)]
    for action in actions:
        trajectory.append(env.step(action))
    return trajectory


def truth(incident_id: str) -> tuple[str, str]:
    task = next(t for t in TASKS.values() if incident_id in t.incidents)
    world = World(resolve_incident(task, incident_id, seed=0))
    (root,) = world.root_causes
    return root, world.severity()


def ret(trajectory: list[Observation]) -> float:
    return sum(o.reward or 0.0 for o in trajectory[1:])


@pytest.mark.parametrize(("task_id", "incident_id"), ALL)
@pytest.mark.parametrize("seed", [0, 11, 2024])
def test_expert_solves_every_incident(task_id: str, incident_id: str, seed: int) -> None:
    final = play(ExpertAgent(), task_id, incident_id, seed)[-1]
    assert final.done
    assert final.score is not None and final.score >= 0.9, (incident_id, final.breakdown)


def test_loudest_signal_fails_most_hard_incidents() -> None:
    wrong = 0
    for incident_id in TASKS["hard"].incidents:
        final = play(LoudestSignalAgent(), "hard", incident_id)[-1]
        assert final.breakdown is not None
        wrong += final.breakdown["root_cause"] == 0
    # Most of them: a herring's failing background job no longer raises its service's error rate (its
    # job's row shows it), so the loudest service is a root more often than when it did.
    assert wrong > len(TASKS["hard"].incidents) / 2


SEED_LABELS = {
    "easy_001": ("db", "P0"),
    "easy_002": ("cache", "P1"),
    "easy_003": ("auth", "P0"),
    "easy_004": ("payments", "P1"),
    "easy_005": ("gateway", "P0"),
    "med_001": ("db", "P0"),
    "med_002": ("cache", "P1"),
    "med_003": ("auth", "P1"),
    "med_004": ("gateway", "P0"),
    "med_005": ("payments", "P1"),
    "hard_001": ("db", "P0"),
    "hard_002": ("notifications", "P2"),
    "hard_003": ("cache", "P1"),
    "hard_004": ("db", "P0"),
    "hard_005": ("gateway", "P1"),
}


@pytest.mark.parametrize("incident_id", sorted(SEED_LABELS))
def test_labels_follow_the_triage_scenarios(incident_id: str) -> None:
    assert truth(incident_id) == SEED_LABELS[incident_id]


def test_same_task_and_seed_give_identical_episodes_even_interleaved() -> None:
    actions: list[Action] = [InspectLogs(target="db"), InspectMetrics(target="payments"), InspectMetrics(target="db")]
    alone = [msgspec.json.encode(o) for o in scripted("hard", "hard_001", actions, seed=5)]
    env_a, env_b = ServiceIncidentEnvironment(), ServiceIncidentEnvironment()
    interleaved = [msgspec.json.encode(env_a.reset(task_id="hard", seed=5, incident_id="hard_001"))]
    env_b.reset(task_id="hard", seed=6, incident_id="hard_001")
    for action in actions:
        env_b.step(InspectMetrics(target="auth"))
        interleaved.append(msgspec.json.encode(env_a.step(action)))
        env_b.reset(task_id="medium", seed=99)
    strip = [msgspec.json.decode(x) for x in alone], [msgspec.json.decode(x) for x in interleaved]
    for a, b in zip(*strip, strict=True):
        a["metadata"].pop("episode_id"), b["metadata"].pop("episode_id")
        assert a == b


def test_text_does_not_depend_on_inspection_order() -> None:
    first = scripted("hard", "hard_004", [InspectLogs(target="notifications"), InspectLogs(target="db")])
    second = scripted("hard", "hard_004", [InspectMetrics(target="payments"), InspectLogs(target="db")])
    assert first[2].visible_logs["db"] == second[2].visible_logs["db"]


def test_seeds_change_the_text_but_not_the_answer() -> None:
    a = scripted("hard", "hard_001", [InspectLogs(target="db")], seed=1)[-1]
    b = scripted("hard", "hard_001", [InspectLogs(target="db")], seed=2)[-1]
    assert a.visible_logs["db"] != b.visible_logs["db"]
    assert truth("hard_001")[0] == "db"


def test_reset_without_seed_draws_one_and_reports_it_at_the_end() -> None:
    env = ServiceIncidentEnvironment()
    obs = env.reset(task_id="easy")
    assert "seed" not in obs.metadata and env.state.seed is None
    last = env.step(Declare(target=obs.services[0], severity="P1"))
    seed = last.metadata["seed"]
    assert last.done and isinstance(seed, int) and env.state.seed == seed
    replay = ServiceIncidentEnvironment().reset(task_id="easy", seed=seed)
    assert replay.incident_id == obs.incident_id and replay.visible_logs == obs.visible_logs


@pytest.mark.parametrize(("task_id", "incident_id"), ALL)
def test_gaming_policies_score_below_the_honest_one(task_id: str, incident_id: str) -> None:
    root, severity = truth(incident_id)
    honest = play(ExpertAgent(), task_id, incident_id)
    budget = TASKS[task_id].max_steps
    others = [s for s in honest[0].services if s != root]
    answer = Declare(target=root, severity=severity)
    blind = scripted(task_id, incident_id, [answer])
    loop = scripted(task_id, incident_id, [*[InspectLogs(target=root)] * (budget - 1), answer])
    no_evidence = scripted(task_id, incident_id, [*[InspectMetrics(target=s) for s in others][: budget - 1], answer])
    everything = [kind(target=s) for s in honest[0].services for kind in (InspectMetrics, InspectLogs)]
    farm = scripted(task_id, incident_id, [*everything[: budget - 1], answer])
    for gamed in (blind, loop, no_evidence, farm):
        assert gamed[-1].done
        # Farming every view can stumble on the root as fast as the honest policy, never faster.
        assert gamed[-1].score <= honest[-1].score if gamed is farm else gamed[-1].score < honest[-1].score
        assert ret(gamed) <= ret(honest) + 1e-9
    assert ret(loop) < ret(honest)


def test_score_ladder_evidence_blind_wrong() -> None:
    evidence = scripted("easy", "easy_001", [InspectLogs(target="db"), Declare(target="db", severity="P0")])[-1]
    blind = scripted("easy", "easy_001", [Declare(target="db", severity="P0")])[-1]
    wrong = scripted("easy", "easy_001", [InspectLogs(target="db"), Declare(target="auth", severity="P0")])[-1]
    assert evidence.score > blind.score > wrong.score
    slow = scripted(
        "hard",
        "hard_001",
        [
            InspectLogs(target="db"),
            InspectMetrics(target="auth"),
            InspectMetrics(target="payments"),
            Declare(target="db", severity="P0"),
        ],
    )[-1]
    fast = scripted("hard", "hard_001", [InspectLogs(target="db"), Declare(target="db", severity="P0")])[-1]
    assert fast.score > slow.score
