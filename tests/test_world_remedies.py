"""Remedies that act where a fault lives: an escalation pages a provider that acts only on what it owns,
a deadlock's blocking session is shown and ended, clock skew is fixed at the node, a queue reports
its own diagnostics, and severity is graded at the moment the rubric states."""

from __future__ import annotations

import re

import pytest

from service_incident import scoring
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.faults import FAULTS, RECORD_KINDS, TECHNOLOGIES
from service_incident.generator import Knobs, generate
from service_incident.harness.llm import system_prompt
from service_incident.incidents import Incident
from service_incident.integrations.prompts import instructions
from service_incident.integrations.tools import TOOLS_BY_NAME
from service_incident.models import parse_action
from service_incident.tasks import TASKS, resolve_incident
from service_incident.telemetry import Telemetry, clock, format_time
from service_incident.telemetry.schemas import OWN_TABLES
from service_incident.world import World
from service_incident.world.rubric import SEVERITY_MOMENT, SEVERITY_RUBRIC

_ACK = re.compile(
    r"^Escalated (\S+) to (.+?): ticket PRV-\d{4} acknowledged at (\S+); they act at (\S+) on what they own"
)


def _incident(fault_type: str, kind: str | None = None) -> Incident:
    for seed in range(200):
        incident = generate(Knobs(services=(6, 9), fault_types=(fault_type,)), seed)
        if kind is None or incident.service(incident.faults[0].service).kind == kind:
            return incident
    raise AssertionError(f"no {fault_type} on a {kind}")


def _seed(task: str, wanted: set[str]) -> tuple[int, str]:
    """A seed of a task whose only fault is of one of the wanted types, and that fault's service."""
    for seed in range(400):
        faults = resolve_incident(TASKS[task], None, seed).faults
        if len(faults) == 1 and faults[0].type in wanted:
            return seed, faults[0].service
    raise AssertionError(f"no {task} seed with a fault of {wanted}")


def _escalated(task: str, wanted: set[str]) -> tuple[ServiceIncidentEnvironment, str, str]:
    seed, root = _seed(task, wanted)
    env = ServiceIncidentEnvironment()
    env.reset(task_id=task, seed=seed)
    obs = env.step(parse_action({"action": "escalate", "target": root}))
    assert obs.last_action_error is None
    return env, root, obs.message


@pytest.mark.parametrize("task", ["gen_easy", "gen_medium"])
def test_an_escalation_is_acknowledged_and_acts_only_on_what_the_provider_owns(task: str) -> None:
    owned = {name for name, fault in FAULTS.items() if "escalate" in (fault.fix, *fault.acceptable)}
    # A provider owns its quota and its outage; a service's own certificate is renewed, not escalated.
    assert owned == {"upstream_rate_limit", "external_dependency_failure"}
    messages = []
    for wanted, heals in ((owned, True), (set(FAULTS) - owned, False)):
        env, root, message = _escalated(task, wanted)
        episode = env._episode
        assert episode is not None
        world, step = episode.world, episode.step
        # Who was paged and when they act, in the next observation.
        ack = _ACK.match(message)
        assert ack, message
        assert ack.group(1) == root
        assert ack.group(3) == format_time(clock(world, step))
        assert ack.group(4) == format_time(clock(world, step + 1))
        messages.append(ack)
        # The provider acts a step later, and only on a fault it owns.
        assert world.history[-1].outcome == ("heals" if heals else "no_effect")
        assert world.healed_at(0) == (step + 1 if heals else None)
        untouched = World(world.incident)
        for later in range(step, step + 4):
            assert (world.strengths(later)[0] < untouched.strengths(later)[0]) == (heals and later > step)
        if not heals:
            assert world.user_facing_impact(step + 2) == untouched.user_facing_impact(step + 2)
    # The acknowledgement reads the same whatever is wrong: it tells nothing of the fault.
    owned_tail, other_tail = (m.string[m.end() :] for m in messages)
    assert owned_tail == other_tail


