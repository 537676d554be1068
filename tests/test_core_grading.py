"""Grading rules: what the responder caused is not the incident, red herrings do not block credit,
partial answers earn partial credit, and a task's requirements are stated up front."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import msgspec
import pytest
from msgspec import structs

from service_incident import scoring
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.faults import FAULTS
from service_incident.generator import Knobs, generate
from service_incident.incidents import Distraction, Incident, load_suite
from service_incident.models import Action, Declare, parse_action
from service_incident.tasks import TASKS, resolve_incident
from service_incident.telemetry import Telemetry
from service_incident.world import P1_ERROR_RATE, World


def test_a_red_herring_failing_side_work_on_a_user_facing_service_does_not_block_restoration() -> None:
    incident = generate("easy", 7)
    facing = next(s.name for s in incident.services if s.user_facing)
    noisy = structs.replace(incident, distractions=[Distraction(kind="flaky_errors", service=facing, strength=1.0)])
    world = World(noisy)
    for fault in noisy.faults:
        world.remediate(FAULTS[fault.type].fix, fault.service)
    for _ in range(6):
        world.advance()
    # The failing job is background work: its own row of the metrics' breakdown shows it failing above
    # the paging threshold, while the service's requests (what users meet and pages watch) are served.
    rows = Telemetry(world, 0).metrics(facing, world.step).endpoints
    assert max(row.error_rate for row in rows if row.work == "job") > P1_ERROR_RATE
    assert world.states[facing].error_rate < P1_ERROR_RATE
    assert world.restored()


def _ledger(declared: set[str], evidence: set[str], severity_right: bool) -> scoring.Ledger:
    ledger = scoring.Ledger()
    ledger.looked(evidence)
    ledger.declare(frozenset(declared), severity_right)
    return ledger


def test_half_the_roots_earns_part_of_severity_evidence_and_efficiency() -> None:
    roots = frozenset({"db", "cache"})

    def graded(declared: set[str], evidence: set[str], severity_right: bool) -> tuple[float, dict[str, float]]:
        outcome = scoring.Outcome(
            grading="generated", roots=roots, steps=5, max_steps=20, ledger=_ledger(declared, evidence, severity_right)
        )
        return scoring.final_score(outcome)

    def score(declared: set[str], evidence: set[str], severity_right: bool) -> float:
        return graded(declared, evidence, severity_right)[0]

    full = score({"db", "cache"}, {"db", "cache"}, True)
    half_backed = score({"db"}, {"db"}, True)
    half_blind = score({"db"}, set(), True)
    wrong = score({"api"}, {"db", "cache"}, True)
    _, parts = graded({"db"}, {"db"}, True)
    # Severity, evidence and efficiency count for a partial answer, in proportion to it.
    assert parts["severity"] > 0 and parts["evidence"] > 0 and parts["efficiency"] > 0
    assert full > half_backed > half_blind > wrong
    # Evidence seen of a root the answer left out earns nothing.
    assert score({"db"}, {"db", "cache"}, True) == half_backed


def test_a_rationale_is_credited_only_for_facts_seen_in_a_named_root() -> None:
    """Quoting the page or a bystander is open to anyone who read the first observation; only facts
    from a view that showed a root cause named right count."""
    views = [
        ("api: error_rate=5.2% p99=812ms upstream timeout", "api"),
        ("db: pool_size=20 waiting=57 wait_ms=4100", "db"),
    ]

    def rationale(*cited: str) -> float:
        ledger = _ledger({"db"}, {"db"}, True)
        for text, service in views:
            ledger.observe(text, frozenset({service}))
        for text in cited:
            ledger.cite(text)
        outcome = scoring.Outcome(grading="response", roots=frozenset({"db"}), steps=3, max_steps=9, ledger=ledger)
        return scoring.final_score(outcome)[1]["rationale"]

    full = scoring.WEIGHTS["response"]["rationale"]
    assert rationale("api shows error_rate=5.2% and p99=812ms") == 0.0
    assert rationale("db pool_size=20 with waiting=57 and wait_ms=4100") == full
    # True facts from elsewhere dilute nothing; invented ones do.
    assert rationale("api error_rate=5.2%", "db pool_size=20 with waiting=57 and wait_ms=4100") == full
    assert 0 < rationale("db pool_size=20 with waiting=57 and wait_ms=4100 after 3 restarts=9") < full
    # Numbers count as engineers round them, times as clocks print them; not any number near one seen.
    views.append(("db: 2812.2 req/s, p99 1740 ms since 13:54:01", "db"))
    assert rationale("db at 2800 req/s and p99 1740 ms since 13:54") == full
    assert rationale("db at 2900 req/s and p99 1800 ms since 13:55") == 0.0
    # Round numbers quote nothing, and a percentage only a percentage.
    views.append(("db: 1.2 req/s, 5.3 ms, 99.2% cpu, 0.41% errors, 97 connections", "db"))
    assert rationale("db 1 2 5 10 100") == 0.0
    assert rationale("db cpu 99 and errors 0.41 and 97%") == 0.0


def test_the_page_alone_earns_no_rationale_credit() -> None:
    env = ServiceIncidentEnvironment()
    task = next(t for t in TASKS.values() if t.rationale_required and "declare" in t.actions)
    first = env.reset(task_id=task.id, seed=3)
    episode = env._episode
    assert episode is not None
    roots = sorted(episode.world.root_causes)
    page = " ".join(f"{a.service} {a.summary}" for a in first.alerts)
    env.step(
        parse_action(
            {
                "action": "declare",
                "target": roots[0],
                "additional_targets": roots[1:],
                "severity": "P1",
                "rationale": page,
            }
        )
    )
    last = env.step(parse_action({"action": "resolve", "target": roots[0], "rationale": page}))
    assert last.done
    assert last.breakdown is not None and last.breakdown["rationale"] == 0.0


def test_the_first_observation_states_that_rationales_are_required() -> None:
    env = ServiceIncidentEnvironment()
    required = next(t for t in TASKS.values() if t.rationale_required)
    assert "rationale" in env.reset(task_id=required.id, seed=1).message
    other = next(t for t in TASKS.values() if not t.rationale_required)
    assert "rationale" not in env.reset(task_id=other.id, seed=1).message


def _span(line: str) -> tuple[str, float, str]:
    found = re.fullmatch(r"\s*(\S+) .* (\d+)ms (\S.*)", line)
    assert found, line
    return found[1], float(found[2]), found[3]


PARTNER_FAULTS = {name for name, kind in FAULTS.items() if kind.partner_failure}


def test_trace_statuses_localize_but_do_not_name_the_fault() -> None:
    """A service's own spans fail in words several fault types share; only its client span to an
    outside party says that party failed (a timeout or its 429), as a production trace does."""
    statuses: dict[str, set[str]] = {}
    partners: dict[str, set[str]] = {}
    for seed in range(120):
        incident = generate("medium", seed)
        world = World(incident)
        telemetry = Telemetry(world, seed)
        roots = {f.service: f.type for f in incident.faults}
        for service in incident.names:
            for line in telemetry.traces(service, 0).splitlines():
                if not line.startswith("  "):  # a trace's heading or the breakdown by endpoint, not a span
                    continue
                name, took, status = _span(line)
                if " https://" in line:
                    if status != "ok":
                        partners.setdefault(status, set()).add(roots.get(name, "none"))
                # A caller's span shows what it observed of a failing call, not a status of its own.
                elif name in roots and status.startswith("error(") and "upstream" not in status:
                    statuses.setdefault(status, set()).add(roots[name])
                assert took >= 0
    # Every status a root's own span shows is shared by several fault types.
    assert statuses and all(len(types) >= 2 for types in statuses.values()), statuses
    # A client span to an outside party fails only where the failures are that party's.
    assert partners and all(types <= PARTNER_FAULTS for types in partners.values()), partners


def test_a_child_span_never_outlasts_its_parent() -> None:
    from service_incident.telemetry import Telemetry

    for seed in range(40):
        incident = generate("hard", seed)
        telemetry = Telemetry(World(incident), seed)
        for service in incident.names:
            stack: list[float] = []
            for line in telemetry.traces(service, 0).splitlines():
                if not line.startswith("  "):  # a trace's heading or the breakdown by endpoint
                    stack = []
                    continue
                depth = (len(line) - len(line.lstrip())) // 2
                took = _span(line)[1]
                del stack[depth - 1 :]
                if stack:
                    assert took <= stack[-1] + 1, (service, line)
                stack.append(took)


def _incidents(tier: str, count: int) -> list:
    return [generate(tier, seed) for seed in range(count)]


def test_disk_warnings_are_sometimes_real() -> None:
    from service_incident.telemetry import Telemetry

    on_root = on_bystander = 0
    for incident in _incidents("medium", 200) + _incidents("hard", 200):
        roots = {f.service for f in incident.faults if f.type == "disk_full"}
        for alert in Telemetry(World(incident), 1).alerts(0):
            if "/var/log" in alert.summary:
                on_root += alert.service in roots
                on_bystander += alert.service not in roots
    # A log volume filling up can be the fault itself, or a stale warning on a bystander.
    assert on_root > 0 and on_bystander > 0


def test_signature_line_counts_overlap_between_roots_and_red_herrings() -> None:
    from service_incident.faults import FAULTS
    from service_incident.telemetry.logs import distraction_lines, fault_lines

    root_counts: list[int] = []
    herring_counts: list[int] = []
    for incident in _incidents("hard", 150):
        world = World(incident)
        for index, fault in enumerate(incident.faults):
            strength = world.strengths(0)[index]
            if strength > 0:
                root_counts.append(len(fault_lines(world, FAULTS[fault.type], fault.service, index, strength)))
        for index, d in enumerate(incident.distractions):
            if d.kind in ("minor_fault", "flaky_errors", "misleading_log"):
                herring_counts.append(len(distraction_lines(world, d, index)))
    # A red herring can write as many signature lines as a root, and a root as few as a red herring.
    assert max(herring_counts) >= 3 and min(root_counts) <= 2


def _release_notes(seeds: int) -> dict[str, list[str]]:
    """The notes of releases that shipped a fault, of bystanders' recent releases, and of older routine
    releases, over generated incidents: the changes named between the release's head and its author."""
    from service_incident.telemetry import Telemetry, parse_time

    found: dict[str, list[str]] = {"culprit": [], "bystander": [], "routine": []}
    for seed in range(seeds):
        incident = generate("hard", seed)
        telemetry = Telemetry(World(incident), 1)
        shipped = {f.service for f in incident.faults if FAULTS[f.type].change}
        herrings = {d.service for d in incident.distractions if d.kind == "recent_deploy"}
        for service in shipped | herrings:
            entries = telemetry.deploys(service, 0).splitlines()
            for number, entry in enumerate(entries):
                note = entry.partition(": ")[2].rpartition(" by ")[0]
                age = parse_time(incident.started_at) - parse_time(entry.split()[0])
                # A release merging two changes names both.
                if number == 0 and age.days < 1:
                    found["culprit" if service in shipped else "bystander"] += note.split(", ")
                elif age.days >= 1:
                    found["routine"] += note.split(", ")
    return found


