"""One world, many views: every fault type and every remedy that fits it, rendered through the world and
read the way an engineer reads it, must agree with itself on pods, times, versions, counts and words."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest
from msgspec import structs

from service_incident.faults import FAULTS, RECORD_KINDS, Remedy
from service_incident.generator import Knobs, generate
from service_incident.herrings import HERRINGS
from service_incident.incidents import Incident
from service_incident.telemetry import ALERT_RULES, Telemetry, clock, level, parse_time
from service_incident.telemetry.phrases import DATASTORE_WORK, TECH_WORK
from service_incident.world import World, fault_lead

REMEDY_STEP = 1
LAST_STEP = 4
_LINE = re.compile(r"^(\S+) (\S+) [\w-]+\[(\d+)\]: (\w+)\s+(.*)$")
_POD = re.compile(r"^  pod (\S+) pid=(\d+) status=(.+?) restarts=(\d+) age=(\S+)")
_AGO = re.compile(r"^  (\S+) ago (.*)$")
_CRASH = re.compile(r"signal 11|SIGSEGV|status=139|OutOfMemoryError|MemoryError|heap out of memory")
_LIMIT = re.compile(r"(\d+)Mi (?:limit|used)|limit \((\d+)Mi\)|of (\d+)Mi")
# A service's settings, which every line and every pod of it states alike.
_SETTING = re.compile(r"maxmemory reached \((\w+)\)|quota (\d+)/min|limit \((\d+)Mi\)")
_HTTP_WORK = re.compile(
    r"webhook|job=(?:nightly-export|report-upload)|status=[2-5]\d\d\b|returned 50\d|x509|provider|HTTP"
    r"|batch job|nightly report"
)


def _seconds(age: str) -> int:
    return int(age[:-1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[age[-1]]


def _at(stamp: str) -> datetime:
    return parse_time(stamp.replace("Z", "").split(".")[0] + "Z")


@dataclass
class Pods:
    """A service's pods at one step, as health lists them."""

    ready: int
    listed: dict[str, tuple[int, str, int, int]] = field(default_factory=dict)  # name -> pid, status, restarts, age


def _health(text: str) -> Pods:
    lines = text.splitlines()
    # A live canary is a deployment of its own, listed after the stable one.
    pods = Pods(sum(int(line.rpartition("ready=")[2]) for line in lines if line.startswith("deployment ")))
    for line in lines:
        if match := _POD.match(line):
            name, pid, status, restarts, age = match.groups()
            pods.listed[name] = (int(pid), status, int(restarts), _seconds(age))
    return pods


def _remedies(fault_type: str) -> list[Remedy]:
    kind = FAULTS[fault_type]
    return list(dict.fromkeys((kind.fix, *kind.acceptable, *kind.relief, "restart")))


def _cases() -> list[tuple[str, Remedy]]:
    return [(fault_type, remedy) for fault_type in sorted(FAULTS) for remedy in _remedies(fault_type)]


def _incident(fault_type: str, seed: int) -> Incident:
    return generate(Knobs(services=(4, 7), fault_types=(fault_type,), intensity=(0.6, 1.0)), seed=seed)


def _signatures(fault_type: str, tech: str) -> list[str]:
    """The longest literal of each of the fault's own warnings and errors on this technology."""
    return [
        max(re.split(r"\{[^}]*\}", line.split(" ", 1)[1]), key=len).strip()
        for phrasing in FAULTS[fault_type].phrasings(tech)
        for line in phrasing
        if not line.startswith("INFO")
    ]


