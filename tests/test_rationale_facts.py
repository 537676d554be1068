"""What counts as a fact in a rationale: what an engineer cites from the views of a root cause (release
versions, file paths, exit codes, pod states, exception names, clock times, ratios as percentages),
never generic words, and invented facts dilute. And a remedy's own disruption is never graded."""

from __future__ import annotations

import pytest

from service_incident import scoring
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import Observation, parse_action
from service_incident.tasks import TASKS, resolve_incident
from service_incident.world import World

FULL = scoring.WEIGHTS["response"]["rationale"]


def _play(task_id: str, actions: list[dict[str, object]]) -> Observation:
    env = ServiceIncidentEnvironment()
    observation = env.reset(task_id=task_id, seed=0, reward_mode="final")
    for action in actions:
        observation = env.step(parse_action(action))
    assert observation.done and observation.breakdown is not None
    return observation


def _credit(views: list[tuple[str, str]], *rationales: str) -> float:
    """The rationale credit for rationales after views, (service, text), of which "db" is the root named."""
    ledger = scoring.Ledger()
    for service, text in views:
        ledger.observe(text, frozenset({service}))
    return scoring.rationale_credit(rationales, ledger.observed, frozenset({"db"}))


# Real lines of a crash-looping root's health view and a bad release's logs and deploys.
HEALTH = (
    "deployment db image db:v1.25.10 replicas=4 ready=0\n"
    "  pod db-b331b9-5691b pid=2271 status=CrashLoopBackOff restarts=4 age=8d last_termination=Error (exit code 139)\n"
    "  pod db-b331b9-b89fd pid=2272 status=OOMKilled restarts=4 age=8d\n"
    "2026-03-29T14:00:00.579Z db-b331b9-b89fd db-api[1340]: CRIT  worker process exited on signal 11 (core dumped)"
)
LOGS = (
    '2026-03-29T13:59:55.187Z db-23c3e9-760e4 api[3380]: ERROR req=8830e363 "GET /v1/charges/ch_c8881fe1" status=500 '
    'panic="json: cannot unmarshal string into Go struct field Order.amount of type int64" build=v5.8.5\n'
    "2026-03-29T13:59:56.098Z db-23c3e9-760e4 api[3380]: ERROR TypeError: 'NoneType' object is not subscriptable\n"
    "2026-03-29T13:59:58.211Z db-23c3e9-760e4 api[3380]: ERROR dial tcp 10.42.0.17:5432: connect: connection refused\n"
    "2026-03-29T14:00:48.317Z db-23c3e9-760e4 api[3380]: INFO  health_check status=ok uptime=0h"
)
DEPLOYS = "2026-03-29T13:57:14Z deploy v5.8.5: logging format change by ci-bot; changed models/amount.go, schema/x.json"
METRICS = "p50 211 ms, p99 617 ms, error rate 0.0015, 931.0 req/s, cpu 23.1%, memory 49.9%"


@pytest.mark.parametrize(
    "rationale",
    [
        "v5.8.5 deployed 13:57 changed models/amount.go; errors started 13:59 with unmarshal panic on Order.amount",
        "all 4 pods CrashLoopBackOff exit 139 (signal 11), image v1.25.10, ready=0",
        "pod 5691b CrashLoopBackOff, b89fd OOMKilled",
        "TypeError on NoneType since 13:59, build=v5.8.5",
        "dial tcp 10.42.0.17:5432 refused since 13:59",
        "error rate 0.15% at 931 req/s after the rollback, cpu 23%",
    ],
)
def test_what_an_engineer_cites_from_a_roots_views_earns_the_credit(rationale: str) -> None:
    views = [("db", HEALTH), ("db", LOGS), ("db", DEPLOYS), ("db", METRICS)]
    assert _credit(views, rationale) == 1.0
    # The same views of a bystander back nothing.
    assert _credit([("api", text) for _, text in views], rationale) == 0.0


def test_clock_times_count_as_clocks_print_them_and_a_ratio_as_its_percentage() -> None:
    views = [("db", "2026-08-08T05:18:02Z deploy v1.25.10 by ci-bot; error rate 0.0265, cpu 99.8%")]
    assert _credit(views, "deployed 5:18, v1.25.10, 2.65% errors") == 1.0
    assert _credit(views, "v1.25.10 at 05:18, error ratio 0.998 of cpu") == 1.0
    # A percentage is not the ratio's number, nor a ratio a bare number.
    assert _credit(views, "v1.25.10 at 05:18, 0.0265% errors") < 1.0
    assert _credit(views, "v1.25.10 at 05:18, 265 errors") < 1.0


def test_generic_words_and_round_numbers_are_no_facts() -> None:
    views = [("db", LOGS), ("db", HEALTH), ("db", "remove 0 cluster(s), 1 2 5 10 20 workers, 0.5 s")]
    # Log levels, verbs, a request served, a health check passed, the year and small round numbers.
    assert _credit(views, "ERROR INFO WARN CRIT POST GET HTTP status=200 200 status=ok 2026 0 1 2 5 10 20 0.5") == 0.0
    # Words alone, however apt, earn nothing.
    assert _credit(views, "crash loop after a bad deploy: segfault, out of memory, none type error") == 0.0


