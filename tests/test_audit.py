"""The oracle audit: its word list, its reach over every text of an observation, and real play."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from service_incident.harness.agents import REFERENCE_AGENTS
from service_incident.harness.audit import JUDGMENT, JUDGMENT_WORDS, STATUS_WORDS, audit, judged
from service_incident.models import Observation, Postmortem
from service_incident.tasks import TASKS

# What the world's own views print, judgment-free although some share a stem with the word list.
DATA = (
    "events (last 15m):\n  3m ago Warning Unhealthy pod/db-6c0889-9597b: Readiness probe failed: context deadline "
    "exceeded",
    "  1m ago Normal ScalingReplicaSet: rollout restart, all pods replaced",
    "2026-03-29T13:58:06.687Z orders-dc3809-a192f orders-api[4929]: INFO  health_check status=ok uptime=114h",
    "2026-03-05T20:24:50.518Z cache-4b55c9-86a1c redis[4594]: WARN  CLUSTERDOWN The cluster is down: failover in "
    "progress",
    "trace 296c423c 176ms error(upstream error)\n  gateway POST /v1/charges 245ms ok",
    "p99 412 ms, error rate 0.0100, 52.0 req/s",
    "Inspected the logs of db.",
    "status=Running restarts=0",
    "critical",
    "firing",
)


@pytest.mark.parametrize("word", JUDGMENT_WORDS)
def test_every_judgment_word_is_caught_inside_a_sentence(word: str) -> None:
    assert JUDGMENT.search(f"db: {word.upper()} since 10:02, see the logs")


@pytest.mark.parametrize("word", STATUS_WORDS)
def test_a_bare_status_is_a_verdict_but_a_status_field_in_a_line_is_data(word: str) -> None:
    assert JUDGMENT.search(word) and JUDGMENT.search(f" {word.capitalize()}.")
    assert not JUDGMENT.search(f"health_check status={word} uptime=3h")


@pytest.mark.parametrize("text", DATA)
def test_what_the_views_print_passes(text: str) -> None:
    assert not JUDGMENT.search(text)


def _fill(info: msgspec.inspect.Type, text: str) -> Any:
    """A value of a schema type in which every free-text position holds `text`."""
    match info:
        case msgspec.inspect.StrType() | msgspec.inspect.AnyType():
            return text
        case msgspec.inspect.LiteralType():
            return info.values[0]
        case msgspec.inspect.BoolType():
            return False
        case msgspec.inspect.IntType() | msgspec.inspect.FloatType():
            return 0
        case msgspec.inspect.ListType():
            return [_fill(info.item_type, text)]
        case msgspec.inspect.DictType():
            return {_fill(info.key_type, text): _fill(info.value_type, text)}
        case msgspec.inspect.UnionType():
            return _fill(next(t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)), text)
        case msgspec.inspect.StructType():
            return info.cls(**{f.name: _fill(f.type, text) for f in info.fields})
    raise AssertionError(f"no value for {info}")


def _carries_text(info: msgspec.inspect.Type) -> bool:
    match info:
        case msgspec.inspect.StrType() | msgspec.inspect.AnyType():
            return True
        case msgspec.inspect.ListType():
            return _carries_text(info.item_type)
        case msgspec.inspect.DictType():
            return _carries_text(info.key_type) or _carries_text(info.value_type)
        case msgspec.inspect.UnionType():
            return any(_carries_text(t) for t in info.types)
        case msgspec.inspect.StructType():
            return any(_carries_text(f.type) for f in info.fields)
    return False


_OBSERVATION = msgspec.inspect.type_info(Observation)
_TEXT_FIELDS = [f for f in _OBSERVATION.fields if _carries_text(f.type) and f.name != "postmortem"]
_NEUTRAL = _fill(_OBSERVATION, "gateway")


def test_the_schema_offers_the_text_fields_the_audit_must_reach() -> None:
    names = {f.name for f in _TEXT_FIELDS}
    assert {
        "message",
        "last_diagnostic",
        "dashboard",
        "alerts",
        "visible_logs",
        "visible_health",
        "visible_traces",
        "visible_deploys",
        "visible_db",
        "action_history",
        "last_action_error",
        "title",
    } <= names
    assert judged(_NEUTRAL) == []


@pytest.mark.parametrize("field", _TEXT_FIELDS, ids=lambda f: f.name)
def test_a_judgment_in_any_text_field_is_found(field: msgspec.inspect.Field) -> None:
    obs = msgspec.structs.replace(_NEUTRAL, **{field.name: _fill(field.type, "looks healthy")})
    found = judged(obs)
    assert found and all(hit.startswith(field.name) for hit in found), found


def test_a_dashboard_of_verdicts_is_found_where_it_lies() -> None:
    obs = msgspec.structs.replace(_NEUTRAL, dashboard={"db": "down", "cache": "ok", "api": "p99 80 ms"})
    assert judged(obs) == ["dashboard.db: down", "dashboard.cache: ok"]


def test_the_postmortem_alone_may_judge() -> None:
    verdict = _fill(msgspec.inspect.type_info(Postmortem), "the root cause, likely")
    assert judged(msgspec.structs.replace(_NEUTRAL, done=True, postmortem=verdict)) == []


@pytest.mark.parametrize("agent", ["random", "expert"])
def test_play_over_every_task_judges_nothing_and_pays_nothing_before_the_end(agent: str) -> None:
    episodes = [(task_id, seed) for task_id in TASKS for seed in (0, 1)]
    steps, found, paid = audit(episodes, REFERENCE_AGENTS[agent])
    assert steps >= len(episodes) and found == [] and paid == 0