def test_culprit_bystander_and_routine_releases_read_alike() -> None:
    found = _release_notes(150)
    assert all(len(notes) >= 40 for notes in found.values()), {k: len(v) for k, v in found.items()}
    # Every note a release that broke something carries, everyday releases carry too.
    assert set(found["culprit"]) <= set(found["routine"]) | set(found["bystander"])
    for group, notes in found.items():
        # "routine release" is one note among many, as often in every group that broke nothing: not the
        # mark of a bystander. A culprit names the change that broke something (its files say so), so
        # "routine release" is at most the other change it merged.
        routine = sum("routine release" in note for note in notes) / len(notes)
        assert (0.0 if group == "culprit" else 0.03) <= routine <= 0.3, (group, routine)
        # No note dominates any group.
        assert max(Counter(notes).values()) / len(notes) < 0.25


def test_lines_fit_the_technology_and_callers_report_server_errors() -> None:
    from service_incident.telemetry import Telemetry
    from service_incident.topology import OPERATIONS

    datastore_lines = caller_lines = 0
    for incident in _incidents("hard", 150):
        world = World(incident)
        telemetry = Telemetry(world, 1)
        for service in incident.names:
            logs = telemetry.logs(service, 0)
            node = world.plan.by_name[service]
            if node.kind in OPERATIONS:
                datastore_lines += 1
                assert "webhook" not in logs and "nightly-export" not in logs, logs
            for line in logs.splitlines():
                if "upstream=" in line or "host=" in line:
                    caller_lines += 1
                    # A user-facing 5xx page counts what callers return: never a 401 they relay.
                    assert "status=401" not in line, line
            for dep in node.edges:
                if world.plan.by_name[dep.dep].kind in OPERATIONS:
                    assert f'upstream={dep.dep} err="upstream returned 503' not in logs
    assert datastore_lines and caller_lines


