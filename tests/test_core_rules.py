"""The reward table row by row, bad input, and what observations must never carry."""

from __future__ import annotations

import msgspec
import pytest

from service_incident import scoring
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.faults import FAULTS
from service_incident.harness.audit import JUDGMENT
from service_incident.incidents import load_suite
from service_incident.models import (
    ACTION_NAMES,
    ActionRecord,
    Declare,
    InspectLogs,
    InspectMetrics,
    InvalidAction,
    InvalidReset,
    parse_action,
    schemas,
)
from service_incident.tasks import TASKS, catalogue


def fresh(
    task_id: str = "easy", incident_id: str = "easy_001", seed: int = 3, mode: str = "dense"
) -> ServiceIncidentEnvironment:
    env = ServiceIncidentEnvironment()
    env.reset(task_id=task_id, seed=seed, incident_id=incident_id, reward_mode=mode)
    return env


def test_dense_mode_pays_a_first_look_at_a_root_cause_its_bonus() -> None:
    """At reset the potential is 0; after a look at the root it is the floor score plus the bonus."""
    obs = fresh().step(InspectLogs(target="db"))
    assert obs.reward == pytest.approx(scoring.SCORE_FLOOR + scoring.INFO_REWARD)


def test_a_look_elsewhere_pays_nothing_and_judges_nothing() -> None:
    env = fresh("medium", "med_005")
    env.step(InspectLogs(target="payments"))
    obs = env.step(InspectMetrics(target="db"))
    assert obs.reward == 0.0
    assert obs.message == "Inspected the metrics of db."
    assert not JUDGMENT.search(obs.message) and not JUDGMENT.search(obs.last_diagnostic or "")


def test_the_first_look_at_the_view_reset_showed_is_a_look_and_the_next_is_redundant() -> None:
    """The agent did not choose what reset showed: its own first look at it counts, as evidence too."""
    env = ServiceIncidentEnvironment()
    reset = env.reset(task_id="hard", seed=7, reward_mode="final")  # the README's example: reset shows cache's logs
    first = env.step(InspectLogs(target="cache"))
    assert first.message == "Inspected the logs of cache." and first.last_diagnostic is not None
    again = env.step(InspectLogs(target="cache"))
    # Nothing moved since reset: the view shown is the one taken then, and says so.
    assert first.as_of["logs"]["cache"] == reset.clock[11:16] != first.clock[11:16]
    assert again.message == f"The logs of cache show nothing new since you last looked at {reset.clock[11:16]}."
    last = env.step(Declare(target="cache", severity="P1"))
    assert last.breakdown is not None
    assert last.breakdown["evidence"] == scoring.WEIGHTS["triage"]["evidence"]
    assert last.breakdown["waste"] == -scoring.SCORE_WASTE


def test_redundant_inspection_and_unknown_target_cost() -> None:
    env = fresh("medium", "med_001")
    visible = next(i.initial_visible for i in load_suite("triage") if i.id == "med_001")
    assert env.step(InspectLogs(target=visible)).message == f"Inspected the logs of {visible}."  # its own look
    assert "nothing new" in env.step(InspectLogs(target=visible)).message  # unchanged since then
    obs = env.step(InspectMetrics(target="kafka"))
    assert obs.last_action_error and "kafka" in obs.last_action_error and "payments" in obs.last_action_error
    assert env.state.step_count == 3 and not obs.done
    assert obs.action_history[-1] == ActionRecord(step=3, action="inspect_metrics", target="kafka", refused=True)
    last = env.step(Declare(target="db", severity="P0"))
    assert last.breakdown is not None and last.breakdown["waste"] == -2 * scoring.SCORE_WASTE


@pytest.mark.parametrize("mode", ["final", "dense"])
def test_a_declaration_at_once_pays_the_score_and_the_better_answer_more(mode: str) -> None:
    paid = {}
    for target, severity in (("db", "P0"), ("db", "P2"), ("auth", "P0")):
        obs = fresh(mode=mode).step(Declare(target=target, severity=severity))
        assert obs.done and obs.score is not None and obs.reward == obs.score
        paid[target, severity] = obs.reward
    assert paid["db", "P0"] > paid["db", "P2"] > paid["auth", "P0"] == scoring.SCORE_FLOOR


