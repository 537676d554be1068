"""Procedural incidents: every fault type, red-herring knobs, determinism and the frozen evaluation set."""

from __future__ import annotations

import random
import re
from collections import Counter
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest
from distribution_support import disagreements
from msgspec import structs

from service_incident import dataset, scoring
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.faults import FAULTS, TECHNOLOGIES
from service_incident.generator import (
    MAX_SERVICES,
    MIN_SERVICES,
    PRESETS,
    Knobs,
    fault_alone,
    generate,
    own_impact,
    pages_alone,
    traceable,
)
from service_incident.harness.agents import ExpertAgent, LoudestSignalAgent
from service_incident.harness.identifiability import survey, survivors
from service_incident.harness.solvability import accuracy
from service_incident.incidents import Incident
from service_incident.models import parse_action
from service_incident.tasks import TASKS, resolve_incident
from service_incident.telemetry import Telemetry, parse_time
from service_incident.telemetry.deploys import version_of
from service_incident.world import P1_ERROR_RATE, World, rubric, technology

EVAL_FILE = Path(__file__).resolve().parents[1] / "service_incident" / "incidents" / dataset.EVAL_FILE


def only(fault_type: str, **knobs: object) -> Knobs:
    return Knobs(services=(4, 7), fault_types=(fault_type,), intensity=(0.6, 1.0), **knobs)


def literal(template: str) -> str:
    return max(re.split(r"\{[^}]*\}", template.split(" ", 1)[1]), key=len).strip()


@pytest.mark.parametrize("fault_type", sorted(FAULTS))
def test_every_fault_type_is_generated_rendered_and_fixed(fault_type: str) -> None:
    incident = generate(only(fault_type), seed=3)
    (fault,) = incident.faults
    assert fault.type == fault_type
    world = World(incident)
    telemetry = Telemetry(world, seed=1)
    logs = telemetry.logs(fault.service, 0)
    phrasings = FAULTS[fault_type].phrasings(technology(incident, fault.service))
    assert any(all(literal(line) in logs for line in phrasing) for phrasing in phrasings), logs
    sick = world.states[fault.service]
    assert sick.fault_strength > 0 and sick.health != "ok"
    world.advance()
    assert world.remediate(FAULTS[fault_type].fix, fault.service) == "heals"
    for _ in range(3):
        world.advance()
    healed = world.states[fault.service]
    assert healed.fault_strength == 0 and healed.health == "ok"
    assert world.user_facing_impact()[0] < P1_ERROR_RATE
    assert world.restored()


_WRITE_REFUSAL = (
    "No space left",
    "Disk is full",
    "read-only",
    "--read-only",
    "disk resource limit",
    "publishers blocked",
)
_OTHER_TECH = {
    "postgres": ("MySQL", "InnoDB", "Redis"),
    "mysql": ("pg_wal", "PostgreSQL", "Redis"),
    "redis": ("MySQL", "pg_wal", "memcached"),
    "memcached": ("Redis", "CLUSTERDOWN", "pg_wal"),
    "kafka": ("rabbit@", "AMQP"),
    "rabbitmq": ("broker because", "partition="),
    "jvm": ("panic=", "Traceback", "goroutines"),
    "go": ("java.", "Traceback", "JavaScript"),
    "python": ("java.", "panic=", "JavaScript"),
    "node": ("java.", "panic=", "Traceback"),
}


@pytest.mark.parametrize("fault_type", sorted(FAULTS))
def test_every_phrasing_fits_its_technology_and_write_refusal_means_data_at_risk(fault_type: str) -> None:
    fault = FAULTS[fault_type]
    for kind in fault.kinds:
        for tech in TECHNOLOGIES[kind]:
            for phrasing in fault.phrasings(tech):
                text = "\n".join(phrasing)
                assert not any(word in text for word in _OTHER_TECH.get(tech, ())), (fault_type, tech, text)
                refuses = any(word in text for word in _WRITE_REFUSAL)
                assert refuses == fault.data_at_risk(kind), (fault_type, kind, tech, text)


