"""Views of one world agree where an engineer compares them: a fresh pod has no crashes behind it, a
database's statement times are its spans' durations, a canary's pods are listed, a release's note says
what its files changed, and a cache answers its own diagnostics with each fault's evidence."""

from __future__ import annotations

import re

import pytest

from service_incident.faults import FAULTS, RELEASE_CHANGES, Remedy, change_text, release_family
from service_incident.generator import Knobs, generate
from service_incident.incidents import Incident
from service_incident.telemetry import Telemetry
from service_incident.telemetry.escalation import partner_call
from service_incident.telemetry.traces import sample
from service_incident.world import World

_POD = re.compile(r"^  pod (\S+) pid=\d+ status=(\S+) restarts=(\d+) age=(\S+)(.*)$")


def _incident(fault_type: str, seed: int, kind: str | None = None, tech: str | None = None) -> Incident:
    """An incident of one fault type, on a service of `kind` (and technology `tech`) if given."""
    for draw in range(seed, seed + 400):
        incident = generate(Knobs(services=(4, 7), fault_types=(fault_type,), intensity=(0.6, 1.0)), seed=draw)
        culprit = incident.faults[0].service
        if (kind is None or incident.service(culprit).kind == kind) and (
            tech is None or World(incident).plan.by_name[culprit].tech == tech
        ):
            return incident
    raise AssertionError(f"no {fault_type} on a {kind} ({tech}) drawn")


def _crash_fixes() -> list[tuple[str, Remedy]]:
    return [
        (name, remedy)
        for name, kind in sorted(FAULTS.items())
        if kind.termination
        for remedy in (kind.fix, *kind.acceptable)
        if remedy in ("restart", "rollback")
    ]


@pytest.mark.parametrize(("fault_type", "remedy"), _crash_fixes())
def test_pods_the_fixing_rollout_created_have_never_restarted(fault_type: str, remedy: Remedy) -> None:
    for seed in range(4):
        incident = _incident(fault_type, seed * 31)
        world = World(incident)
        telemetry = Telemetry(world, seed)
        service = incident.faults[0].service
        world.advance()
        assert world.remediate(remedy, service) == "heals"
        for step in (1, 2):
            if step == 2:
                world.advance()
            text = telemetry.health(service, step)
            listed = [m.groups() for line in text.splitlines() if (m := _POD.match(line))]
            assert listed, text
            for name, status, restarts, _, rest in listed:
                assert (restarts, status, "last_termination" in rest) == ("0", "Running", False), (name, text)


def _db_spans(telemetry: Telemetry, incident: Incident, database: str, step: int) -> list[float]:
    """The durations of the database's spans in every request its callers' trace samplers drew (not
    only those a view keeps, the slowest and failed); a span its caller gave up on took at least that."""
    return [
        float("inf") if status in ("timeout", "cancelled") else ms
        for caller in incident.services
        for request in sample(telemetry.state, caller.name, step)
        for _, name, _, ms, status in request.spans
        if name == database
    ]


