"""The reward table row by row, bad input, and what observations must never carry."""

from __future__ import annotations

import msgspec
import pytest

from service_incident import scoring
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.faults import FAULTS
from service_incident.models import (
    ACTION_NAMES,
    Declare,
    InspectLogs,
    InspectMetrics,
    InvalidAction,
    InvalidReset,
    parse_action,
    schemas,
)
from service_incident.tasks import TASKS, catalogue


def fresh(task_id: str = "easy", incident_id: str = "easy_001", seed: int = 3) -> ServiceIncidentEnvironment:
    env = ServiceIncidentEnvironment()
    env.reset(task_id=task_id, seed=seed, incident_id=incident_id)
    return env


def test_new_anomalous_inspection_pays_info_reward() -> None:
    assert fresh().step(InspectLogs(target="db")).reward == scoring.INFO_REWARD


def test_new_clean_inspection_pays_nothing() -> None:
    env = fresh("medium", "med_005")
    obs = env.step(InspectMetrics(target="db"))
    assert obs.reward == scoring.NO_INFO_REWARD and "nothing abnormal" in obs.message


def test_redundant_inspection_and_unknown_target_cost() -> None:
    env = fresh("medium", "med_001")
    assert env.step(InspectLogs(target="auth")).reward == scoring.WASTE_PENALTY  # visible since reset
    obs = env.step(InspectMetrics(target="kafka"))
    assert obs.reward == scoring.WASTE_PENALTY
    assert obs.last_action_error and "kafka" in obs.last_action_error and "payments" in obs.last_action_error
    assert env.state.step_count == 2 and not obs.done


@pytest.mark.parametrize(
    ("target", "severity", "reward"),
    [
        ("db", "P0", scoring.DECLARE_EXACT),
        ("db", "P2", scoring.DECLARE_ROOT_ONLY),
        ("auth", "P0", scoring.DECLARE_WRONG),
    ],
)
def test_declaration_rewards(target: str, severity: str, reward: float) -> None:
    obs = fresh().step(Declare(target=target, severity=severity))
    assert obs.done and obs.reward == reward


def test_declaration_settles_the_shaping_paid() -> None:
    env = fresh()
    first = env.step(InspectLogs(target="db"))
    last = env.step(Declare(target="db", severity="P0"))
    assert first.reward + last.reward == pytest.approx(scoring.DECLARE_EXACT)


def test_budget_exhaustion_penalty() -> None:
    env = fresh()
    env.step(InspectMetrics(target="auth"))  # anomalous: +0.1
    env.step(InspectMetrics(target="payments"))  # anomalous: +0.1
    last = env.step(InspectMetrics(target="db"))  # +0.1, then the budget is spent
    assert last.done and last.score == scoring.SCORE_FLOOR
    assert last.reward == pytest.approx(scoring.INFO_REWARD + scoring.BUDGET_EXHAUSTED - 3 * scoring.INFO_REWARD)


def test_budget_exhaustion_applies_on_an_invalid_target_too() -> None:
    env = fresh()
    env.step(InspectMetrics(target="nope"))
    env.step(InspectMetrics(target="nope"))
    last = env.step(InspectMetrics(target="nope"))
    assert last.done and last.reward == pytest.approx(scoring.WASTE_PENALTY + scoring.BUDGET_EXHAUSTED)


def test_reward_bounds_hold_on_extreme_episodes() -> None:
    env = fresh("hard", "hard_004")
    rewards = [env.step(InspectLogs(target=s)).reward for s in ("db", "notifications")]
    rewards += [env.step(InspectMetrics(target=s)).reward for s in ("db", "notifications", "payments")]
    rewards.append(env.step(Declare(target="payments", severity="P2")).reward)
    assert all(scoring.REWARD_MIN <= r <= scoring.REWARD_MAX for r in rewards)
    assert rewards[-1] == pytest.approx(scoring.DECLARE_WRONG - scoring.INFO_REWARD_CAP)


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"action": "declare", "target": "db"}, "severity"),
        ({"action": "frobnicate", "target": "db"}, "must be one of"),
        ({"target": "db"}, "`action`"),
        ({"action": "inspect_logs", "target": 7}, "$.target"),
        ({"action": "inspect_logs", "target": "db", "extra": 1}, "unknown field"),
        ({"action": "declare", "target": "db", "severity": "P7"}, "severity"),
        ([1, 2], "object"),
        (b"{not json", "not valid JSON"),
    ],
)
def test_malformed_actions_raise_a_typed_error(payload: object, fragment: str) -> None:
    with pytest.raises(InvalidAction) as caught:
        parse_action(payload)
    assert fragment in str(caught.value)


def test_openenv_action_metadata_is_accepted() -> None:
    action = parse_action({"action": "inspect_logs", "target": "db", "metadata": {}, "rationale": "why"})
    assert action == InspectLogs(target="db", rationale="why")


def test_step_before_reset_and_after_done_explain_themselves() -> None:
    env = ServiceIncidentEnvironment()
    early = env.step(InspectLogs(target="db"))
    assert early.last_action_error and "reset" in early.last_action_error and not early.done
    env.reset(task_id="easy", seed=1, incident_id="easy_001")
    final = env.step(Declare(target="db", severity="P0"))
    late = env.step(InspectLogs(target="db"))
    assert late.done and late.reward == 0.0 and late.last_action_error and "over" in late.last_action_error
    assert late.score == final.score and env.state.step_count == 1


@pytest.mark.parametrize(
    "kwargs",
    [{"task_id": "nightmare"}, {"incident_id": "zzz_999"}, {"task_id": "easy", "incident_id": "hard_001"},
     {"seed": -1}, {"seed": "7"}],
)
def test_bad_reset_arguments_raise_a_typed_error(kwargs: dict[str, object]) -> None:
    env = ServiceIncidentEnvironment()
    with pytest.raises(InvalidReset):
        env.reset(**kwargs)


def _answers() -> set[str]:
    words = set(FAULTS)
    words |= {name.replace("_", " ") for name in FAULTS}
    words |= {"root cause is", "root-cause is", "caused by", "red herring", "suggest", "recommended", "you should"}
    return words


@pytest.mark.parametrize("task_id", list(TASKS))
def test_no_ground_truth_in_observations_state_or_catalogue(task_id: str) -> None:
    from service_incident.harness.agents import ExpertAgent

    for incident_id in TASKS[task_id].incidents:
        env = ServiceIncidentEnvironment()
        obs = env.reset(task_id=task_id, seed=4, incident_id=incident_id)
        agent = ExpertAgent()
        while True:
            state = msgspec.json.encode(env.state).decode().lower()
            if not obs.done:
                shown = msgspec.json.encode(obs).decode().lower()
                for word in _answers():
                    assert word not in shown, (incident_id, word)
            for word in _answers() | {"db", "cache", "auth"}:
                assert f'"{word}"' not in state.replace(f'"incident_id":"{incident_id}"', "")
            if obs.done:
                break
            obs = env.step(agent.act(obs))
    published = msgspec.json.encode(catalogue()).decode().lower()
    for word in _answers():
        assert word not in published


def test_json_schemas_come_from_the_models() -> None:
    found = schemas()
    assert set(found) == {"action", "observation", "state"}
    assert set(found["action"]["discriminator"]["mapping"]) == set(ACTION_NAMES)
    assert {"inspect_logs", "inspect_metrics", "declare", "restart", "resolve"} <= set(ACTION_NAMES)
    assert "visible_logs" in found["observation"]["$defs"]["Observation"]["properties"]