@pytest.mark.parametrize("difficulty", list(PRESETS))
def test_labels_agree_with_the_rubric_and_with_what_metrics_show(difficulty: str) -> None:
    for seed in range(15):
        record_incident = dataset.training_incident(difficulty, seed)
        world = World(record_incident)
        telemetry = Telemetry(world, seed)
        error_rate, p99 = world.user_facing_impact(0)
        facing = [s.name for s in record_incident.services if s.user_facing]
        shown = [telemetry.metrics(name, 0) for name in facing]
        # What the rubric is applied to is what the metrics of the user-facing services show, within noise.
        assert max(m.error_rate for m in shown) == pytest.approx(error_rate, rel=0.05, abs=1e-3)
        assert max(m.p99_ms for m in shown) == pytest.approx(p99, rel=0.05)
        assert dataset.labels(record_incident).severity_at_page == rubric(error_rate, p99, world.data_at_risk(0))


@pytest.mark.parametrize("fault_type", [t for t, f in FAULTS.items() if f.relief])
def test_palliative_remedy_gives_relief_then_relapse(fault_type: str) -> None:
    incident = generate(only(fault_type), seed=5)
    root = incident.faults[0].service
    world = World(incident)
    before = world.states[root].fault_strength
    world.advance()
    assert world.remediate(FAULTS[fault_type].relief[0], root) == "relief"
    assert world.states[root].fault_strength < before
    for _ in range(3):
        world.advance()
    assert world.states[root].fault_strength == pytest.approx(before)
    assert not world.restored()


def test_wrong_remedies_cost_what_they_say() -> None:
    incident = generate(only("bad_deployment"), seed=9)
    root = incident.faults[0].service
    bystander = next(s.name for s in incident.services if s.name != root and s.kind != "database")
    world = World(incident)
    world.advance()
    calm = world.states[bystander]
    # A restart of a service that is not the cause disrupts it for the step it restarts in: a rolling
    # restart, a few percent of requests, not an outage.
    severity = world.severity()
    assert world.remediate("restart", bystander) == "disruption"
    disrupted = world.states[bystander].error_rate
    assert calm.error_rate + 0.02 < disrupted < 0.2
    # The responder's own disruption is not the incident's impact: the graded severity ignores it.
    untouched = World(incident)
    untouched.advance()
    assert world.graded_impact(world.step) == pytest.approx(untouched.user_facing_impact())
    assert world.severity() == severity
    world.advance()
    assert world.states[bystander].error_rate < disrupted
    # A rollback where nothing shipped, and scaling the wrong service, change nothing for users.
    impact = world.user_facing_impact()
    assert world.remediate("rollback", bystander) == "no_effect"
    assert world.remediate("scale_up", bystander) == "no_effect"
    # New replicas join over the step they are ordered in: half the added capacity serves then, all of it after.
    assert world.capacity(bystander) == 1.5
    assert world.capacity(bystander, world.step + 1) == 2.0
    assert world.user_facing_impact() == pytest.approx(impact, rel=0.1)
    # The right fix on the wrong target does nothing either.
    assert world.remediate("rollback", next(s.name for s in incident.services if s.name not in {root})) == "no_effect"


@pytest.mark.parametrize("remedy", ["restart", "rollback", "scale_up", "escalate"])
def test_a_remedy_on_a_bystander_costs_reward_and_score(remedy: str) -> None:
    roots = {f.service for f in resolve_incident(TASKS["gen_easy"], None, 4).faults}
    root = next(iter(roots))
    answer = {"action": "declare", "target": root, "severity": "P0", "additional_targets": []}
    returns = []
    for remedies in ([], [remedy]):
        env = ServiceIncidentEnvironment()
        obs = env.reset(task_id="gen_easy", seed=4, reward_mode="dense")
        bystander = next(s for s in obs.services if s not in roots)
        steps = [env.step(parse_action({"action": name, "target": bystander})) for name in remedies]
        assert all(step.last_action_error is None for step in steps)
        final = env.step(parse_action(answer))
        assert final.breakdown is not None and final.breakdown["waste"] == -scoring.SCORE_WASTE * len(remedies)
        returns.append(sum(step.reward or 0.0 for step in [*steps, final]))
    # A step more and a wasted action: the return is the score, less both.
    assert returns[0] - returns[1] >= scoring.SCORE_WASTE * (scoring.SCORE_CEIL - scoring.SCORE_FLOOR) - 1e-9