def test_writes_the_rubric_counts_lost_are_a_read_only_or_full_store_never_a_rolled_back_transaction() -> None:
    # The rubric tells agents which refused writes make a P0; each fault that counts must read that way
    # in its store's own diagnostics, and a deadlock, whose victims are rolled back, must not count.
    assert "read-only or out of space" in SEVERITY_RUBRIC and "deadlock" in SEVERITY_RUBRIC
    counted: set[str] = set()
    for name, fault in FAULTS.items():
        for kind in RECORD_KINDS:
            if not fault.data_at_risk(kind):
                continue
            counted.add(name)
            reports = fault.db_report or {}
            for technology in TECHNOLOGIES[kind]:
                report = reports.get(technology, reports.get("*", ""))
                assert re.search(r"read_only=on|100% used", report), (name, technology, report)
    assert counted and "db_deadlock" not in counted and "db_deadlock" in FAULTS


def test_a_deadlock_names_its_blocker_and_only_clients_of_the_database() -> None:
    for seed in range(12):
        incident = generate(Knobs(services=(6, 12), fault_types=("db_deadlock",)), seed)
        db = incident.faults[0].service
        users = {s.name for s in incident.services if db in s.depends_on}
        report = Telemetry(World(incident), seed=seed).db_query(db, 0)
        blocker = re.search(
            r"blocking session: pid (\d+) client=(\S+) .* open (\d+)s, last statement: UPDATE (\w+)", report
        )
        assert blocker, report
        client = blocker.group(2)
        assert client in users
        own = OWN_TABLES[incident.service(client).kind]
        # The statements name the client's own tables, and no service that does not use the database.
        assert set(re.findall(r"UPDATE (\w+)", report)) <= set(own), report
        others = {s.name for s in incident.services} - users - {db}
        assert not any(re.search(rf"\b{re.escape(name)}\b", report) for name in others), report


def test_ending_the_blocking_session_ends_a_deadlock_without_disrupting_callers() -> None:
    incident = _incident("db_deadlock")
    db = incident.faults[0].service
    callers = [s.name for s in incident.services if db in s.depends_on]
    worlds = {}
    for remedy in ("terminate_blocker", "restart"):
        world = worlds[remedy] = World(incident)
        world.advance()
        assert world.remediate(remedy, db) == "heals"
        assert scoring.fixed_roots(world) == {db}
    untouched = World(incident)
    ended, restarted = worlds["terminate_blocker"], worlds["restart"]
    # Restarting the primary ends the deadlock too, but its callers fail while it comes back.
    for caller in callers:
        assert restarted.states_at(1)[caller].error_rate > ended.states_at(1)[caller].error_rate
    assert restarted.user_facing_impact(1)[0] > ended.user_facing_impact(1)[0]
    # Ending the blocker disrupts nothing: no caller fares worse than with the deadlock left alone.
    for caller in callers:
        assert ended.states_at(1)[caller].error_rate <= untouched.states_at(1)[caller].error_rate
    ended.advance()
    assert ended.strengths(2) == (0.0,)
    report = Telemetry(ended, seed=0).db_query(db, 2)
    assert "locks waiting 0" in report and "blocking session" not in report


def test_clock_skew_is_fixed_at_the_node_not_by_a_pod_restart() -> None:
    incident = _incident("clock_skew")
    root = incident.faults[0].service
    world = World(incident)
    telemetry = Telemetry(world, seed=3)
    node = telemetry.health(root, 0)
    assert re.search(r"^node ip-\S+: Ready; clock unsynchronized: chronyd: no selectable sources", node, re.M), node
    world.advance()
    # Containers share their node's clock: new pods keep the offset.
    assert world.remediate("restart", root) == "disruption"
    world.advance()
    assert world.strengths(2)[0] > 0 and not scoring.fixed_roots(world)
    assert "clock unsynchronized" in telemetry.health(root, 2)
    assert world.remediate("resync_clock", root) == "heals"
    world.advance()
    assert world.strengths(3) == (0.0,) and scoring.fixed_roots(world) == {root}
    assert re.search(r"^node ip-\S+: Ready; clock synchronized", telemetry.health(root, 3), re.M)