class Watch:
    """One service watched through an episode: its pods by step and the pods told to stop."""

    def __init__(self, world: World, telemetry: Telemetry, service: str) -> None:
        self.world, self.telemetry, self.service = world, telemetry, service
        self.pods: dict[int, Pods] = {}
        self.stopped: dict[str, datetime] = {}
        self.settings: set[tuple[int, str]] = set()
        incident = world.incident
        tech = world.plan.by_name[service].tech
        borrowed = {d.fault for d in incident.distractions if d.service == service}
        # The faults on this service: when each began, and its own lines (unless a red herring borrows them).
        self.faults = [
            (
                index,
                clock(world, -fault_lead(incident, fault, index)),
                [] if fault.type in borrowed else _signatures(fault.type, tech),
            )
            for index, fault in enumerate(incident.faults)
            if fault.service == service
        ]

    def check(self, step: int) -> None:
        world, telemetry, service = self.world, self.telemetry, self.service
        text = telemetry.health(service, step)
        self.pods[step] = health = _health(text)
        now, page = clock(world, step), clock(world, 0)
        # Readiness counts the pods that say they are ready; a crashing container restarts on back-off
        # inside a pod that keeps its age.
        assert health.ready == sum(1 for _, status, _, _ in health.listed.values() if status == "Running"), text
        for name, (_, status, restarts, age) in health.listed.items():
            assert age >= 10 * restarts, (name, restarts, age)
            assert ("CrashLoopBackOff" in status) <= (restarts > 0)
        # Events happen on pods that existed then.
        for line in text.split("events (last 15m):")[1].splitlines():
            if (match := _AGO.match(line)) and (named := re.search(r"pod/(\S+):", match.group(2))):
                listed = health.listed.get(named.group(1))
                if listed is not None:
                    assert _seconds(match.group(1)) <= listed[3] + 1, text
                    # A container killed or backing off is one that restarted.
                    assert listed[2] > 0 or not re.search(r"OOMKilled|BackOff ", match.group(2)), text
        if step < 0:
            return
        logs = telemetry.logs(service, step)
        limits = {int(next(g for g in m.groups() if g)) for m in _LIMIT.finditer(logs + text)}
        assert len(limits) <= 1, (logs, text)
        self.settings |= {(i, g) for m in _SETTING.finditer(logs) for i, g in enumerate(m.groups()) if g}
        assert len(self.settings) == len({i for i, _ in self.settings}), (service, self.settings)
        for line in logs.splitlines():
            self._check_line(line, now, page)
        if world.plan.by_name[service].kind == "database":
            db = telemetry.db_query(service, step)
            assert "ALTER TABLE" not in db
            if self.faults and all(
                self._healed(index) is not None and now >= self._healed(index) for index, _, _ in self.faults
            ):
                assert "locks waiting 0" in db, db
            if held := re.search(r"open (\d+)s", db):
                restarts = [clock(world, s) for s in world.restarts(service, step)]
                began = min(b for _, b, _ in self.faults)
                assert timedelta(seconds=int(held.group(1))) <= now - max([began, *restarts]), db

    def _healed(self, index: int) -> datetime | None:
        step = self.world.healed_at(index)
        return None if step is None else clock(self.world, step)

    def _check_line(self, line: str, now: datetime, page: datetime) -> None:
        if line.startswith("(no log lines"):
            return
        match = _LINE.match(line)
        assert match, line
        stamp, pod, pid, _, message = match.groups()
        moment = _at(stamp)
        assert moment <= now
        # The pod wrote it while it ran, with the PID it had then, and never after it was told to stop.
        minute = (moment - page) // timedelta(minutes=1)
        written = self.pods[minute]
        if pod not in written.listed and minute + 1 in self.pods:
            # A rolling restart's replacement, which took over before the rollout completed.
            written = self.pods[minute + 1]
            assert moment >= clock(self.world, minute + 1) - timedelta(seconds=written.listed[pod][3] + 1), line
        assert pod in written.listed and int(pid) == written.listed[pod][0], (line, written)
        assert pod not in self.stopped or moment <= self.stopped[pod], line
        if "received SIGTERM" in message:
            self.stopped[pod] = moment
        if _CRASH.search(message):
            assert written.listed[pod][2] > 0, line
        # A fault's own lines stop once its fix took effect, and start only once it began.
        for index, began, signatures in self.faults:
            if any(sig and sig in message for sig in signatures):
                healed = self._healed(index)
                assert healed is None or moment < healed, line
                assert moment >= began - timedelta(minutes=1), line
        if "build=" in message:
            image = self.telemetry.health(self.service, minute).split()[3]
            assert message.rpartition("build=")[2].split()[0] == image.rpartition(":")[2], line
        if "notAfter=" in message and self.faults:
            expired = parse_time(message.rpartition("notAfter=")[2].split()[0].rstrip(")"))
            began = min(b for _, b, _ in self.faults)
            assert began - timedelta(minutes=2) <= expired <= began, line


