"""Views as the environment shows them: each stamped with the minute it was taken, and traces broken
down by endpoint with a filter (one endpoint, failures only) that keeps the view short."""

from __future__ import annotations

import math
import random
import re

from msgspec import structs

from service_incident import dataset
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.generator import generate
from service_incident.harness.agents import ExpertAgent, explained_failures, trace_origins
from service_incident.incidents import Incident
from service_incident.integrations.text import TextEpisode
from service_incident.models import REMEDIATIONS, InspectLogs, InspectMetrics, InspectTraces, Observation, action_name
from service_incident.tasks import TASKS
from service_incident.telemetry import Scope, Telemetry
from service_incident.telemetry.endpoints import operations, route, routes
from service_incident.telemetry.jobs import jobs_of, minor_job
from service_incident.telemetry.templates import fill, replay, take
from service_incident.telemetry.traces import FAILED_SHOWN, TRACE_CANDIDATES, Request, breakdown, failed_shown, sample
from service_incident.world import ServiceState, World

REMEDIES = frozenset(action_name(remedy) for remedy in REMEDIATIONS)

_ROW = re.compile(r"endpoint (.+): (\d+) requests, (\d+) failed, p99 (\d+|-)(?: ms)?")
_JOB_ROW = re.compile(r"^job (.+): (\d+) runs, \d+ failed, p99 (?:\d+ ms|-)$", re.M)


def _start(env: ServiceIncidentEnvironment, seed: int = 5) -> tuple[Observation, str]:
    """A generated incident and its first user-facing service that serves several endpoints."""
    first = env.reset(task_id="gen_medium", seed=seed)
    kinds = {card.name: card.kind for card in first.topology}
    entry = next(card.name for card in first.topology if card.user_facing and len(routes(kinds[card.name])) > 1)
    return first, entry


def _rows(text: str) -> dict[str, tuple[int, int, str]]:
    found = {}
    for line in text.splitlines():
        if match := _ROW.fullmatch(line):
            found[match.group(1)] = (int(match.group(2)), int(match.group(3)), match.group(4))
    return found


def _traces(text: str) -> list[list[str]]:
    """Each trace shown: its heading line and its span lines."""
    found: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("trace "):
            found.append([line])
        elif line.startswith("  ") and found:
            found[-1].append(line)
    return found


def test_every_view_carries_the_minute_it_was_taken_and_keeps_it_later() -> None:
    env = ServiceIncidentEnvironment()
    first, entry = _start(env)
    shown = next(iter(first.visible_logs))
    assert first.as_of == {"logs": {shown: first.clock[11:16]}}
    traced = env.step(InspectTraces(target=entry))
    metered = env.step(InspectMetrics(target=entry))
    logged = env.step(InspectLogs(target=entry))
    minutes = [obs.clock[11:16] for obs in (first, traced, metered, logged)]
    assert len(set(minutes)) == 4  # a minute a step
    # The views of earlier steps stay, each with the minute it was taken; only the new one is current.
    assert logged.as_of == {
        "logs": {shown: minutes[0], entry: minutes[3]},
        "traces": {entry: minutes[1]},
        "metrics": {entry: minutes[2]},
    }
    assert logged.taken("visible_traces", entry) == minutes[1] and logged.taken("visible_db", entry) is None


def test_a_view_that_shows_nothing_new_keeps_its_minute_and_its_scope_comes_back() -> None:
    env = ServiceIncidentEnvironment()
    env.reset(task_id="rca_01", seed=1)  # a curated incident: its world holds still between steps
    entry = "api-gateway"
    whole = env.step(InspectTraces(target=entry))
    failed = env.step(InspectTraces(target=entry, errors_only=True))
    assert failed.visible_traces[entry] != whole.visible_traces[entry]
    # Nothing moved: the whole view asked for again is the one taken at its minute, shown again.
    again = env.step(InspectTraces(target=entry))
    assert again.visible_traces[entry] == whole.visible_traces[entry]
    assert again.as_of["traces"][entry] == whole.clock[11:16] != again.clock[11:16]
    assert again.message == f"The traces of {entry} show nothing new since you last looked at {whole.clock[11:16]}."