def test_invented_facts_dilute_the_credit() -> None:
    views = [("db", HEALTH)]
    honest = _credit(views, "CrashLoopBackOff exit 139 signal 11")
    # Stuffing with every pod state and exception name: one of them is true, the rest dilute it.
    stuffed = _credit(
        views,
        "CrashLoopBackOff ImagePullBackOff ErrImagePull NullPointerException NoneType SIGSEGV "
        "OutOfMemoryError ECONNREFUSED v1.2.3 v2.0.1 main.go 13:05",
    )
    assert honest == 1.0 and stuffed < 0.1
    # The postmortem names the facts seen nowhere.
    episode = _play(
        "easy_incident_triage",
        [
            {"action": "inspect_deploys", "target": "payment-service", "rationale": "v9.9.9 shipped"},
            {
                "action": "rollback",
                "target": "payment-service",
                "rationale": "v5.8.5 changed models/amount.go at 13:57",
            },
            {"action": "declare", "target": "payment-service", "severity": "P0", "rationale": "v5.8.5 at 13:57"},
            {"action": "resolve", "target": "payment-service", "rationale": "rolled back v5.8.5"},
        ],
    )
    assert episode.postmortem is not None
    missed = episode.postmortem.missed["rationale"]
    assert "3 distinct fact(s)" in missed and "seen in no view (they dilute the credit): v9.9.9" in missed


def test_an_engineers_rationales_over_a_real_episode_earn_the_credit() -> None:
    """A responder's own words over the views it opened: the release, the file it changed, the panic."""
    last = _play(
        "easy_incident_triage",
        [
            {
                "action": "inspect_logs",
                "target": "payment-service",
                "rationale": "payment-service 55% errors, gateway 503 upstream returned 503",
            },
            {
                "action": "inspect_deploys",
                "target": "payment-service",
                "rationale": "panics tagged build=v5.8.5, uptime 0h suggests recent rollout",
            },
            {
                "action": "rollback",
                "target": "payment-service",
                "rationale": "v5.8.5 deployed 13:57 changed models/amount.go; errors started 13:59 "
                "with unmarshal panic on "
                "Order.amount build=v5.8.5",
            },
            {
                "action": "inspect_metrics",
                "target": "payment-service",
                "rationale": "verify rollback recovered error rate",
            },
            {
                "action": "declare",
                "target": "payment-service",
                "severity": "P0",
                "rationale": "payment-service (user-facing) failed 55% of requests after v5.8.5 deploy; rolled back, "
                "recovered to 0.15%",
            },
            {
                "action": "resolve",
                "target": "payment-service",
                "rationale": "rollback of v5.8.5 restored payment-service error rate and gateway to 0.2%; "
                "alerts resolved",
            },
        ],
    )
    assert last.breakdown is not None and last.breakdown["rationale"] == FULL


def test_a_remedys_own_disruption_is_not_graded_whichever_remedy_it_is() -> None:
    """Restart and rollback both fix a crash loop: the severity graded is the incident's, the same either way,
    though users meet the restart's rolling pods; and a restart of a bystander pushes users' impact past a
    threshold the severity never sees, as a rollback of it (nothing shipped) changes nothing."""
    incident = resolve_incident(TASKS["medium_incident_triage"], "medium_001", 0)
    root = incident.faults[0].service
    fixed: dict[str, World] = {}
    for remedy in ("restart", "rollback"):
        world = fixed[remedy] = World(incident)
        world.advance()
        world.advance()
        assert world.remediate(remedy, root) == "heals"
        for _ in range(3):
            world.advance()
    restart, rollback = fixed["restart"], fixed["rollback"]
    assert restart.user_facing_impact(2)[0] > rollback.user_facing_impact(2)[0]
    for step in range(restart.step + 1):
        assert restart.graded_impact(step) == pytest.approx(rollback.graded_impact(step))
    assert restart.severity() == rollback.severity()

    bystander = next(s.name for s in incident.services if s.name != root and s.kind != "database")
    untouched = World(incident)
    untouched.advance()
    for remedy in ("restart", "rollback"):
        world = World(incident)
        world.advance()
        world.remediate(remedy, bystander)
        assert world.graded_impact(world.step) == pytest.approx(untouched.user_facing_impact())
        assert world.severity() == untouched.severity()
    world = World(incident)
    world.advance()
    world.remediate("restart", bystander)
    assert world.user_facing_impact()[0] > untouched.user_facing_impact()[0] + 0.02


def test_the_figures_of_a_metrics_views_history_and_of_the_dashboard_are_seen() -> None:
    """A rationale quoting a root's metric history earns credit; quoting the dashboard dilutes nothing."""
    env = ServiceIncidentEnvironment()
    observation = env.reset(task_id="hard_incident_triage", seed=0, reward_mode="final")
    root = sorted(World(resolve_incident(TASKS["hard_incident_triage"], None, 0)).root_causes)[0]
    observation = env.step(parse_action({"action": "inspect_metrics", "target": root, "rationale": "paged"}))
    metrics = observation.visible_metrics[root]
    current = {f"{metrics.rps:.1f}", f"{metrics.p99_ms:.1f}", f"{metrics.cpu_pct:.1f}"}
    earlier = [f"{point.rps:.1f}" for point in metrics.history if f"{point.rps:.1f}" not in current][:3]
    board = next(iter(observation.dashboard.values())).split(", ")[0]  # e.g. "p99 1801 ms"
    assert len(earlier) == 3 and board
    rationale = f"{root} request rate went {' then '.join(earlier)} req/s; the board read {board}"
    observation = env.step(parse_action({"action": "scale_up", "target": root, "rationale": rationale}))
    observation = env.step(parse_action({"action": "resolve", "target": root, "rationale": rationale}))
    assert observation.done and (observation.breakdown or {})["rationale"] == pytest.approx(FULL)