@pytest.mark.parametrize(("fault_type", "rejected"), [("disk_full", True), ("crash_loop", False)])
def test_a_queue_fault_shows_in_its_diagnostics(fault_type: str, rejected: bool) -> None:
    incident = _incident(fault_type, "queue")
    queue = incident.faults[0].service
    report = Telemetry(World(incident), seed=1).db_query(queue, 0)
    assert "consumer lag" in report and "in-sync replicas" in report, report
    writes = re.search(r"rejected writes (\d+) in the last minute", report)
    assert writes, report
    # Rejected writes show exactly where the rubric counts writes of record lost.
    assert (int(writes.group(1)) > 0) == rejected == FAULTS[fault_type].data_at_risk("queue")


def test_run_db_query_reads_a_queue_and_a_cache_and_refuses_an_application() -> None:
    for seed in range(100):
        incident = resolve_incident(TASKS["gen_hard"], None, seed)
        kinds = {s.kind: s.name for s in incident.services}
        if "queue" in kinds and "cache" in kinds and all(f.service != kinds["queue"] for f in incident.faults):
            break
    env = ServiceIncidentEnvironment()
    env.reset(task_id="gen_hard", seed=seed)
    obs = env.step(parse_action({"action": "run_db_query", "target": kinds["queue"]}))
    assert obs.last_action_error is None
    report = obs.visible_db[kinds["queue"]]
    assert re.fullmatch(
        r"consumer lag \d+ messages on \S+ \(group \S+-consumers\); in-sync replicas 3/3; disk \d+% used; "
        r"rejected writes 0 in the last minute",
        report,
    ), report
    obs = env.step(parse_action({"action": "run_db_query", "target": kinds["cache"]}))
    assert obs.last_action_error is None and re.search(r"hits? ratio", obs.visible_db[kinds["cache"]])
    obs = env.step(parse_action({"action": "run_db_query", "target": kinds["gateway"]}))
    assert obs.last_action_error and "not a database, queue or cache" in obs.last_action_error


def test_severity_s_moment_is_stated_in_the_rubric_the_prompts_and_the_tool_schemas() -> None:
    assert SEVERITY_MOMENT in SEVERITY_RUBRIC
    assert SEVERITY_MOMENT in TOOLS_BY_NAME["declare"].input_schema["properties"]["severity"]["description"]
    assert SEVERITY_MOMENT in instructions(TASKS["gen_hard"])
    assert SEVERITY_MOMENT in system_prompt("investigate", ["declare"])


def _rising() -> tuple[int, int, str, str]:
    """A gen_hard seed and a step at which the graded severity rises: the severity the answer's
    observation showed, and the one the minute after it would."""
    for seed in range(300):
        env = ServiceIncidentEnvironment()
        env.reset(task_id="gen_hard", seed=seed)
        episode = env._episode
        assert episode is not None
        world, lag = episode.world, episode.telemetry.lagged
        for step in range(1, 8):
            shown, next_minute = world.severity(lag(step)), world.severity(lag(step + 1))
            if shown != next_minute:
                return seed, step, shown, next_minute
    raise AssertionError("no gen_hard incident whose severity rises in its first steps")


def test_severity_is_graded_on_what_the_answer_s_observation_showed() -> None:
    """The answer chosen from the observation of step k is graded on the worst impact from the page
    to the minute the metrics had delivered then, not on the minute the answer itself takes."""
    seed, step, shown, next_minute = _rising()
    credited = {}
    for severity in (shown, next_minute):
        env = ServiceIncidentEnvironment()
        obs = env.reset(task_id="gen_hard", seed=seed)
        for _ in range(step):
            obs = env.step(parse_action({"action": "inspect_logs", "target": obs.services[0]}))
        roots = sorted({f.service for f in resolve_incident(TASKS["gen_hard"], None, seed).faults})
        declare = {"action": "declare", "target": roots[0], "additional_targets": roots[1:], "severity": severity}
        obs = env.step(parse_action(declare))
        assert obs.done and obs.breakdown is not None and obs.postmortem is not None
        credited[severity] = obs.breakdown["severity"]
        assert obs.postmortem.severity == shown
        episode = env._episode
        assert episode is not None
        last = format_time(clock(episode.world, episode.telemetry.lagged(step)))
        assert f"from the page to {last}" in obs.postmortem.severity_basis
    assert credited[shown] > 0 and credited[next_minute] == 0