def test_the_last_step_takes_the_bonus_back() -> None:
    env = fresh()
    first = env.step(InspectLogs(target="db"))
    last = env.step(Declare(target="db", severity="P0"))
    assert last.score is not None and first.reward is not None
    assert first.reward + last.reward == pytest.approx(last.score, abs=1e-9)
    assert last.reward == pytest.approx(last.score - scoring.SCORE_FLOOR - scoring.INFO_REWARD)


@pytest.mark.parametrize("task_id", ["hard", "gen_expert", "rca_15", "hard_incident_triage"])
def test_both_modes_pay_the_score_final_mode_on_the_last_step_only(task_id: str) -> None:
    from service_incident.harness.agents import ExpertAgent

    returns, scores = {}, {}
    for mode in ("dense", "final"):
        env = ServiceIncidentEnvironment()
        obs = env.reset(task_id=task_id, seed=5, reward_mode=mode)
        rewards, agent = [], ExpertAgent()
        while not obs.done:
            obs = env.step(agent.act(obs))
            rewards.append(obs.reward)
        returns[mode], scores[mode] = rewards, obs.score
    assert scores["dense"] == scores["final"]
    assert all(r == 0.0 for r in returns["final"][:-1]) and returns["final"][-1] == scores["final"]
    assert sum(returns["dense"]) == pytest.approx(scores["dense"], abs=1e-9)
    assert obs.metadata["cumulative_reward"] == scores["final"]


def test_a_spent_budget_pays_the_floor_score_in_all() -> None:
    env = fresh()
    rewards = [env.step(InspectMetrics(target=s)).reward for s in ("auth", "payments", "db")]
    assert env.state.done and env.grade()[0] == scoring.SCORE_FLOOR
    # The look at the root was the last step: its bonus is taken back in the same reward.
    assert rewards == [scoring.SCORE_FLOOR, 0.0, 0.0]


def test_a_spent_budget_on_invalid_targets_pays_the_floor_score_too() -> None:
    env = fresh()
    rewards = [env.step(InspectMetrics(target="nope")).reward for _ in range(3)]
    assert env.state.done and sum(rewards) == pytest.approx(scoring.SCORE_FLOOR)


def test_reward_bounds_hold_on_extreme_episodes() -> None:
    env = fresh("hard", "hard_004")
    rewards = [env.step(InspectLogs(target=s)).reward for s in ("db", "notifications")]
    rewards += [env.step(InspectMetrics(target=s)).reward for s in ("db", "notifications", "payments")]
    last = env.step(Declare(target="payments", severity="P2"))
    rewards.append(last.reward)
    assert all(scoring.REWARD_MIN <= r <= scoring.REWARD_MAX for r in rewards)
    assert sum(rewards) == pytest.approx(scoring.SCORE_FLOOR, abs=1e-9) and last.score == scoring.SCORE_FLOOR


def test_postmortem_only_at_the_end_says_what_was_missed() -> None:
    env = fresh(mode="final")
    first = env.step(InspectLogs(target="auth"))
    assert first.postmortem is None
    last = env.step(Declare(target="auth", severity="P1"))
    report = last.postmortem
    assert report is not None and [r.service for r in report.root_causes] == ["db"]
    assert report.root_causes[0].fault == "connection_pool_exhaustion" and "restart" in report.root_causes[0].fixes
    assert report.severity == "P0" and "P0" in report.severity_basis and report.declared_severity == "P1"
    assert "not named: db" in report.missed["root_cause"] and "auth" in report.missed["root_cause"]


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
    [
        {"task_id": "nightmare"},
        {"incident_id": "zzz_999"},
        {"task_id": "easy", "incident_id": "hard_001"},
        {"seed": -1},
        {"seed": "7"},
    ],
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


def test_a_log_view_that_received_nothing_counts_no_lines() -> None:
    """A shipper's backlog note is no log line: the diagnostic counts none."""
    env = ServiceIncidentEnvironment()
    for seed in range(40):
        obs = env.reset(task_id="gen_hard", seed=seed, reward_mode="final")
        for service in obs.services[:6]:
            obs = env.step(InspectLogs(target=service))
            if obs.visible_logs[service].startswith("(no log lines received"):
                assert obs.last_diagnostic == f"logs of {service}: 0 lines in the last 120 s"
                return
    pytest.fail("no empty log view in 40 gen_hard episodes")