def _play(incident: Incident, seed: int, remedies: list[tuple[Remedy, str]], watched: list[str]) -> World:
    """Watch services from before the page to a few steps after the remedies, applied at one step."""
    world = World(incident)
    telemetry = Telemetry(world, seed=seed)
    watches = [Watch(world, telemetry, service) for service in watched]
    for step in range(-2, LAST_STEP + 1):
        if step > 0:
            world.advance()
        if step == REMEDY_STEP:
            for remedy, service in remedies:
                world.remediate(remedy, service)
        for watch in watches:
            watch.check(step)
        _assert_pages_read_true(telemetry, world)
    return world


@pytest.mark.parametrize(("fault_type", "remedy"), _cases(), ids=[f"{f}-{r}" for f, r in _cases()])
@pytest.mark.parametrize("seed", [3, 11, 19, 27])
def test_every_view_agrees_before_and_after_a_remedy(fault_type: str, remedy: Remedy, seed: int) -> None:
    incident = _incident(fault_type, seed)
    root = incident.faults[0].service
    _play(incident, seed, [(remedy, root)], [root])


@pytest.mark.parametrize("difficulty", ["medium", "hard", "expert"])
def test_every_service_agrees_with_itself_in_generated_incidents(difficulty: str) -> None:
    """Red herrings, several faults, log gaps and lag: each root fixed, a bystander restarted, a red
    herring's release rolled back and another bystander scaled up, every service watched."""
    for seed in range(8):
        incident = generate(difficulty, seed=3_000_000 + seed)
        roots = {fault.service for fault in incident.faults}
        remedies: list[tuple[Remedy, str]] = [(FAULTS[fault.type].fix, fault.service) for fault in incident.faults]
        bystanders = [spec.name for spec in incident.services if spec.name not in roots]
        remedies += [("restart", bystanders[seed % len(bystanders)]), ("scale_up", bystanders[-1 - seed % 2])]
        remedies += [("rollback", d.service) for d in incident.distractions if d.kind == "recent_deploy"]
        world = _play(incident, seed, remedies, [spec.name for spec in incident.services])
        assert world.step == LAST_STEP


def _assert_pages_read_true(telemetry: Telemetry, world: World) -> None:
    rules = {rule.signal: rule for rule in ALERT_RULES}
    for alert in telemetry.alerts(world.step):
        rule = rules.get(alert.signal)
        if rule is None:
            continue
        if alert.status == "firing":
            assert alert.value >= rule.threshold
        else:
            # A resolved page shows the reading it cleared on, not nothing.
            assert 0 < alert.value < rule.threshold, alert


def test_shedding_load_does_not_lift_a_partner_quota() -> None:
    incident = _incident("upstream_rate_limit", 3)
    world = World(incident)
    world.advance()
    assert world.remediate("shed_load", incident.faults[0].service) != "heals"


@pytest.mark.parametrize("difficulty", ["medium", "hard", "expert"])
def test_words_fit_the_technology_and_callers_feel_their_dependencies(difficulty: str) -> None:
    for seed in range(12):
        incident = generate(difficulty, seed=2_000_000 + seed)
        world = World(incident)
        telemetry = Telemetry(world, seed=seed)
        states = world.states
        for spec in incident.services:
            node = world.plan.by_name[spec.name]
            logs = telemetry.logs(spec.name, 0)
            if spec.kind in (*RECORD_KINDS, "cache"):
                # A datastore or broker has no webhooks, export, report or reindexing jobs or HTTP statuses of its
                # own: its jobs are backups, snapshots and audit streams.
                assert not _HTTP_WORK.search(logs), (spec.name, node.tech, logs)
            # Callers of a datastore never say it answered with an HTTP status.
            assert not re.search(r":(3306|5432|6379|11211|9092|5672)\S* .*returned 50\d", logs), logs
            for edge in node.edges:
                dep = states[edge.dep]
                if dep.call_failure >= 0.04 and not edge.breaker:
                    # A caller meets its share of a dependency's failures, whatever retries recover.
                    floor = edge.share * edge.weight * dep.call_failure ** (1 + 0.5 * edge.retries)
                    assert states[spec.name].error_rate >= 0.9 * floor, (spec.name, edge.dep)
        pods_of_release = {spec.name: telemetry.health(spec.name, 0) for spec in incident.services}
        for name, text in pods_of_release.items():
            shipped = {
                line.split()[2].rstrip(":"): _at(line.split()[0])
                for line in telemetry.deploys(name, 0).splitlines()[::-1]
            }
            release = ""
            for line in text.splitlines():
                if line.startswith("deployment "):
                    release = line.split()[3].rpartition(":")[2]
                elif match := _POD.match(line):
                    # No pod is older than the release it runs (a canary's stable pods run the one before it).
                    assert clock(world, 0) - timedelta(seconds=_seconds(match.group(5))) >= shipped[release], (
                        name,
                        text,
                    )