def test_faults_worsen_on_schedule_and_telemetry_follows() -> None:
    incident = generate(Knobs(services=(5, 6), fault_types=("traffic_spike",), intensity=(0.3, 0.4)), seed=2)
    fault = msgspec.structs.replace(incident.faults[0], intensify_at=2, peak=1.0)
    incident = msgspec.structs.replace(incident, faults=[fault])
    world = World(incident)
    early = world.states_at(1)[fault.service]
    late = world.states_at(2)[fault.service]
    assert late.fault_strength > early.fault_strength and late.latency_ms > early.latency_ms
    telemetry = Telemetry(world, seed=0)
    assert telemetry.metrics(fault.service, 2) != telemetry.metrics(fault.service, 1)


def test_topologies_span_the_catalogue_sizes() -> None:
    sizes = {len(generate(difficulty, seed).services) for difficulty in PRESETS for seed in range(40)}
    assert min(sizes) == MIN_SERVICES and max(sizes) == MAX_SERVICES
    for difficulty in ("hard", "expert"):
        low, high = PRESETS[difficulty].faults
        counts = Counter(len(generate(difficulty, seed).faults) for seed in range(80))
        # Every count the preset allows, the lowest the least likely.
        assert set(counts) == set(range(low, high + 1)), (difficulty, counts)
        assert counts[low] < min(counts[n] for n in range(low + 1, high + 1)), (difficulty, counts)
    incident = generate("expert", 7)
    assert len({f.service for f in incident.faults}) == len(incident.faults)
    assert any(s.user_facing for s in incident.services)


def distracted(kind: str) -> Incident:
    for seed in range(200):
        incident = generate(Knobs(services=(6, 9), red_herrings=6), seed)
        if any(d.kind == kind and (d.strength or 0) > 0.6 for d in incident.distractions):
            return incident
    raise AssertionError(kind)


def test_no_red_herrings_without_the_knob() -> None:
    assert all(not generate("easy", seed).distractions for seed in range(30))
    assert all(len(generate("hard", seed).distractions) >= 2 for seed in range(30))


def test_red_herrings_show_up_as_specified() -> None:
    noisy = distracted("noisy_neighbour")
    service = next(d.service for d in noisy.distractions if d.kind == "noisy_neighbour")
    telemetry = Telemetry(World(noisy), 0)
    # A batch job keeps its service busy, visibly in the history, below the CPU page.
    assert telemetry.metrics(service, 0).history[-1].cpu_pct >= 60
    roots = {f.service for f in noisy.faults}
    assert service in roots or not any(a.service == service and a.signal == "cpu_pct" for a in telemetry.alerts(0))
    # Alone in the world, its neighbour's batch fails none of its callers' calls.
    alone = structs.replace(noisy, faults=[])
    assert World(alone, shared=False).states[service].call_failure < 0.05

    misled = distracted("misleading_log")
    herring = next(d for d in misled.distractions if d.kind == "misleading_log")
    text = Telemetry(World(misled), 0).logs(herring.service, 0)
    assert f"upstream={herring.blames}" in text and herring.blames not in {f.service for f in misled.faults}

    deploy = distracted("recent_deploy")
    service = next(d.service for d in deploy.distractions if d.kind == "recent_deploy")
    history = Telemetry(World(deploy), 0).deploys(service, 0).splitlines()
    # The bystander's release is the newest, shipped shortly before the page, of the release it runs.
    shipped = parse_time(history[0].split()[0])
    assert timedelta(0) < parse_time(deploy.started_at) - shipped < timedelta(hours=1)
    assert history[0].split()[2].rstrip(":") == version_of(deploy.id, service)[0]

    flaky = distracted("flaky_errors")
    herring = next(d for d in flaky.distractions if d.kind == "flaky_errors")
    alone = structs.replace(flaky, faults=[], distractions=[herring])
    telemetry = Telemetry(World(alone, shared=False), 0)
    rows = {row.endpoint: row for row in telemetry.metrics(herring.service, 0).endpoints}
    failing = [row for row in rows.values() if row.error_rate >= 0.03]
    # Its failures are one background job's: that job's row fails, its lines name it, requests are fine.
    assert failing and {row.work for row in failing} == {"job"}
    assert any(f"job={row.endpoint}" in telemetry.logs(herring.service, 0) for row in failing)
    assert all(row.error_rate < 0.01 for row in rows.values() if row.work == "request")
    assert not [a for a in telemetry.alerts(0) if a.service == herring.service and a.signal != "disk_pct"]

    minor = distracted("minor_fault")
    herring = next(d for d in minor.distractions if d.kind == "minor_fault")
    assert herring.fault in FAULTS and herring.service not in {f.service for f in minor.faults}
    assert FAULTS[herring.fault].termination is None and not FAULTS[herring.fault].loses_writes

    stale = distracted("stale_alert")
    service = next(d.service for d in stale.distractions if d.kind == "stale_alert")
    disk = next(a for a in Telemetry(World(stale), 0).alerts(0) if a.service == service and a.signal == "disk_pct")
    # A stale warning is chronic: firing for hours, on the minute, as every page's `since` is.
    assert (parse_time(stale.started_at) - parse_time(disk.since)).total_seconds() >= 2 * 3600
    assert disk.since.endswith(":00Z") and disk.level == "warning"


