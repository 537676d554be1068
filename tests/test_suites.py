"""The response and root-cause suites: every curated scenario is solvable, and no exploit pays."""

from __future__ import annotations

import math
import re

import pytest

from service_incident import scoring
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.faults import FAULTS
from service_incident.harness.agents import ExpertAgent
from service_incident.harness.exploits import EXPLOITS, applies, curated, play
from service_incident.incidents import load_suite
from service_incident.models import Declare, DeclareRootCauses, InspectLogs, InspectMetrics, Resolve, parse_action
from service_incident.tasks import RCA_IDS, TASKS, resolve_incident
from service_incident.world import World

SUITES = [(t, i) for t, i in curated() if TASKS[t].suite in ("response", "rca")]
# The least an exploit must fall short of the honest expert by: one wasted action's worth of score
# (where the reset's view is the root, repeating it is a first look and then repeats).
CLEAR_MARGIN = scoring.SCORE_WASTE * (scoring.SCORE_CEIL - scoring.SCORE_FLOOR) - 1e-9


@pytest.mark.parametrize(("task_id", "incident_id"), SUITES)
def test_expert_solves_every_curated_scenario(task_id: str, incident_id: str) -> None:
    env = ServiceIncidentEnvironment()
    observation = env.reset(task_id=task_id, seed=1, incident_id=incident_id)
    agent = ExpertAgent()
    while not observation.done:
        observation = env.step(agent.act(observation))
    breakdown = observation.breakdown or {}
    assert observation.score is not None and observation.score >= 0.85, breakdown
    assert breakdown["remediation"] > 0 and breakdown["evidence"] > 0


@pytest.mark.parametrize("exploit", list(EXPLOITS))
def test_no_exploit_comes_close_to_the_honest_policy(exploit: str) -> None:
    for task_id, incident_id in curated():
        if applies(exploit, task_id):
            honest = play(task_id, incident_id, None)
            cheat = play(task_id, incident_id, EXPLOITS[exploit])
            assert honest - cheat >= CLEAR_MARGIN, (exploit, task_id, incident_id, honest, cheat)


def test_every_rca_scenario_has_evidence_on_its_root_and_a_fix() -> None:
    for task in (t for t in TASKS.values() if t.suite == "rca"):
        incident = resolve_incident(task, None, seed=0)
        env = ServiceIncidentEnvironment()
        env.reset(task_id=task.id, seed=0, reward_mode="dense")
        for fault in incident.faults:
            # Logs shown at reset are no look the agent took: another view of that root is.
            look = InspectMetrics if fault.service == incident.initial_visible else InspectLogs
            seen = env.step(look(target=fault.service))
            assert seen.reward and seen.reward > 0, (task.id, fault.service)
        world = World(incident)
        for fault in incident.faults:
            assert world.remediate(FAULTS[fault.type].fix, fault.service) == "heals"


def test_seed_task_ids_are_accepted_but_never_published() -> None:
    env = ServiceIncidentEnvironment()
    for seed_id, task_id in RCA_IDS.items():
        observation = env.reset(task_id=seed_id, seed=0)
        assert observation.task_id == task_id and seed_id not in observation.task_id
        assert env.state.task_id == task_id
    assert not set(RCA_IDS) & set(TASKS)


def test_rca_vocabulary_plays_a_full_episode() -> None:
    env = ServiceIncidentEnvironment()
    observation = env.reset(task_id="task_expert", seed=0)
    moves = [
        {"action_type": "read_logs", "target": "api-gateway"},
        {"action_type": "check_metrics", "target": "redis-cache"},
        {"action_type": "check_health", "target": "auth-service"},
        {"action_type": "run_db_query", "target": "postgres-db"},
        {"action_type": "restart_service", "target": "redis-cache"},
        {"action_type": "rollback_deployment", "target": "auth-service"},
        {"action_type": "declare_rca", "target": "redis-cache, auth-service"},
    ]
    for move in moves:
        observation = env.step(parse_action(move))
        assert observation.last_action_error is None, (move, observation.last_action_error)
    assert observation.done and observation.breakdown and observation.breakdown["root_cause"] == 0.4