def test_no_pod_is_older_than_the_release_it_runs() -> None:
    from service_incident.telemetry import Telemetry, parse_time
    from service_incident.telemetry.deploys import canary_version, version

    checked = 0
    for incident in _incidents("medium", 80):
        world = World(incident)
        telemetry = Telemetry(world, 1)
        for service in incident.names:
            history = telemetry.deploys(service, 0).splitlines()[::-1]
            shipped = {line.split()[2].rstrip(":"): parse_time(line.split()[0]) for line in history}
            for pod in telemetry.pods(service, 0):
                # A live canary's pods run the newest release, the stable pods beside them the one before.
                release = canary_version(world, service, 0) if pod.canary else version(world, service, 0)
                assert release is not None and pod.started >= shipped[release], (incident.id, service, pod)
                checked += 1
    assert checked


def _seed_where(task_id: str, wanted: Callable[[Incident], bool]) -> int:
    return next(seed for seed in range(1000) if wanted(resolve_incident(TASKS[task_id], None, seed)))


def _declare_all(roots: list[str]) -> Action:
    return Declare(target=roots[0], additional_targets=roots[1:], severity="P1")


@pytest.mark.parametrize("remedy", FAULTS["memory_leak"].relief)
def test_a_remedy_that_buys_time_on_a_root_is_not_waste(remedy: str) -> None:
    seed = _seed_where("gen_easy", lambda incident: incident.faults[0].type == "memory_leak")
    env = ServiceIncidentEnvironment()
    root = next(f.service for f in resolve_incident(TASKS["gen_easy"], None, seed).faults)
    env.reset(task_id="gen_easy", seed=seed, reward_mode="dense")
    env.step(parse_action({"action": remedy, "target": root}))
    final = env.step(_declare_all([root]))
    assert final.breakdown is not None and final.breakdown["waste"] == 0
    assert final.postmortem is not None and f"eased {root}" in final.postmortem.remedies[0]
    assert "waste" not in final.postmortem.missed
    # The same remedy on a bystander changes nothing for the incident: waste.
    again = ServiceIncidentEnvironment()
    services = again.reset(task_id="gen_easy", seed=seed, reward_mode="dense").services
    bystander = next(s for s in services if s != root)
    again.step(parse_action({"action": remedy, "target": bystander}))
    wasted = again.step(_declare_all([root]))
    assert wasted.breakdown is not None and wasted.breakdown["waste"] == -scoring.SCORE_WASTE
    assert wasted.postmortem is not None and "changed nothing for the incident" in wasted.postmortem.remedies[0]