def _as_pattern(template: str) -> str:
    return re.sub(r"\\\{[^{}]*\\\}", ".+", re.escape(template))


# Everyday lines: a config sync, a background job's failing run (every such line names its job), and
# busy side work in any technology's words, from the tables the logs are drawn from.
_BUSY = {
    *HERRINGS["noisy_neighbour"].lines,
    *(line for work in TECH_WORK.values() for line in work.get("noisy_neighbour", ())),
    *DATASTORE_WORK.get("noisy_neighbour", ()),
}
_EVERYDAY = re.compile("|".join([r"config reloaded", r"job=", *(_as_pattern(line) for line in sorted(_BUSY))]))


def _originating(traces: str, service: str) -> set[str]:
    """Statuses of a service's failing spans none of whose children failed: where a failure starts."""
    spans = [
        (len(line) - len(line.lstrip()), line.split()) for line in traces.splitlines() if not line.startswith("trace ")
    ]
    found = set()
    for index, (indent, words) in enumerate(spans):
        if words[0] != service or not words[-1].startswith("error(") or "upstream" in words[-1]:
            continue
        children = []
        for deeper, below in spans[index + 1 :]:
            if deeper <= indent:
                break
            children += [below[-1]] if deeper == indent + 2 else []
        if all(status == "ok" for status in children):
            found.add(words[-1])
    return found


def test_everyday_noise_and_failing_spans_do_not_tell_roots_from_red_herrings() -> None:
    """Everyday lines show on roots as on other services, and a red herring's minor fault that fails
    runs of a background job starts failing spans of its own, with the same statuses a root's can have."""
    noisy_roots = 0
    herring_statuses: set[str] = set()
    for seed in range(120):
        incident = generate("hard", seed=3_100_000 + seed)
        world = World(incident)
        telemetry = Telemetry(world, seed)
        roots = {fault.service for fault in incident.faults}
        noisy_roots += sum(bool(_EVERYDAY.search(telemetry.logs(root, 0))) for root in roots)
        state = world.states_at(0)
        for distraction in incident.distractions:
            service = distraction.service
            if distraction.kind == "minor_fault" and service not in roots and state[service].minor_error > 0.05:
                herring_statuses |= _originating(telemetry.traces(service, 0), service)
    assert noisy_roots >= 10
    assert {"error(500)", "error(503)"} <= herring_statuses, herring_statuses


def test_a_restart_rolls_out_a_new_replica_set_and_a_scale_up_keeps_it() -> None:
    """Pod names carry their ReplicaSet's hash: a rollout restart changes the pod template, so the hash;
    adding replicas does not."""
    incident = _incident("memory_leak", 5)
    root = incident.faults[0].service
    world = World(incident)
    telemetry = Telemetry(world, seed=5)

    def replica_sets(step: int) -> set[str]:
        return {pod.name.rsplit("-", 2)[1] for pod in telemetry.pods(root, step)}

    before = replica_sets(0)
    world.advance()
    world.remediate("scale_up", root)
    assert replica_sets(1) == before and len(telemetry.pods(root, 1)) > len(telemetry.pods(root, 0))
    world.advance()
    world.remediate("restart", root)
    restarted = replica_sets(2)
    assert len(restarted) == 1 and restarted != before