def test_the_text_a_model_reads_stamps_current_and_earlier_views() -> None:
    episode = TextEpisode()
    page = episode.reset(task_id="gen_medium", seed=5)
    observation = episode.observation
    assert observation is not None
    shown, reset_minute = next(iter(observation.visible_logs)), observation.clock[11:16]
    assert f"visible_logs:\n  {shown} (as of {reset_minute}):\n" in page
    entry = next(card.name for card in observation.topology if card.user_facing and card.name != shown)
    revealed = episode.step(InspectMetrics(target=entry))
    step_minute = episode.observation.clock[11:16]  # type: ignore[union-attr]
    assert f"visible_metrics:\n  {entry} (as of {step_minute}): " in revealed
    assert shown not in revealed  # the logs from reset were read already
    from service_incident.integrations.text import page as whole_page

    everything = whole_page(episode.observation)  # type: ignore[arg-type]
    assert f"  {shown} (as of {reset_minute}):" in everything and f"  {entry} (as of {step_minute}):" in everything


def test_traces_break_down_every_sampled_request_by_its_endpoint() -> None:
    for seed in range(6):
        incident = generate("hard", seed)
        world = World(incident)
        telemetry = Telemetry(world, seed)
        for spec in incident.services:
            text = telemetry.traces(spec.name, 0)
            requests = sample(telemetry.state, spec.name, 0)
            rows = _rows(text)
            # One row per route the service serves, in the catalogue's order, then one per background job
            # whose runs were sampled; together every sampled request.
            assert list(rows) == list(routes(spec.kind))
            runs = {m.group(1): int(m.group(2)) for m in _JOB_ROW.finditer(text)}
            assert set(runs) == {r.route for r in requests} - set(rows)
            assert sum(count for count, _, _ in rows.values()) + sum(runs.values()) == len(requests) == TRACE_CANDIDATES
            for endpoint, (count, failed, p99) in rows.items():
                mine = sorted(r.total_ms for r in requests if r.route == endpoint)
                assert failed == sum(r.status != "ok" for r in requests if r.route == endpoint) <= count == len(mine)
                assert p99 == (f"{mine[math.ceil(0.99 * len(mine)) - 1]:.0f}" if mine else "-")
            # A trace's entry span is on the endpoint it is counted under, or is a run of one of the
            # service's background jobs, which no request waits on and the breakdown of requests leaves out.
            jobs = {job.name for job in jobs_of(world, spec.name)}
            for trace in _traces(text):
                operation = trace[1].split()[1]
                assert operation in jobs or route_of(trace[1], spec.kind) in rows


def route_of(span: str, kind: str) -> str:
    """The route a rendered entry span's operation was drawn from."""
    found = re.fullmatch(r"\s*\S+ (.+?) \d+ms \S.*", span)
    assert found, span
    [matched] = [
        route(template)
        for template in operations(kind)
        if re.fullmatch(re.sub(r"\\\{[^{}]*\\\}", ".+", re.escape(template)), found.group(1))
    ]
    return matched


def test_one_endpoint_and_failures_only_keep_the_view_short() -> None:
    for seed in range(20):  # an incident whose entry fails requests on more than one endpoint
        env = ServiceIncidentEnvironment()
        _, entry = _start(env, seed)
        telemetry = env._episode.telemetry  # type: ignore[union-attr]
        requests = sample(telemetry.state, entry, 0)
        if len({r.route for r in requests if r.status != "ok"}) > 1:
            break
    kind = telemetry.world.plan.by_name[entry].kind
    whole = telemetry.traces(entry, 0)
    assert len(_traces(whole)) == FAILED_SHOWN + 2  # the first failed, the slowest and the fastest

    endpoint = max(routes(kind), key=lambda e: sum(r.status != "ok" for r in requests if r.route == e))
    one = telemetry.traces(entry, 0, Scope(endpoint=endpoint))
    assert list(_rows(one)) == [endpoint] and _rows(one)[endpoint] == _rows(whole)[endpoint]
    mine = [r for r in requests if r.route == endpoint]
    slowest = max((r for r in mine if r.status == "ok"), key=lambda r: r.total_ms)
    assert [trace[0] for trace in _traces(one)] == [
        _heading(r) for r in [*[r for r in mine if r.status != "ok"][:2], slowest]
    ]

    failed = telemetry.traces(entry, 0, Scope(errors_only=True))
    assert failed.splitlines()[0] == f"sampled {TRACE_CANDIDATES} requests; shown: failed requests only"
    assert _rows(failed) == {e: row for e, row in _rows(whole).items() if row[1] > 0} != _rows(whole)
    # The whole view without what did not fail.
    assert _traces(failed) == [trace for trace in _traces(whole) if not trace[0].endswith(" ok")]
    assert len(failed.splitlines()) < len(whole.splitlines())

    both = telemetry.traces(entry, 0, Scope(endpoint, errors_only=True))
    assert [trace[0] for trace in _traces(both)] == [_heading(r) for r in mine if r.status != "ok"][:FAILED_SHOWN]
    assert len(both.splitlines()) < len(one.splitlines())


