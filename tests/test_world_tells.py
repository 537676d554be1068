"""What tells a root from the other services is evidence of its fault, never a mark only roots carry:
everyday movement, entry points, noise vocabularies and weak faults' signals."""

from __future__ import annotations

import re

from msgspec import structs

from service_incident import dataset
from service_incident.generator import Knobs, generate
from service_incident.telemetry import Telemetry
from service_incident.telemetry.jobs import JOBS
from service_incident.telemetry.pages import ALERT_RULES
from service_incident.telemetry.phrases import TECH_WORK, incident_vocabulary
from service_incident.topology import ROUTINE_BY_TECH
from service_incident.world import World
from service_incident.world.plan import technology
from service_incident.world.standout import CLEAR_MARGIN, Everyday, margins, stands_out

MEMORY_RISE_POINTS = 8.0


def _memory_rises(tier: str, count: int) -> tuple[float, float]:
    """The share of root services and of the others whose memory rose 8 points or more over the metrics'
    history at the page."""
    rose = {True: 0, False: 0}
    seen = {True: 0, False: 0}
    for seed in range(count):
        incident = dataset.training_incident(tier, seed)
        roots = {f.service for f in incident.faults}
        telemetry = Telemetry(World(incident), seed)
        for spec in incident.services:
            history = telemetry.metrics(spec.name, 0).history
            is_root = spec.name in roots
            seen[is_root] += 1
            rose[is_root] += history[-1].memory_pct - history[0].memory_pct >= MEMORY_RISE_POINTS
    return rose[True] / seen[True], rose[False] / seen[False]


def test_memory_rises_on_services_at_fault_and_elsewhere_alike() -> None:
    for tier in ("medium", "expert"):
        on_roots, on_others = _memory_rises(tier, 60)
        # Heaps fill between collections, caches refill, batch windows run: not only leaks raise memory.
        assert on_others >= 0.04, (tier, on_others)
        assert on_roots / on_others <= 3.0, (tier, on_roots, on_others)


def test_everyday_movement_stays_below_the_pages() -> None:
    thresholds = {rule.signal: rule.threshold for rule in ALERT_RULES if rule.signal in ("cpu_pct", "memory_pct")}
    moved = 0
    for seed in range(40):
        incident = generate("hard", seed)
        calm = World(structs.replace(incident, faults=[], distractions=[]), shared=False)
        for spec in incident.services:
            history = [calm.states_at(minute)[spec.name] for minute in range(-12, 6)]
            assert max(s.cpu_pct for s in history) < thresholds["cpu_pct"], spec.name
            assert max(s.memory_pct for s in history) < thresholds["memory_pct"], spec.name
            moved += max(s.memory_pct for s in history) - min(s.memory_pct for s in history) >= MEMORY_RISE_POINTS
    assert moved >= 20


def _entry_points(incident_tier: str, seed: int) -> list[str]:
    incident = generate(incident_tier, seed)
    called = {dep for spec in incident.services for dep in spec.depends_on}
    return [spec.name for spec in incident.services if spec.name not in called]


def test_hard_and_expert_topologies_have_more_than_one_entry_point() -> None:
    for tier in ("hard", "expert"):
        counts = [len(_entry_points(tier, seed)) for seed in range(40)]
        assert min(counts) >= 2, (tier, counts)
    assert max(len(_entry_points("expert", seed)) for seed in range(40)) >= 3
    # A mobile API is user-facing, like the gateway, and so are the apps it fronts.
    for seed in range(40):
        incident = generate("hard", seed)
        mobile = next((s for s in incident.services if s.name == "mobile-api"), None)
        if mobile is not None:
            assert mobile.user_facing and all(incident.service(dep).user_facing for dep in mobile.depends_on)
    assert all(len(_entry_points("easy", seed)) == 1 for seed in range(20))