def test_response_vocabulary_plays_a_full_episode() -> None:
    env = ServiceIncidentEnvironment()
    observation = env.reset(task_id="easy_incident_triage", seed=0, incident_id="easy_001")
    moves = [
        {"action_type": "investigate", "target_service": "payment-service", "rationale": "502s from the gateway"},
        {"action_type": "rollback", "target_service": "payment-service", "rationale": "errors began with a deploy"},
        {"action_type": "investigate", "target_service": "api-gateway", "rationale": "checking recovery"},
        {"action_type": "resolve", "target_service": "payment-service", "rationale": "error rate back to normal"},
    ]
    for move in moves:
        observation = env.step(parse_action(move))
        assert observation.last_action_error is None
    breakdown = observation.breakdown or {}
    assert observation.done and breakdown["root_cause"] > 0 and breakdown["remediation"] > 0


def test_response_requires_a_rationale_and_resolve_is_verified() -> None:
    env = ServiceIncidentEnvironment()
    env.reset(task_id="medium_incident_triage", seed=0)
    refused = env.step(InspectLogs(target="order-service"))
    assert refused.last_action_error and "rationale" in refused.last_action_error
    early = env.step(Resolve(target="inventory-service", rationale="inventory-service status=down"))
    assert early.done and early.breakdown and early.breakdown["remediation"] == 0


def test_declaring_in_a_response_task_does_not_end_it_and_cannot_be_repeated() -> None:
    env = ServiceIncidentEnvironment()
    env.reset(task_id="easy_incident_triage", seed=0, incident_id="easy_002")
    first = env.step(Declare(target="user-service", severity="P1", rationale="OOMKilled"))
    assert not first.done
    again = env.step(Declare(target="redis-cache", severity="P1", rationale="second guess"))
    assert again.last_action_error and "already" in again.last_action_error


def test_a_disallowed_action_costs_a_step_and_says_why() -> None:
    env = ServiceIncidentEnvironment()
    env.reset(task_id="hard", seed=0, reward_mode="dense")
    refused = env.step(parse_action({"action": "restart", "target": "db"}))
    assert refused.step_count == 1
    assert refused.last_action_error and "not available" in refused.last_action_error
    answer = env.step(Declare(target=refused.services[0], severity="P1"))
    assert answer.breakdown is not None and answer.breakdown["waste"] == -scoring.SCORE_WASTE
    rca = ServiceIncidentEnvironment()
    rca.reset(task_id="rca_01", seed=0)
    final = rca.step(DeclareRootCauses(targets=["auth-service"]))
    assert final.done and final.breakdown and final.breakdown["root_cause"] == 0.4


def test_dense_mode_pays_a_fix_its_remediation_charges_a_useless_remedy_and_adds_up_to_the_score() -> None:
    span = scoring.SCORE_CEIL - scoring.SCORE_FLOOR
    env = ServiceIncidentEnvironment()
    env.reset(task_id="easy_incident_triage", seed=0, incident_id="easy_001", reward_mode="dense")
    healed = env.step(parse_action({"action": "rollback", "target": "payment-service", "rationale": "deploy"}))
    assert healed.reward == pytest.approx(scoring.SCORE_FLOOR + span * scoring.WEIGHTS["response"]["remediation"])
    wrong = env.step(parse_action({"action": "restart", "target": "postgres-db", "rationale": "db"}))
    # Against a look that shows no root instead, the useless restart pays its share of the score less.
    twin = ServiceIncidentEnvironment()
    twin.reset(task_id="easy_incident_triage", seed=0, incident_id="easy_001", reward_mode="dense")
    twin.step(parse_action({"action": "rollback", "target": "payment-service", "rationale": "deploy"}))
    look = twin.step(parse_action({"action": "inspect_metrics", "target": "postgres-db", "rationale": "db"}))
    assert (look.reward or 0.0) - (wrong.reward or 0.0) == pytest.approx(span * scoring.SCORE_WASTE)
    watch = env.step(InspectLogs(target="api-gateway", rationale="watch"))
    restored = env.step(Resolve(target="payment-service", rationale="recovered"))
    paid = [step.reward or 0.0 for step in (healed, wrong, watch, restored)]
    assert restored.done and restored.score is not None and sum(paid) == pytest.approx(restored.score, abs=1e-9)

    early = ServiceIncidentEnvironment()
    early.reset(task_id="easy_incident_triage", seed=0, incident_id="easy_001", reward_mode="dense")
    premature = early.step(Resolve(target="payment-service", rationale="hope"))
    assert premature.done and premature.reward == premature.score and premature.score < restored.score