def test_a_remedy_is_judged_by_what_it_measurably_did_to_a_root() -> None:
    """Load shedding is no fix and no listed relief for memory exhaustion, yet it can ease the root:
    the verdict follows the world model, not the remedy's name."""
    verdicts = []
    for seed in range(10):
        incident = generate(Knobs(services=(4, 7), fault_types=("memory_exhaustion",), intensity=(0.6, 1.0)), seed)
        root = incident.faults[0].service
        world, untouched = World(incident), World(incident)
        world.advance()
        untouched.advance()
        world.remediate("shed_load", root)
        verdict = scoring.judge_remedy(world)
        steps = range(world.step, world.step + scoring.EFFECT_STEPS)
        drop = max(untouched.states_at(s)[root].error_rate - world.states_at(s)[root].error_rate for s in steps)
        faster = max(1 - world.states_at(s)[root].p99_ms / untouched.states_at(s)[root].p99_ms for s in steps)
        assert not verdict.heals
        assert (root in verdict.eased) == (drop >= scoring.EASED_ERROR or faster >= scoring.EASED_P99)
        verdicts.append(verdict.wasted)
    assert False in verdicts and True in verdicts


def test_remediation_is_credited_root_by_root_and_the_postmortem_says_so() -> None:
    seed = _seed_where("gen_hard", lambda incident: len(incident.faults) == 2)
    faults = resolve_incident(TASKS["gen_hard"], None, seed).faults
    roots = sorted(f.service for f in faults)
    fixed = faults[0]
    env = ServiceIncidentEnvironment()
    env.reset(task_id="gen_hard", seed=seed)
    env.step(parse_action({"action": FAULTS[fixed.type].fix, "target": fixed.service}))
    final = env.step(_declare_all(roots))
    weight = scoring.WEIGHTS["generated"]["remediation"]
    assert final.breakdown is not None and final.breakdown["remediation"] == pytest.approx(weight / 2, abs=1e-4)
    report = final.postmortem
    assert report is not None
    by_root = {r.service: r for r in report.root_causes}
    assert by_root[fixed.service].fixed and by_root[fixed.service].credited["remediation"] == pytest.approx(weight / 2)
    other = next(r for r in roots if r != fixed.service)
    assert not by_root[other].fixed and by_root[other].credited["remediation"] == 0
    assert f"not fixed: {other}" in report.missed["remediation"]
    # The per-root credit adds up to the breakdown's parts earned root by root.
    for part in ("root_cause", "evidence", "remediation"):
        total = sum(r.credited[part] for r in report.root_causes)
        assert total == pytest.approx(final.breakdown[part], abs=2e-4)
    assert all(r.named for r in report.root_causes)