def test_lag_and_log_gaps_change_what_is_observed() -> None:
    incident = generate("hard", 11)
    lagging = Telemetry(World(incident), 0)
    assert incident.metrics_lag == 1 and lagging.lagged(3) == 2
    gapped = generate(Knobs(services=(8, 10), log_gaps=4), 5)
    assert gapped.log_gaps
    for service, gap in gapped.log_gaps.items():
        text = Telemetry(World(gapped), 0).logs(service, 0)
        if gap == "empty":
            assert text.startswith("(no log lines")
        else:
            assert len(text.splitlines()) > 0


def test_generation_is_deterministic_and_ignores_global_state() -> None:
    first = msgspec.json.encode(generate("expert", 1234))
    random.seed(99)
    random.random()
    assert msgspec.json.encode(generate("expert", 1234)) == first
    assert msgspec.json.encode(generate("expert", 1235)) != first


def test_dynamics_are_deterministic() -> None:
    def run() -> list[bytes]:
        env = ServiceIncidentEnvironment()
        obs = env.reset(task_id="gen_hard", seed=77)
        agent, frames = ExpertAgent(), [msgspec.json.encode(obs)]
        while not obs.done:
            obs = env.step(agent.act(obs))
            frames.append(msgspec.json.encode(obs))
        return [f.replace(obs.metadata["episode_id"].encode(), b"") for f in frames]

    assert run() == run()


def test_frozen_evaluation_set_regenerates_byte_for_byte() -> None:
    assert dataset.encode(dataset.build()) == EVAL_FILE.read_bytes()
    records = dataset.decode(EVAL_FILE.read_bytes())
    assert len(records) == dataset.EVAL_INCIDENTS * len(PRESETS)
    assert all(record.seed < dataset.TRAIN_SEED_BASE for record in records)


@pytest.mark.parametrize("difficulty", ["hard", "expert"])
def test_every_root_moves_something_of_its_own(difficulty: str) -> None:
    """Each fault alone moves a metric, its callers' errors or latency, or a page: a root with no impact
    of its own (a cache evicting a little, a pool starving slightly) is never generated."""
    for seed in [*range(200), 7007]:
        incident = dataset.training_incident(difficulty, seed)
        assert all(own_impact(incident, index) for index in range(len(incident.faults))), (seed, incident.faults)


@pytest.mark.parametrize("difficulty", ["hard", "expert"])
def test_every_root_pages_alone_or_lies_at_the_end_of_failing_calls_from_a_page(difficulty: str) -> None:
    """The label principle's root rule, each fault alone in the world: a traffic surge whose errors
    come only from another root's failures is no root of its own, and is never generated."""
    checked = 0
    for seed in range(150):
        incident = dataset.training_incident(difficulty, seed)
        for index in range(len(incident.faults)):
            assert pages_alone(fault_alone(incident, index)), (seed, incident.faults[index])
            checked += 1
    assert checked > 150


def test_a_surge_that_pages_nothing_alone_is_no_root() -> None:
    """A mild surge on a service that absorbs it pages nothing alone (beside a broken queue its
    service would page, through the queue's failures): it fails the rule, a strong one passes."""
    incident = dataset.training_incident("expert", 0)
    app = next(s.name for s in incident.services if s.user_facing and s.kind != "gateway")
    surge = structs.replace(incident.faults[0], service=app, type="traffic_spike", intensity=0.1, intensify_at=None)
    mild = structs.replace(incident, faults=[surge])
    assert own_impact(mild, 0)  # its request rate moves: something to see, but no page of its own
    assert not pages_alone(fault_alone(mild, 0))
    strong = structs.replace(mild, faults=[structs.replace(surge, intensity=1.0)])
    assert pages_alone(fault_alone(strong, 0))


