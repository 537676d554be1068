"""Agents written for the root-cause and response systems play whole episodes over the wire in their JSON."""

from __future__ import annotations

import json

import httpx
from websockets.sync.client import connect

RCA_MOVES = [
    {"action_type": "read_logs", "target": "api-gateway"},
    {"action_type": "check_metrics", "target": "redis-cache"},
    {"action_type": "run_db_query", "target": "postgres-db"},
    {"action_type": "restart_service", "target": "redis-cache"},
    {"action_type": "rollback_deployment", "target": "auth-service"},
    {"action_type": "declare_rca", "target": "redis-cache,auth-service"},
]
RESPONSE_MOVES = [
    {"action_type": "investigate", "target_service": "payment-service", "rationale": "gateway 502s name it"},
    {"action_type": "rollback", "target_service": "payment-service", "rationale": "errors follow the deploy"},
    {"action_type": "investigate", "target_service": "api-gateway", "rationale": "watch recovery"},
    {"action_type": "resolve", "target_service": "payment-service", "rationale": "5xx ratio back under SLO"},
]


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/ws"


def test_rca_agent_over_websocket(server_url: str) -> None:
    with connect(ws_url(server_url)) as socket:
        socket.send(json.dumps({"type": "reset", "data": {"task_id": "task_expert", "seed": 3}}))
        frame = json.loads(socket.recv())
        assert frame["type"] == "observation" and frame["data"]["observation"]["task_id"] == "rca_15"
        for move in RCA_MOVES:
            socket.send(json.dumps({"type": "step", "data": move}))
            frame = json.loads(socket.recv())
            assert frame["type"] == "observation", frame
            assert frame["data"]["observation"]["last_action_error"] is None
        assert frame["data"]["done"] is True
        assert frame["data"]["observation"]["breakdown"]["root_cause"] == 0.4


def test_response_agent_over_http(server_url: str) -> None:
    with httpx.Client(base_url=server_url) as http:
        reset = http.post("/reset", json={"task_id": "easy_incident_triage", "incident_id": "easy_001", "seed": 1})
        assert reset.status_code == 200
        for move in RESPONSE_MOVES:
            response = http.post("/step", json={"action": move})
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["observation"]["last_action_error"] is None
        assert body["done"] is True and body["observation"]["breakdown"]["remediation"] > 0


def test_flat_seed_shapes_over_http(server_url: str) -> None:
    with httpx.Client(base_url=server_url) as http:
        assert http.post("/reset", json={"task_id": "task_disk_full", "seed": 2}).status_code == 200
        for move in (
            {"action_type": "read_logs", "target": "postgres-db"},
            {"action_type": "declare_rca", "target": "postgres-db"},
        ):
            response = http.post("/step", json=move)
            assert response.status_code == 200, response.text
        assert response.json()["done"] is True


def test_grade_is_empty_until_the_episode_ends(server_url: str) -> None:
    with httpx.Client(base_url=server_url) as http:
        episode = http.post("/reset", json={"task_id": "task_cpu_spike", "seed": 4}).json()["episode_id"]
        headers = {"Episode-Id": episode}
        early = http.get("/grade", headers=headers).json()
        assert early == {"episode_id": episode, "done": False, "score": None, "breakdown": None}
        http.post("/step", json={"action_type": "declare_rca", "target": "auth-service"}, headers=headers)
        final = http.get("/grade", headers=headers).json()
        assert final["done"] is True and 0.01 <= final["score"] <= 0.99
        assert final["breakdown"]["root_cause"] == 0.4