def test_a_failing_endpoint_is_shown_beside_a_background_jobs_failing_runs() -> None:
    def request(route: str, status: str, trace_id: int) -> Request:
        return Request(route, 100.0, status, trace_id, [])

    drawn = [
        request("report-upload", "error(500)", 1),
        request("GET /v1/items/{id}", "ok", 2),
        request("report-upload", "error(500)", 3),
        request("report-upload", "error(500)", 4),
        request("GET /v1/items/{id}", "error(503)", 5),
        request("POST /v1/items", "error(503)", 6),
    ]
    assert FAILED_SHOWN == 2
    # The first failure of each route, in the order drawn, before a second of any.
    assert [r.trace_id for r in failed_shown(drawn)] == [1, 5]
    assert [r.trace_id for r in failed_shown(drawn[:4])] == [1, 3]


def test_a_background_jobs_failing_runs_count_as_its_runs_never_as_an_endpoints_requests() -> None:
    checked = 0
    for seed in range(40):
        incident = generate("hard", seed)
        world = World(incident)
        for service in {d.service for d in incident.distractions}:
            job = minor_job(world, service)
            if not job:
                continue
            telemetry = Telemetry(world, seed)
            requests = sample(telemetry.state, service, 0)
            runs = [r for r in requests if r.spans[0][2] == job]
            if not runs:
                continue
            assert {r.route for r in runs} == {job}
            text = telemetry.traces(service, 0)
            rows = _rows(text)
            kind = world.plan.by_name[service].kind
            assert sum(row[0] for row in rows.values()) == len(requests) - len(runs)
            assert set(rows) <= set(routes(kind))
            failed = sum(r.status != "ok" for r in runs)
            assert f"job {job}: {len(runs)} runs, {failed} failed, p99 " in text
            checked += 1
    assert checked >= 3


def _heading(request: Request) -> str:
    return f"trace {request.trace_id:08x} {request.total_ms:.0f}ms {request.status}"


def test_an_unknown_endpoint_is_refused_naming_the_endpoints_and_loses_nothing() -> None:
    env = ServiceIncidentEnvironment()
    _, entry = _start(env)
    seen = env.step(InspectTraces(target=entry))
    refused = env.step(InspectTraces(target=entry, endpoint="GET /no/such/route"))
    kind = next(card.kind for card in seen.topology if card.name == entry)
    assert refused.last_action_error == (
        f"unknown endpoint 'GET /no/such/route' of {entry}; its endpoints are: {', '.join(routes(kind))}"
    )
    assert refused.action_history[-1].refused and refused.step_count == 2 and not refused.done
    # What was seen stays, with its minute; the episode goes on.
    assert refused.visible_traces == seen.visible_traces and refused.as_of == seen.as_of
    scoped = env.step(InspectTraces(target=entry, endpoint=routes(kind)[0]))
    assert scoped.last_action_error is None and list(_rows(scoped.visible_traces[entry])) == [routes(kind)[0]]


class _Mirror(World):
    """A world whose services' states are another world's."""

    def __init__(self, incident: Incident, states: World) -> None:
        super().__init__(incident)
        self.mirrored = states

    def states_at(self, step: int) -> dict[str, ServiceState]:
        return self.mirrored.states_at(step)