def test_a_fault_too_weak_to_show_has_no_impact_of_its_own() -> None:
    incident = dataset.training_incident("expert", 0)
    faint = structs.replace(
        incident, faults=[structs.replace(incident.faults[0], type="cache_eviction", intensity=0.05, intensify_at=None)]
    )
    cache = next(s.name for s in incident.services if s.kind == "cache")
    faint = structs.replace(faint, faults=[structs.replace(faint.faults[0], service=cache)])
    assert not own_impact(faint, 0)
    assert own_impact(structs.replace(faint, faults=[structs.replace(faint.faults[0], intensity=1.0)]), 0)


def test_every_curated_and_frozen_root_is_paged_or_traced_from_a_page() -> None:
    """The label principle's root rule holds for the hand-written incidents too: each root pages alone
    or lies at the end of failing calls from a paged user-facing service."""
    incidents = [resolve_incident(task, i, 0) for task in TASKS.values() if not task.generated for i in task.incidents]
    incidents += dataset.frozen().values()
    for incident in incidents:
        assert traceable(incident, World(incident).states_at(0)), incident.id


def test_pages_watch_symptoms_not_an_internal_services_errors() -> None:
    """An internal service pages only on saturation; a failing internal root is found from the user-facing
    pages its failures cause, by looking (its error rate is on its dashboard)."""
    env = ServiceIncidentEnvironment()
    unpaged_failing_roots = 0
    for seed in range(40):
        obs = env.reset(task_id="gen_hard", seed=seed)
        facing = {card.name for card in obs.topology if card.user_facing}
        internal_pages = {a.signal for a in obs.alerts if a.service not in facing}
        assert internal_pages <= {"cpu_pct", "memory_pct", "disk_pct"}, (seed, internal_pages)
        incident = dataset.training_incident("hard", seed)
        states = World(incident).states_at(0)
        paged = {a.service for a in obs.alerts}
        unpaged_failing_roots += sum(
            f.service not in facing and f.service not in paged and states[f.service].error_rate >= 0.10
            for f in incident.faults
        )
    assert unpaged_failing_roots


def test_training_and_evaluation_incidents_are_disjoint() -> None:
    env = ServiceIncidentEnvironment()
    trained = {env.reset(task_id="gen_medium", seed=s).incident_id for s in range(dataset.EVAL_INCIDENTS)}
    assert not trained & set(dataset.eval_ids("medium"))


@pytest.mark.parametrize("difficulty", list(PRESETS))
def test_labels_are_identifiable_from_the_telemetry(difficulty: str) -> None:
    strict, loose, _ = survey([dataset.training_incident(difficulty, seed) for seed in range(25)])
    assert strict >= 0.95 and loose >= strict


def test_the_identifiability_check_catches_a_fault_that_shows_nowhere() -> None:
    incident = dataset.training_incident("easy", 3)
    (fault,) = incident.faults
    # A root whose telemetry matches a healthy service's cannot be told apart from another.
    assert survivors(incident) == []
    weak = msgspec.structs.replace(
        incident,
        faults=[msgspec.structs.replace(fault, type="upstream_rate_limit", intensity=0.001, lead=0)],
        log_gaps={fault.service: "empty"},
    )
    assert survivors(weak)


def test_evaluation_set_represents_training() -> None:
    """Sizes, fault counts and mix, unpaged roots and severities of the frozen set, against training."""
    records = dataset.decode(EVAL_FILE.read_bytes())
    for difficulty in PRESETS:
        frozen = [r.incident for r in records if r.difficulty == difficulty]
        trained = [dataset.training_incident(difficulty, seed) for seed in range(150)]
        assert not disagreements(frozen, trained), difficulty


def test_loudest_signal_gets_worse_with_difficulty() -> None:
    """Guessing the loudest page finds the root where one fault pages alone, and fails where faults are
    weaker, several, and share the pager with red herrings and everyday noise (hard and expert alike:
    herrings there are harmless, so the expert tier's extra difficulty is its extra roots, not louder
    herrings)."""
    easy, medium, hard, expert = (accuracy(LoudestSignalAgent, f"gen_{d}", seeds=80)[0] for d in PRESETS)
    assert min(easy, medium) >= 0.7 and max(hard, expert) <= 0.35, (easy, medium, hard, expert)
