"""The world package's seams: the rubric stands alone, a plan is whole and fixed before any world uses it,
and the constants the world shares with telemetry agree with what telemetry renders."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
from msgspec import structs

from service_incident.generator import PRESETS, generate
from service_incident.herrings import HERRINGS
from service_incident.incidents import Incident
from service_incident.telemetry import Telemetry
from service_incident.world import HISTORY_MINUTES, World, fault_lead
from service_incident.world.draws import pack
from service_incident.world.episode import SCALE_UP_FACTOR
from service_incident.world.lognormal import exceed
from service_incident.world.plan import plan_of
from service_incident.world.simulation import ServiceState, calm_states

SIMULATOR = ("episode", "plan", "simulation", "course", "steps", "traffic")


def test_reading_the_rubric_loads_no_simulator() -> None:
    # The readers of the rubric: the tool schemas import it, and the rubric module itself.
    code = (
        "import sys\n"
        "import service_incident.integrations.tools\n"
        "from service_incident.world.rubric import SEVERITY_RUBRIC, rubric\n"
        "assert rubric(0.5, 0.0, False) == 'P0' and 'P1' in SEVERITY_RUBRIC\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('service_incident.world'))))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert "service_incident.world.rubric" in loaded
    assert not [m for m in loaded if m.rpartition(".")[2] in SIMULATOR], loaded


@pytest.mark.parametrize("difficulty", ["easy", "expert"])
def test_a_plan_is_whole_before_any_world_and_no_world_changes_it(difficulty: str) -> None:
    incident = generate(PRESETS[difficulty], seed=91)
    plan = plan_of(incident)
    names = {s.name for s in incident.services}
    # Built whole: the calm baseline of every service is there before a world is made.
    assert set(plan.calm) == set(plan.healthy_p99) == names
    assert all(plan.healthy_p99[name] == plan.calm[name].p99_ms for name in names)
    before = copy.deepcopy((plan.calm, plan.healthy_p99, plan.healthy_rps))
    world = World(incident)
    assert world.plan is plan
    for remedy in ("restart", "scale_up", "shed_load", "rollback"):
        world.remediate(remedy, incident.faults[0].service)
        world.advance()
        world.states_at(world.step)
    world.severity()
    assert (plan.calm, plan.healthy_p99, plan.healthy_rps) == before
    # The calm baseline is the incident with nothing wrong: a world without faults or red herrings at the page.
    calm = World(structs.replace(incident, faults=[], distractions=[]), shared=False)
    assert calm.states_at(0) == dict(plan.calm)


def _played(world: World, steps: range) -> list[dict[str, ServiceState]]:
    """A world's states over `steps`, a restart and a scale-up of its first root at the page."""
    found = []
    for step in steps:
        if step == 1:
            world.remediate("restart", world.incident.faults[0].service)
            world.remediate("scale_up", world.incident.faults[0].service)
        world.step = step
        found.append(world.states_at(step))
    return found


@pytest.mark.parametrize("difficulty", ["hard", "expert"])
def test_services_on_no_faults_path_take_the_calm_worlds_states_and_nothing_changes(difficulty: str) -> None:
    incident = generate(PRESETS[difficulty], seed=17)
    steps = range(-HISTORY_MINUTES, 8)
    plan = plan_of(incident)
    plan.calm_by_step.clear()  # generating the incident simulated its calm history
    unknown = _played(World(incident, shared=False), steps)
    assert not plan.calm_by_step
    calm = [calm_states(plan, step) for step in steps]
    known = _played(World(incident, shared=False), steps)
    assert known == unknown
    # Where the calm world is known, the services nothing touches are its states, not simulated again.
    reused = [sum(states[name] is quiet[name] for name in states) for states, quiet in zip(known, calm, strict=True)]
    assert all(reused) and sum(reused) < len(steps) * len(incident.services)