def test_a_surge_at_an_internal_service_comes_from_its_callers() -> None:
    """A traffic spike deep in the graph is requests its callers send it: each caller's request rate
    rises by its share of the surge, and so on up to the entry point."""
    checked = 0
    for seed in range(40):
        incident = generate(Knobs(services=(6, 9), fault_types=("traffic_spike",), intensity=(0.6, 1.0)), seed=seed)
        surging = incident.faults[0].service
        callers = [spec.name for spec in incident.services if surging in spec.depends_on]
        if not callers:
            continue
        sick = World(incident).states_at(0)
        calm = World(structs.replace(incident, faults=[], distractions=[])).states_at(0)
        plan = World(incident).plan
        rise = sick[surging].rps - calm[surging].rps
        assert rise > 0.5 * calm[surging].rps
        for caller in callers:
            # At least what it sends the surging service directly (more if it also reaches it through others).
            share = next(e.share for e in plan.by_name[caller].edges if e.dep == surging)
            owed = rise * calm[caller].rps * share / calm[surging].rps
            assert sick[caller].rps - calm[caller].rps >= owed * (1 - 1e-9), caller
        # Every extra request came in at an entry point.
        called = {dep for spec in incident.services for dep in spec.depends_on}
        entered = sum(sick[s.name].rps - calm[s.name].rps for s in incident.services if s.name not in called)
        assert entered == pytest.approx(rise)
        # Shedding at the entry turns surging requests away as well: less of the surge arrives.
        shedding = World(incident)
        shedding.advance()
        shedding.remediate("shed_load", "gateway")
        shed = shedding.states_at(1)
        assert all(state.rps >= 0 for state in shed.values())
        if shed["gateway"].rps < sick["gateway"].rps * 0.99:
            assert shed[surging].rps < sick[surging].rps
        checked += 1
    assert checked >= 10


def _shows_fault(world: World, telemetry: Telemetry, calm: World, index: int, step: int) -> dict[str, bool]:
    """Which channels show the fault `index` in the minute before `step`: its own lines, failing spans it
    starts, its service's error rate, p99 or CPU, each against the same world without faults, and its events."""
    fault = world.incident.faults[index]
    service, tech = fault.service, world.plan.by_name[fault.service].tech
    since = clock(world, step - 1)
    signatures = [sig for sig in _signatures(fault.type, tech) if sig]
    lines = [
        line
        for line in telemetry.logs(service, step).splitlines()
        if _at(line.split()[0]) > since and any(sig in line for sig in signatures)
    ]
    # Spans a service starts failing with no fault at all (its background errors, a fraction of a
    # percent, which a sample of 40 shows or not by luck) are not the fault's.
    background = set().union(
        *(_originating(Telemetry(calm, seed).traces(service, step), service) for seed in range(12))
    )
    spans = any(_originating(Telemetry(world, seed).traces(service, step), service) - background for seed in range(3))
    now, then = world.states_at(step)[service], calm.states_at(step)[service]
    # A surge's requests outlast its fix (they come from outside): serving them costs CPU and queueing,
    # which is traffic, not the fault; what the fix ends is the failing.
    moved = now.error_rate - then.error_rate > 0.002 or (
        not FAULTS[fault.type].load and (now.p99_ms > 1.05 * then.p99_ms or now.cpu_pct > then.cpu_pct + 2)
    )
    health = telemetry.health(service, step)
    events = [
        line
        for line in health.split("events (last 15m):")[1].splitlines()
        if (match := _AGO.match(line))
        and "Warning" in line
        and clock(world, step) - timedelta(seconds=_seconds(match.group(1))) > since
    ]
    return {"logs": bool(lines), "traces": spans, "metrics": moved, "events": bool(events)}


@pytest.mark.parametrize("fault_type", sorted(FAULTS))
def test_a_fixed_fault_goes_quiet_in_every_channel_at_once(fault_type: str) -> None:
    """Once a fix lands, the fault's lines, the failing spans it starts, its service's metrics and its
    events end together: no channel still shows it while another is clean."""
    for seed in (3, 11):
        incident = _incident(fault_type, seed)
        world, calm = World(incident), World(structs.replace(incident, faults=[], distractions=[]))
        telemetry = Telemetry(world, seed=seed)
        world.advance()
        world.remediate(FAULTS[fault_type].fix, incident.faults[0].service)
        healed = world.healed_at(0)
        assert healed is not None
        for _ in range(healed + 2):
            world.advance()
        for step in range(healed + 1, world.step + 1):
            assert not any(_shows_fault(world, telemetry, calm, 0, step).values()), (step, healed)