def test_the_breakdown_reads_the_same_for_a_root_as_for_a_bystander_with_the_same_spans() -> None:
    """Traces are drawn from what the service does (its states), never from whether it is a root."""
    checked = 0
    for seed in range(10):
        incident = generate("medium", seed)
        world = World(incident)
        # The same spans: a world where the roots are bystanders, whose services do what the root world's do.
        calm = _Mirror(structs.replace(incident, faults=[], distractions=[]), world)
        assert not calm.root_causes
        for fault in incident.faults:
            text = Telemetry(world, seed).traces(fault.service, 0)
            assert _rows(text) and Telemetry(calm, seed).traces(fault.service, 0) == text
            requests = sample(Telemetry(world, seed).state, fault.service, 0)
            assert list(_rows(text).items()) == list(_rows("\n".join(breakdown(requests, tuple(_rows(text))))).items())
            checked += 1
    assert checked >= 10


def test_the_expert_weighs_trace_origins_by_the_failures_the_breakdown_counts() -> None:
    """Two services each start the two failed traces a view shows; the one whose view counts more
    failed requests ranks first, as an engineer ranks by how much failure a cause explains."""
    few = "\n".join(
        [
            "sampled 40 requests",
            "endpoint POST /v1/notify: 40 requests, 2 failed, p99 250 ms",
            *(f"trace 0000000{i} 90ms error(500)\n  notifications POST /v1/notify 90ms error(500)" for i in (1, 2)),
        ]
    )
    many = "\n".join(
        [
            "sampled 40 requests",
            "endpoint GET /v1/items/{id}: 20 requests, 5 failed, p99 300 ms",
            "endpoint POST /v1/jobs: 20 requests, 3 failed, p99 380 ms",
            *(f"trace 0000000{i} 90ms error(500)\n  recommendations POST /v1/jobs 90ms error(500)" for i in (3, 4)),
        ]
    )
    assert trace_origins(few) == {"notifications": 2} and trace_origins(many) == {"recommendations": 2}
    assert explained_failures(few) == {"notifications": 2.0}
    assert explained_failures(many) == {"recommendations": 8.0}


def test_after_a_fix_the_expert_looks_at_what_still_fails_and_every_look_is_accepted() -> None:
    scoped = 0
    for incident in TASKS["gen_hard"].incidents[:12]:
        env, agent = ServiceIncidentEnvironment(), ExpertAgent()
        obs = env.reset(task_id="gen_hard", incident_id=incident, seed=0)
        while not obs.done:
            action = agent.act(obs)
            obs = env.step(action)
            assert obs.last_action_error is None, (incident, action)
            if isinstance(action, InspectTraces) and action.errors_only:
                scoped += 1
                assert any(r.action in REMEDIES for r in obs.action_history)
                assert "shown: failed requests only" in obs.visible_traces[action.target]
    assert scoped


def test_a_log_backlog_on_a_root_drains_and_a_later_look_reads_its_lines() -> None:
    """Log shipping that delivers nothing is a backlog, not a blackout: a later look shows the fault's
    own lines, and the environment counts that look as evidence where the empty one was none."""
    for seed in range(6):
        incident = dataset.training_incident("hard", seed)
        root = incident.faults[0].service
        gapped = structs.replace(incident, log_gaps={root: "empty"})
        telemetry = Telemetry(World(gapped), seed)
        looks = [telemetry.look("logs", root, step) for step in range(8)]
        empty = [step for step, look in enumerate(looks) if "log shipper backlog" in look.text]
        assert empty and empty == list(range(len(empty))) and len(empty) < 5, empty
        drained = looks[len(empty)]
        assert drained.changed and drained.text.count("\n") >= 2
        # What a drained view shows is the service's own lines, as with no gap at all.
        assert drained.text == Telemetry(World(incident), seed).logs(root, drained.step)


def test_a_template_drawn_now_and_written_later_reads_as_filled_and_leaves_the_rng_alike() -> None:
    """`take` knows what each field of `fill` draws: a field that drew otherwise would shift every later
    draw of a trace sample."""
    for template in ["GET /v1/{int:1:999}", "{float:0.5:9.5}s", "tx {hex:8} {hex:3}", "{pick:a|b|c} x", "plain"]:
        filled_from, taken_from = random.Random(template), random.Random(template)
        written = fill(template, filled_from, {})
        assert replay(template, take(template, taken_from)) == written
        assert filled_from.getstate() == taken_from.getstate()