def test_a_check_reading_a_few_services_simulates_only_what_they_call() -> None:
    incident = generate(PRESETS["expert"], seed=23)
    root = incident.faults[0].service
    world = World(incident, shared=False)
    reach = world.plan.reach({root})
    assert root in reach and len(reach) < len(incident.services)
    partial = world.states_of(-3, reach)
    assert set(partial) == reach
    # Not kept as the step's states: the whole world's are simulated when asked for, and agree.
    whole = world.states_at(-3)
    assert set(whole) == {s.name for s in incident.services}
    assert {name: whole[name] for name in reach} == partial
    assert world.states_of(-3, reach) is whole


def test_the_lognormal_puts_one_call_in_a_hundred_beyond_its_p99() -> None:
    for p50, p99 in [(20.0, 60.0), (150.0, 900.0), (3.0, 3.5)]:
        assert exceed(p50, p99, p99) == pytest.approx(0.01, abs=2e-5)
        assert exceed(p50, p99, p50) == pytest.approx(0.5)


def test_a_scale_up_adds_the_capacity_and_the_pods_health_lists() -> None:
    incident = generate(PRESETS["easy"], seed=7)
    service = incident.faults[0].service
    world = World(incident)
    telemetry = Telemetry(world, seed=7)
    replicas = world.plan.by_name[service].replicas
    world.advance()
    world.remediate("scale_up", service)
    world.advance()
    head = telemetry.health(service, world.step).splitlines()[0]
    assert world.capacity(service) == SCALE_UP_FACTOR
    assert f" replicas={int(replicas * SCALE_UP_FACTOR)} " in f"{head} "


@pytest.mark.parametrize("difficulty", ["hard", "expert"])
def test_services_no_fault_touches_take_the_faultless_worlds_states_and_nothing_changes(difficulty: str) -> None:
    incident = generate(PRESETS[difficulty], seed=23)
    steps = range(-HISTORY_MINUTES, 8)
    alone = _played(World(incident, shared=False), steps)
    faultless = World(structs.replace(incident, faults=[]), shared=False)
    everyday = [faultless.states_at(step) for step in steps]
    beside = _played(World(incident, shared=False, faultless=faultless), steps)
    assert beside == alone
    # From the page on every red herring shows: those with side work on services no fault touches are
    # the faultless world's states there, not simulated again.
    busy = {d.service for d in incident.distractions if HERRINGS[d.kind].side_effects}
    herring = busy - {f.service for f in incident.faults}
    assert herring
    page = steps.index(0)
    assert any(beside[page][name] is everyday[page][name] for name in herring)


def test_before_its_faults_build_up_a_world_is_the_faultless_ones_states_and_all() -> None:
    def first_live(incident: Incident) -> int:
        return -max(fault_lead(incident, fault, index) for index, fault in enumerate(incident.faults))

    incidents = (generate(PRESETS["expert"], seed) for seed in range(20))
    incident = next(i for i in incidents if first_live(i) > -HISTORY_MINUTES)
    steps = range(-HISTORY_MINUTES, 3)
    faultless = World(structs.replace(incident, faults=[]), shared=False)
    everyday = [faultless.states_at(step) for step in steps]
    beside = _played(World(incident, shared=False, faultless=faultless), steps)
    assert beside == _played(World(incident, shared=False), steps)
    unreached = [step < first_live(incident) for step in steps]
    assert [mine is theirs for mine, theirs in zip(beside, everyday, strict=True)] == unreached
    assert any(unreached)


def test_pack_lays_each_values_low_32_bits_in_a_64_bit_lane_of_its_own() -> None:
    values = [0, 1, -1, 2**32 + 5, 2**40 - 3, -(2**35)]
    packed = pack(values)
    assert [(packed >> (64 * lane)) & (2**64 - 1) for lane in range(len(values))] == [v & 0xFFFFFFFF for v in values]
    assert packed >> (64 * len(values)) == 0