def test_config_reloads_follow_each_services_sync_period() -> None:
    """`config reloaded` comes from a periodic sync: whichever look shows a reload shows it at the same
    moment from the same pod, reloads lie a whole number of periods apart, and none claims a change."""
    for seed in range(20):
        incident = generate("hard", seed=3_200_000 + seed)
        world = World(incident)
        telemetry = Telemetry(world, seed)
        for _ in range(LAST_STEP):
            world.advance()
        for spec in incident.services:
            seen: dict[str, str] = {}
            for step in range(LAST_STEP + 1):
                for line in telemetry.logs(spec.name, step).splitlines():
                    if "config reloaded" in line:
                        stamp, pod, *_ = line.split()
                        assert seen.setdefault(stamp, pod) == pod, (stamp, pod, seen)
                        assert "no changes" in line, line
            moments = sorted(_at(stamp) for stamp in seen)
            gaps = {(later - earlier) // timedelta(seconds=1) for earlier, later in itertools.pairwise(moments)}
            if gaps:
                assert all(gap % min(gaps) == 0 and gap >= 180 for gap in gaps), (spec.name, sorted(seen))


def test_everyday_and_routine_lines_show_on_roots_as_on_other_services() -> None:
    """Side work is no business of a fault's: a red herring of it lands on roots too, so a line of it
    is as likely on a root as elsewhere; and a fault's lines add to a service's routine chatter
    rather than crowding it out."""
    shown = {True: [0, 0, 0], False: [0, 0, 0]}  # looks with an everyday line, routine lines, looks
    for seed in range(300):
        incident = generate("hard", seed=3_300_000 + seed)
        telemetry = Telemetry(World(incident), seed)
        roots = {fault.service for fault in incident.faults}
        for spec in incident.services:
            if spec.name in incident.log_gaps:
                continue
            logs = telemetry.logs(spec.name, 0)
            counts = shown[spec.name in roots]
            counts[0] += bool(_EVERYDAY.search(logs))
            counts[1] += sum(level(line) in ("INFO", "LOG") for line in logs.splitlines())
            counts[2] += 1
    (on_roots, root_chatter), (elsewhere, other_chatter) = (
        (shown[flag][0] / shown[flag][2], shown[flag][1] / shown[flag][2]) for flag in (True, False)
    )
    assert abs(on_roots - elsewhere) < 0.04, (on_roots, elsewhere)
    assert abs(root_chatter - other_chatter) < 0.5, (root_chatter, other_chatter)


@pytest.mark.parametrize(("fault_type", "remedy"), [c for c in _cases() if c[1] != "shed_load"])
def test_no_remedy_but_shedding_turns_requests_away(fault_type: str, remedy: Remedy) -> None:
    """Capacity, a restart or a rollback cannot make fewer requests arrive from outside: after any remedy
    but shed_load, every service receives at least what it would with the fault left alone (a surge's
    requests included), and never less than its calm baseline. The extra calls a fault makes itself (a
    query per item) come from inside: its fix ends them, and what they reached falls back to its calm."""
    kind = FAULTS[fault_type]
    for seed in (3, 11):
        incident = _incident(fault_type, seed)
        root = incident.faults[0].service
        calls = incident.service(root).depends_on
        pushed = {d for d in calls if kind.fanout and incident.service(d).kind == kind.through}
        untouched = World(incident)
        calm = World(structs.replace(incident, faults=[], distractions=[])).states_at(0)
        world = World(incident)
        world.advance()
        world.remediate(remedy, root)
        for step in range(REMEDY_STEP, LAST_STEP + 1):
            if step > REMEDY_STEP:
                world.advance()
            left, now = untouched.states_at(step), world.states
            for name, state in now.items():
                assert name in pushed or state.rps >= left[name].rps * (1 - 1e-9), (name, step)
                assert state.rps >= calm[name].rps * (1 - 1e-9), (name, step)


@pytest.mark.parametrize("seed", [3, 11, 19, 27])
def test_a_service_that_still_serves_has_a_ready_pod(seed: int) -> None:
    """Readiness and traffic agree: while any request of a service succeeds some pod is ready to serve it,
    and the pods that are not ready are the ones whose containers are crash-looping."""
    incident = _incident("crash_loop", seed)
    root = incident.faults[0].service
    world = World(incident)
    telemetry = Telemetry(world, seed=seed)
    for step in range(LAST_STEP):
        if step:
            world.advance()
        pods, state = _health(telemetry.health(root, step)), world.states_at(step)[root]
        assert state.error_rate < 1.0
        assert pods.ready >= 1, (step, state.error_rate)
        assert pods.ready == sum(1 for _, status, _, _ in pods.listed.values() if status == "Running")


@pytest.mark.parametrize("remedy", _remedies("disk_full"))
@pytest.mark.parametrize("seed", [3, 11, 19, 27])
def test_a_full_volume_pages_on_itself_and_its_peak_never_falls(seed: int, remedy: Remedy) -> None:
    """A full volume's page names the volume the database reports full; its peak since the page only
    rises while it fires; once resolved it reads below its threshold, as the diagnostics do."""
    incident = _incident("disk_full", seed)
    root = incident.faults[0].service
    world = World(incident)
    telemetry = Telemetry(world, seed=seed)
    peak = 0.0
    for step in range(LAST_STEP + 1):
        if step:
            world.advance()
        if step == REMEDY_STEP:
            world.remediate(remedy, root)
        page = next(a for a in telemetry.alerts(step) if a.service == root and a.signal == "disk_pct")
        assert page.peak >= peak
        peak = page.peak
        if page.status == "resolved":
            assert page.value < 80.0
            assert f"disk {page.value:.0f}% used" in telemetry.db_query(root, step)
        elif incident.service(root).kind == "database":
            volume = page.summary.split()[2]
            assert f"disk: {volume} 100% used" in telemetry.db_query(root, step)


# What each technology does not have: a proxy runs no jobs and keeps no data, memcached persists nothing,
# and only a proxy is configured with proxy directives.
_FOREIGN = {
    "nginx": re.compile(r"batch job|compaction|snapshot|nightly report|GC pause"),
    "envoy": re.compile(r"batch job|compaction|snapshot|nightly report|GC pause"),
    "memcached": re.compile(r"compaction|snapshot|backup|GC pause|batch job"),
}
_PROXY_FILES = re.compile(r"upstream_buffers|proxy_headers|proxy_cache|body_rewrite")


@pytest.mark.parametrize("difficulty", ["medium", "hard", "expert"])
def test_side_work_and_releases_are_the_technologys_own(difficulty: str) -> None:
    seen: set[str] = set()
    for seed in range(40):
        incident = generate(difficulty, seed=3_000_000 + seed)
        world = World(incident)
        telemetry = Telemetry(world, seed=seed)
        for spec in incident.services:
            tech = world.plan.by_name[spec.name].tech
            if tech in _FOREIGN:
                logs = telemetry.logs(spec.name, 0)
                assert not _FOREIGN[tech].search(logs), (spec.name, tech, logs)
                seen.add(tech)
            if tech not in ("nginx", "envoy"):
                deploys = telemetry.deploys(spec.name, 0)
                assert not _PROXY_FILES.search(deploys), (spec.name, tech, deploys)
    assert seen


def _failing_spans(world: World, caller: str, service: str, seed: int) -> list[str]:
    """The failing spans of `service` inside the sampled requests of `caller`."""
    text = Telemetry(world, seed=seed).traces(caller, 0)
    return [
        line
        for line in text.splitlines()
        if line.startswith("  ") and line.split()[0] == service and not line.endswith(" ok")
    ]


def test_a_minor_faults_failures_never_reach_its_callers_requests() -> None:
    """A red herring's minor fault fails requests of its own, which no caller sends: its callers' error
    rates do not move, and neither do the spans of their requests that pass through it."""
    checked = 0
    for seed in range(30):
        incident = generate("hard", seed=4_000_000 + seed)
        for index, distraction in enumerate(incident.distractions):
            if distraction.kind != "minor_fault":
                continue
            service = distraction.service
            others = [d for i, d in enumerate(incident.distractions) if i != index]
            world, calm = World(incident), World(structs.replace(incident, distractions=others))
            for caller in [s.name for s in incident.services if service in s.depends_on]:
                assert world.states[caller].error_rate == pytest.approx(calm.states[caller].error_rate)
                for sample in range(3):
                    assert _failing_spans(world, caller, service, sample) == _failing_spans(
                        calm, caller, service, sample
                    ), (service, caller)
                checked += 1
    assert checked >= 5