def test_each_incident_draws_its_noise_from_part_of_the_vocabulary() -> None:
    pool = TECH_WORK["jvm"]["noisy_neighbour"]
    subsets = [incident_vocabulary(f"hard-{seed}", "noisy_neighbour", pool) for seed in range(200)]
    assert all(2 <= len(subset) < len(pool) for subset in subsets)
    # More than half the possible shares (two lines or more, not all) occur.
    possible = 2 ** len(pool) - len(pool) - 2
    assert len(set(subsets)) > possible / 2
    # No line is in every incident's share, nor in most.
    for line in pool:
        assert sum(line in subset for subset in subsets) / len(subsets) < 0.7, line


def test_a_partner_rate_limit_names_the_request_path_where_everyday_429s_name_a_job() -> None:
    knobs = Knobs(services=(5, 7), intensity=(0.05, 0.2), fault_types=("upstream_rate_limit",))
    for seed in range(10):
        incident = generate(knobs, seed)
        root = incident.faults[0].service
        lines = [
            line
            for step in range(3)
            for line in Telemetry(World(incident), seed).logs(root, step).splitlines()
            if "429 Too Many" in line or "rate limited by partner" in line
        ]
        assert all(re.search(r'req=[0-9a-f]{8} "[A-Z]+ /', line) and "job=" not in line for line in lines), lines
    everyday = [line for job in JOBS for line in job.failing if "429" in line]
    assert everyday and all("job=" in line and "req=" not in line for line in everyday)


def test_every_generated_root_stands_out_of_its_neighbours_everyday_excursions() -> None:
    for tier in ("hard", "expert"):
        for seed in range(25):
            incident = generate(tier, seed)
            assert all(max(signals.values()) >= CLEAR_MARGIN for signals in margins(incident).values())
    # The check tells: the same root made faint no longer clears its neighbours.
    incident = generate("expert", 3)
    faint = structs.replace(incident, faults=[structs.replace(f, intensity=0.005, peak=0.005) for f in incident.faults])
    assert not stands_out(faint)


def test_one_everyday_world_serves_every_fault_strength_tried_on_a_draft() -> None:
    incident = generate("expert", 3)
    everyday = Everyday(incident)
    decided = []
    for strength in (0.005, 0.3, 1.0):
        faults = [structs.replace(f, intensity=strength, peak=strength) for f in incident.faults]
        tried = structs.replace(incident, faults=faults)
        assert margins(tried, everyday) == margins(tried)
        # The check works out only the signals that decide, and says what the margins say.
        clear = all(max(signals.values()) >= CLEAR_MARGIN for signals in margins(tried).values())
        assert stands_out(tried, everyday) == stands_out(tried) == clear
        decided.append(clear)
    # Both answers were given: the fainter roots do not stand out, the strongest does.
    assert decided == [False, False, True]


def _template(text: str) -> str:
    """A log line's words with its numbers and placeholders masked: what a template count sees."""
    numbers = re.sub(r"\d+(?:\.\d+)?", "#", re.sub(r"\{[^}]*\}", "0", text))
    return re.sub(r"\s+", " ", numbers).strip()


def test_an_evicting_cache_reports_its_hit_ratio_in_its_everyday_words() -> None:
    knobs = Knobs(services=(5, 7), fault_types=("cache_eviction",))
    checked = set()
    for seed in range(12):
        incident = generate(knobs, seed)
        root = incident.faults[0].service
        tech = technology(incident, root)
        everyday = {_template(line.split(" ", 1)[1]) for line in ROUTINE_BY_TECH[tech] if "hit" in line}
        lines = [
            line.split("]: ", 1)[1]
            for step in range(3)
            for line in Telemetry(World(incident), seed).logs(root, step).splitlines()
            if "hits" in line and "]: " in line
        ]
        # The ratio's value is the evidence; a wording only an evicting cache prints would be a tell.
        assert lines and {_template(line.split(" ", 1)[1]) for line in lines} <= everyday, (tech, lines)
        checked.add(tech)
    assert checked == {"redis", "memcached"}