@pytest.mark.parametrize("fault_type", ["slow_query", "bad_deployment"])
def test_a_databases_statement_mean_is_what_its_spans_in_traces_take(fault_type: str) -> None:
    """The statements' mean in run_db_query lies between the quartiles of the database's spans (a
    lognormal's mean is above its median, below its upper quartile), whether the database is the one
    slowed or a calm one."""
    checked = 0
    for seed in range(8):
        incident = _incident(fault_type, seed * 17)
        telemetry = Telemetry(World(incident), seed)
        for database in (s.name for s in incident.services if s.kind == "database"):
            stated = re.search(r"mean (\d+)ms", telemetry.db_query(database, 0))
            assert stated, telemetry.db_query(database, 0)
            spans = sorted(_db_spans(telemetry, incident, database, 0))
            if len(spans) < 30:
                continue
            lower, upper = spans[len(spans) // 4], spans[3 * len(spans) // 4]
            assert 0.8 * lower <= int(stated.group(1)) <= 1.25 * upper, (database, stated.group(0), lower, upper)
            checked += 1
    assert checked >= 4


def _cache_facts(report: str) -> dict[str, float]:
    """What an engineer reads off a cache's INFO or stats: link, evictions, hit ratio, clients, uptime."""
    numbers = {
        "evictions": r"(?:evicted_keys=|evictions )(\d+) in the last minute",
        "hit_ratio": r"hit(?:s)? ratio (0\.\d+)",
        "clients": r"(?:connected_clients|curr_connections)=(\d+)",
        "most_clients": r"(?:maxclients|max_connections)=(\d+)",
        "uptime": r"uptime(?:_in_seconds)?=(\d+)",
    }
    facts = {}
    for name, pattern in numbers.items():
        found = re.search(pattern, report)
        assert found, (name, report)
        facts[name] = float(found.group(1))
    facts["link_down"] = float("master_link_status=down" in report or "marked dead" in report)
    return facts


_CALM_CACHE = {"link_down": 0.0, "evictions": (0, 100), "hit_ratio": (0.9, 1.0), "uptime": (3600, 1e9)}
# What each cache fault shows in the cache's own diagnostics; the rest reads calm.
_CACHE_EVIDENCE: dict[str, dict[str, object]] = {
    "replica_failover": {"link_down": 1.0, "hit_ratio": (0.0, 1.0)},
    "cache_eviction": {"evictions": (10_000, 1e9), "hit_ratio": (0.0, 0.5)},
    "connection_pool_exhaustion": {"clients": "most_clients"},
    "crash_loop": {"uptime": (0, 600), "hit_ratio": (0.0, 0.2)},
}


@pytest.mark.parametrize("tech", ["redis", "memcached"])
@pytest.mark.parametrize("fault_type", sorted(_CACHE_EVIDENCE))
def test_a_cache_answers_its_own_diagnostics_with_each_faults_evidence(fault_type: str, tech: str) -> None:
    incident = _incident(fault_type, 3, "cache", tech)
    cache = incident.faults[0].service
    telemetry = Telemetry(World(incident), 0)
    report = telemetry.db_query(cache, 0)
    facts = _cache_facts(report)
    expected = {**_CALM_CACHE, **_CACHE_EVIDENCE[fault_type]}
    for name, wanted in expected.items():
        if isinstance(wanted, tuple):
            assert wanted[0] <= facts[name] <= wanted[1], (name, report)
        elif isinstance(wanted, str):
            assert facts[name] == facts[wanted], (name, report)
        else:
            assert facts[name] == wanted, (name, report)
    if fault_type != "connection_pool_exhaustion":
        assert facts["clients"] < facts["most_clients"] / 2, report
    if fault_type == "replica_failover" and tech == "redis":
        # Health says so too: the replicas' readiness probes fail on the lost link.
        assert "replication link to primary down" in telemetry.health(cache, 0)


def test_a_memcached_server_lost_reads_as_memcached_before_and_after_its_failover() -> None:
    """memcached replicates nothing: the server its clients marked dead fails its own probe, and the fix
    puts a spare in the ring; no view speaks of replicas, primaries or promotion."""
    incident = _incident("replica_failover", 3, "cache", "memcached")
    cache = incident.faults[0].service
    world = World(incident)
    telemetry = Telemetry(world, 0)
    report, health = telemetry.db_query(cache, 0), telemetry.health(cache, 0)
    dead = re.search(r"server (\S+:11211) marked dead", report)
    assert dead, report
    assert f"Readiness probe failed: dial tcp {dead.group(1)}: connect: connection refused" in health, health
    world.advance()
    world.remediate("failover", cache)
    world.advance()
    logs = telemetry.logs(cache, 2)
    assert f"spare server joined the client ring in place of {dead.group(1)}" in logs, logs
    for text in (report, health, logs, telemetry.health(cache, 2), telemetry.db_query(cache, 2)):
        assert not re.search(r"\breplica\b|primary|master|promot", text), text


def test_a_calm_cache_reads_calm_and_a_failover_promotes_its_master() -> None:
    incident = _incident("replica_failover", 5, "cache", "redis")
    cache = incident.faults[0].service
    world = World(incident)
    telemetry = Telemetry(world, 0)
    calm = [s.name for s in incident.services if s.kind == "cache" and s.name != cache]
    for other in calm:
        facts = _cache_facts(telemetry.db_query(other, 0))
        assert facts["link_down"] == 0 and facts["evictions"] <= 100 and facts["hit_ratio"] >= 0.9
    world.advance()
    assert world.remediate("failover", cache) == "heals"
    world.advance()
    report = telemetry.db_query(cache, 2)
    assert "role=master (promoted by on-call)" in report and _cache_facts(report)["link_down"] == 0, report


def test_a_releases_note_names_the_changes_its_files_are_of_its_own_technology() -> None:
    """Each title a release names is a change of its technology's family, and its files are exactly
    those changes' files: a cache's release speaks of cache configuration, a database's of its schema."""
    checked = 0
    for seed in range(60):
        incident = generate("hard", seed)
        world = World(incident)
        telemetry = Telemetry(world, 1)
        for service in incident.services:
            tech = world.plan.by_name[service.name].tech
            vocabulary = dict(change_text(c, tech) for c in RELEASE_CHANGES[release_family(tech)])
            for entry in telemetry.deploys(service.name, 0).splitlines():
                if " rollback " in entry:
                    continue
                note, _, files = entry.partition(": ")[2].partition("; changed ")
                titles = note.rpartition(" by ")[0].split(", ")
                assert all(title in vocabulary for title in titles), (service.kind, tech, entry)
                expected = dict.fromkeys(f for title in titles for f in vocabulary[title].split(", "))
                assert files.split(", ") == list(expected), entry
                if service.kind in ("cache", "queue"):
                    assert not re.search(r"\.sql|index|column|schema/", entry), entry
                if service.kind == "database":
                    assert not re.search(r"conf\.d/|\.(?:java|go|py|ts)\b", entry), entry
                checked += 1
    assert checked > 500


def _deployments(health: str) -> dict[str, tuple[str, list[str]]]:
    """The deployments health lists: name -> (release, its pods)."""
    found: dict[str, tuple[str, list[str]]] = {}
    current: list[str] = []
    for line in health.splitlines():
        if line.startswith("deployment "):
            _, name, _, image, *_ = line.split()
            current = []
            found[name] = (image.rpartition(":")[2], current)
        elif match := _POD.match(line):
            current.append(match.group(1))
    return found


def test_a_live_canary_is_listed_beside_the_stable_pods_whatever_shipped_it() -> None:
    """Every release whose newest entry is a canary, the one that broke something or a bystander's,
    runs a canary deployment beside the stable one: the canary runs the new release, the stable pods
    the one before, and the canary's lines name a pod health lists. A rollback ends it."""
    culprits = bystanders = reported = 0
    for seed in range(80):
        incident = generate("hard", seed) if seed % 2 else _incident("canary_misconfiguration", seed)
        world = World(incident)
        telemetry = Telemetry(world, seed)
        for service in incident.names:
            history = telemetry.deploys(service, 0).splitlines()
            canary = history[0].split()[1] == "canary"
            listed = _deployments(telemetry.health(service, 0))
            assert (f"{service}-canary" in listed) == canary, (history, listed)
            if not canary:
                continue
            shipped = any(f.service == service and f.type == "canary_misconfiguration" for f in incident.faults)
            culprits += shipped
            bystanders += not shipped
            assert listed[f"{service}-canary"][0] == history[0].split()[2]
            assert listed[service][0] == history[1].split()[2].rstrip(":")
            pods = {pod for _, members in listed.values() for pod in members}
            lines = telemetry.logs(service, 0).splitlines()
            named = re.findall(r"pod=(\S+)", "\n".join(lines))
            assert set(named) <= pods, (named, pods)
            assert shipped <= bool(named)
            # The rollout's own lines (its traffic share, its error ratio) come from the canary's pod.
            rollout = [line.split()[1] for line in lines if " canary v" in line]
            assert set(rollout) <= set(listed[f"{service}-canary"][1]), (rollout, listed)
            reported += bool(rollout)
    assert culprits >= 10 and bystanders >= 3 and reported >= 5, (culprits, bystanders, reported)
    incident = _incident("canary_misconfiguration", 1)
    world = World(incident)
    service = incident.faults[0].service
    world.advance()
    world.remediate("rollback", service)
    assert list(_deployments(Telemetry(world, 1).health(service, 1))) == [service]


_SKEW = re.compile(r"offset -(\d+)(?:\.\d+)?s|iat is (\d+)s in the future")


def test_a_skewed_clock_reads_one_offset_in_every_line_and_view() -> None:
    seen = set()
    for seed in range(8):  # incidents whose logs draw every wording of the skew
        incident = _incident("clock_skew", seed * 50)
        skewed = incident.faults[0].service
        telemetry = Telemetry(World(incident), seed)
        text = "\n".join(telemetry.logs(skewed, step) + "\n" + telemetry.health(skewed, step) for step in range(3))
        offsets = {int(a or b) for a, b in _SKEW.findall(text)}
        # Containers share their node's clock and a verifier behind by N seconds sees fresh tokens issued
        # N seconds ahead: one figure, whichever line or view prints it.
        assert len(offsets) == 1, (incident.id, sorted(offsets))
        seen |= {m.group(0).split()[0] for m in _SKEW.finditer(text)}
    assert seen == {"offset", "iat"}


def test_a_failing_partner_health_check_counts_up_with_the_clock() -> None:
    """ "failing for N minutes" is the time since the fault began: later looks read more, never less."""
    knobs = Knobs(services=(5, 7), fault_types=("external_dependency_failure",))
    checked = 0
    for seed in range(30):
        incident = generate(knobs, seed)
        root = incident.faults[0].service
        telemetry = Telemetry(World(incident), seed)
        counts = [
            sorted({int(n) for n in re.findall(r"health check failing for (\d+) minutes", telemetry.logs(root, step))})
            for step in range(4)
        ]
        if all(counts):
            assert all(len(c) == 1 for c in counts) and [c[0] for c in counts] == list(
                range(counts[0][0], counts[0][0] + 4)
            )
            checked += 1
    assert checked >= 3, checked


@pytest.mark.parametrize(
    ("fault_type", "status"), [("external_dependency_failure", "timeout"), ("upstream_rate_limit", "error(429)")]
)
def test_a_partners_failure_shows_on_the_callers_own_client_span_to_it(fault_type: str, status: str) -> None:
    """A service calls its outside party on some requests, as a client span of its own: ok on every day,
    failing with the fault's status when the failures are the party's, on roots and bystanders alike."""
    knobs = Knobs(services=(6, 8), fault_types=(fault_type,))
    failing = calling_bystanders = 0
    for seed in range(10):
        incident = generate(knobs, seed)
        root = incident.faults[0].service
        telemetry = Telemetry(World(incident), seed)
        kinds = {spec.name: spec.kind for spec in incident.services}
        for spec in incident.services:
            clients = [line.split() for line in telemetry.traces(spec.name, 0).splitlines() if " https://" in line]
            # Each names the party its own service's kind calls: a client span, never a service of the topology.
            assert all(" ".join(words[1:3]) == partner_call(kinds[words[0]], words[0]) for words in clients), clients
            own = [words for words in clients if words[0] == spec.name]
            if spec.name == root:
                failing += any(words[-1] == status for words in own)
            else:
                assert all(words[-1] == "ok" for words in clients if words[0] != root), clients
                calling_bystanders += bool(own)
    assert failing >= 8 and calling_bystanders >= 10, (failing, calling_bystanders)


@pytest.mark.parametrize("difficulty", ["hard", "expert"])
def test_no_two_services_of_a_topology_call_the_same_outside_party(difficulty: str) -> None:
    """A party's outage fails every service that calls it: one failing caller beside healthy callers of
    the same host would be a tell no production system shows."""
    several = 0
    for seed in range(40):
        incident = generate(difficulty, seed)
        telemetry = Telemetry(World(incident), seed)
        hosts: dict[str, str] = {}
        for spec in incident.services:
            for line in telemetry.traces(spec.name, 0).splitlines():
                words = line.split()
                if " https://" in line and words[0] == spec.name:
                    host = words[2].split("/")[2]
                    assert hosts.setdefault(host, spec.name) == spec.name, (incident.id, host, hosts[host], spec.name)
        several += len(hosts) >= 2
    assert several >= 30, several