def test_the_view_shown_at_reset_is_no_evidence_a_look_the_agent_takes_is() -> None:
    """Else an answer declared at once, by whoever knows it, would be backed by evidence whenever the
    service shown at reset is a root."""
    incident = next(i for i in load_suite("rca") if i.initial_visible in {f.service for f in i.faults})
    root = incident.initial_visible
    roots = sorted({f.service for f in incident.faults})
    blind = ServiceIncidentEnvironment()
    blind.reset(task_id=incident.id, seed=0)
    at_once = blind.step(parse_action({"action": "declare_rca", "targets": roots}))
    assert at_once.breakdown is not None and at_once.breakdown["evidence"] == 0
    looked = ServiceIncidentEnvironment()
    looked.reset(task_id=incident.id, seed=0)
    looked.step(parse_action({"action": "inspect_metrics", "target": root}))
    backed = looked.step(parse_action({"action": "declare_rca", "targets": roots}))
    assert backed.breakdown is not None and backed.breakdown["evidence"] > 0
    assert backed.score is not None and at_once.score is not None and backed.score > at_once.score


def test_the_postmortem_says_a_root_was_seen_whenever_its_evidence_was_credited() -> None:
    """A rationale that cites no fact falls short, and that must not hide that a view showed the root."""
    env = ServiceIncidentEnvironment()
    env.reset(task_id="easy_incident_triage", seed=0)
    assert env._episode is not None
    root = sorted(env._episode.world.root_causes)[0]
    for action in (
        {"action": "check_health", "target": root, "rationale": "look"},
        {"action": "declare", "target": root, "severity": "P1", "rationale": "it is broken"},
        {"action": "resolve", "target": root, "rationale": "done"},
    ):
        last = env.step(parse_action(action))
    assert last.done and last.postmortem is not None and "rationale" in last.postmortem.missed
    (cause,) = last.postmortem.root_causes
    assert cause.credited["evidence"] > 0 and cause.seen


def test_no_part_of_the_breakdown_is_negative_zero() -> None:
    """An episode without waste reports its waste as 0.0: JSON would print -0.0."""
    env = ServiceIncidentEnvironment()
    env.reset(task_id="easy", seed=3, incident_id="easy_001")
    last = env.step(Declare(target="db", severity="P0"))
    assert last.done and last.breakdown is not None and last.breakdown["waste"] == 0.0
    assert b"-0.0" not in msgspec.json.encode(last)