def test_the_response_walkthrough_with_its_own_vocabulary_is_watched_to_recovery() -> None:
    """Investigate, roll back, resolve in the legacy vocabulary: restored, with any minutes watched on the clock."""
    env = ServiceIncidentEnvironment()
    env.reset(task_id="easy_incident_triage", seed=0, incident_id="easy_001")
    for move in (
        {"action_type": "investigate", "target_service": "payment-service", "rationale": "errors"},
        {"action_type": "rollback", "target_service": "payment-service", "rationale": "deploy"},
        {"action_type": "resolve", "target_service": "payment-service", "rationale": "fixed"},
    ):
        observation = env.step(parse_action(move))
        assert observation.last_action_error is None
    breakdown = observation.breakdown or {}
    assert observation.done and breakdown["remediation"] > 0 and "service restored" in observation.message
    watched = re.search(r"watching for (\d+) min", observation.message)
    assert watched and observation.step_count == 3 + int(watched.group(1))  # minutes watched are on the clock


def test_difficulty_named_root_cause_tasks_are_accepted_but_never_published() -> None:
    env = ServiceIncidentEnvironment()
    for alias in ("task_easy", "task_medium", "task_hard"):
        observation = env.reset(task_id=alias, seed=0)
        assert TASKS[observation.task_id].suite == "rca" and alias not in TASKS


@pytest.mark.parametrize("suite", ["triage", "response", "rca"])
def test_the_service_visible_at_reset_is_a_root_about_as_often_as_roots_are_among_services(suite: str) -> None:
    """Never showing a root at reset would be a tell: "the visible one is not it"."""
    incidents = load_suite(suite)
    shares = [len({f.service for f in i.faults}) / len(i.services) for i in incidents]
    visible = sum(i.initial_visible in {f.service for f in i.faults} for i in incidents)
    spread = math.sqrt(sum(p * (1 - p) for p in shares))
    assert visible > 0 and abs(visible - sum(shares)) <= 2 * spread, (visible, sum(shares))


@pytest.mark.parametrize(("task_id", "incident_id"), [(t, i) for t, i in curated() if TASKS[t].dashboard])
def test_the_dashboard_shows_values_not_a_verdict(task_id: str, incident_id: str) -> None:
    env = ServiceIncidentEnvironment()
    first = env.reset(task_id=task_id, seed=1, incident_id=incident_id)
    metrics = env.step(parse_action({"action": "inspect_metrics", "target": first.services[0], "rationale": "look"}))
    for observation in (first, metrics):
        assert set(observation.dashboard) == set(observation.services)
        for signals in observation.dashboard.values():
            assert re.fullmatch(r"p99 \d+ ms, error rate \d\.\d+, \d+\.\d req/s", signals), signals
    # The values are the metrics' own, at the same moment.
    shown = metrics.visible_metrics[first.services[0]]
    assert f"p99 {shown.p99_ms:.0f} ms, error rate {shown.error_rate:.4f}" in metrics.dashboard[first.services[0]]
