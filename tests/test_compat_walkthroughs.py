"""The three legacy systems' own README walkthroughs, played verbatim over HTTP on a loopback server.

Each is the request sequence its README prints (no episode ids: a loopback server continues the
latest episode), so a user of those systems can follow their old instructions unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest


@pytest.fixture
def http(server_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server_url) as client:
        yield client


def test_the_triage_walkthrough(http: httpx.Client) -> None:
    reset = http.post("/reset", json={"task_id": "easy", "seed": 42})
    logs = http.post("/step", json={"action": "inspect_logs", "target": "db"})
    declare = http.post("/step", json={"action": "declare", "target": "db", "severity": "P0"})
    state = http.get("/state")
    assert [r.status_code for r in (reset, logs, declare, state)] == [200, 200, 200, 200]
    assert "db" in logs.json()["observation"]["visible_logs"]
    assert declare.json()["done"] is True and declare.json()["observation"]["score"] is not None
    assert state.json()["step_count"] == 2 and state.json()["done"] is True


@pytest.mark.parametrize(("task_id", "target"), [("task_easy", "api-gateway"), ("task_hard", "redis-cache")])
def test_the_root_cause_walkthrough(http: httpx.Client, task_id: str, target: str) -> None:
    reset = http.post("/reset", json={"task_id": task_id})
    step = http.post("/step", json={"action_type": "read_logs", "target": target})
    grade = http.get("/grade")
    assert [r.status_code for r in (reset, step, grade)] == [200, 200, 200]
    assert reset.json()["observation"]["task_id"].startswith("rca_")
    assert step.json()["episode_id"] == reset.json()["episode_id"]
    assert step.json()["observation"]["last_action_error"] is None
    # The logs reset showed, looked at on purpose: a look, not a repeat.
    assert step.json()["observation"]["message"] == f"Inspected the logs of {target}."
    # /grade judges only once the episode is over: no scoring oracle mid-episode.
    assert grade.json()["done"] is False and grade.json()["score"] is None


def test_the_response_walkthrough(http: httpx.Client) -> None:
    """Investigate the gateway, then payment-service, roll it back, resolve: the resolve watches the
    rollback take hold, and a correct investigation and fix earn the remediation."""
    http.post("/reset", json={"task_id": "easy_incident_triage", "seed": 0})
    for move in (
        {"action_type": "investigate", "target_service": "api-gateway", "rationale": "users see 502s"},
        {"action_type": "investigate", "target_service": "payment-service", "rationale": "upstream errors"},
        {"action_type": "rollback", "target_service": "payment-service", "rationale": "failed migration"},
        {"action_type": "resolve", "target_service": "payment-service", "rationale": "rolled back"},
    ):
        step = http.post("/step", json=move)
        assert step.status_code == 200 and step.json()["observation"]["last_action_error"] is None, step.text
    final = step.json()
    assert final["done"] is True and final["observation"]["breakdown"]["remediation"] > 0
    # Its first look, at the logs reset showed, is no waste.
    assert final["observation"]["breakdown"]["waste"] == 0.0
    assert final["observation"]["score"] > 0.5
