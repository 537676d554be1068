"""The HTTP routes over real sockets: stateful episodes, discovery endpoints, MCP."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from serving import ManualClock, eventually

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import ACTION_NAMES, schemas
from service_incident.tasks import catalogue
from service_incident.wire import http_step_payload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_wire import every_look  # the agent whose frames grow the most


@pytest.fixture
def http(server_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server_url, timeout=5) as client:
        yield client


JSON = {"Content-Type": "application/json"}


def test_reset_without_a_body_or_with_an_empty_object_is_200(http: httpx.Client) -> None:
    with_charset = {"Content-Type": "application/json; charset=utf-8"}
    requests: list[dict[str, Any]] = [{}, {"json": {}}, {"content": b"{}", "headers": with_charset}]
    for kwargs in requests:
        response = http.post("/reset", **kwargs)
        assert response.status_code == 200
        body = response.json()
        assert body["episode_id"] == response.headers["Episode-Id"]
        assert body["done"] is False and body["reward"] == 0.0


def test_the_readme_curl_walkthrough_is_one_episode(http: httpx.Client) -> None:
    reset = http.post("/reset", json={"task_id": "easy", "seed": 42}).json()
    services = reset["observation"]["services"]
    first = http.post("/step", json={"action": "inspect_logs", "target": services[1]}).json()
    last = http.post("/step", json={"action": "declare", "target": services[0], "severity": "P0"}).json()
    state = http.get("/state").json()
    assert first["episode_id"] == last["episode_id"] == reset["episode_id"]
    assert first["observation"]["step_count"] == 1 and services[1] in first["observation"]["visible_logs"]
    assert last["done"] is True and last["observation"]["score"] is not None
    assert state == {
        "episode_id": reset["episode_id"],
        "step_count": 2,
        "task_id": "easy",
        "incident_id": reset["observation"]["incident_id"],
        "seed": 42,
        "done": True,
    }


def test_an_http_episode_s_replies_are_byte_for_byte_a_plain_encode_of_the_same_play(http: httpx.Client) -> None:
    # The server splices in the bytes of the metrics views its last reply carried; the bytes must not show it.
    env = ServiceIncidentEnvironment()
    observation = env.reset(task_id="gen_hard", seed=5, episode_id="ep-bytes")
    episode_id = http.post("/reset", json={"task_id": "gen_hard", "seed": 5, "episode_id": "ep-bytes"}).json()[
        "episode_id"
    ]
    looks = every_look(observation)
    spliced = 0
    while not observation.done:
        action = next(looks)
        body = msgspec.json.encode({"action": action})
        reply = http.post("/step", content=body, headers={**JSON, "Episode-Id": episode_id})
        observation = env.step(action)
        assert reply.content == msgspec.json.encode(http_step_payload(observation, episode_id))
        spliced += len(observation.visible_metrics)
    assert spliced > 0, "no metrics view was shown: the comparison proved nothing"


def test_episodes_are_addressed_by_header_body_or_query(http: httpx.Client) -> None:
    a = http.post("/reset", json={"episode_id": "ep-a", "seed": 1}).json()["episode_id"]
    b = http.post("/reset", json={"seed": 2}).json()["episode_id"]
    http.post("/step", json={"action": {"action": "inspect_metrics", "target": "db"}}, headers={"Episode-Id": a})
    http.post("/step", json={"action": {"action": "inspect_logs", "target": "db"}, "episode_id": a})
    http.post("/step", json={"action": "inspect_logs", "target": "db", "episode_id": b, "timeout_s": 5})
    state_a = http.get("/state", params={"episode_id": a}).json()
    assert state_a["step_count"] == 2
    assert state_a["episode_id"] == "ep-a"  # a chosen name names the episode; the id is the server's
    state_b = http.get("/state", headers={"Episode-Id": b}).json()
    assert (state_b["episode_id"], state_b["step_count"]) == (b, 1)  # unnamed: named by its id
    assert http.get("/state").json()["episode_id"] == b  # loopback: the most recent episode


def test_unknown_episode_is_404(http: httpx.Client) -> None:
    response = http.post("/step", json={"action": "inspect_logs", "target": "db", "episode_id": "nope"})
    assert response.status_code == 404 and "nope" in response.json()["detail"]
    assert http.get("/state", params={"episode_id": "nope"}).status_code == 404


@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/reset", b"{not json", []),
        ("/reset", b'{"task": "easy"}', ["task"]),
        ("/reset", b'{"task_id": "impossible"}', []),
        ("/reset", b'{"seed": -1}', []),
        ("/reset", b"[]", []),
        ("/step", b"", []),
        ("/step", b'{"message": "hello"}', ["action"]),
        ("/step", b'{"action": "inspect_logz", "target": "db"}', ["action"]),
        ("/step", b'{"action": {"action": "declare", "target": "db"}}', ["severity"]),
        ("/step", b'{"action": {"action": "inspect_logs", "target": "db"}, "force": 1}', ["force"]),
        ("/step", b'{"action": "inspect_logs", "target": "db", "timeout_s": -1}', ["timeout_s"]),
        ("/step", b'{"action": "inspect_logs", "target": "db", "episode_id": "a\\nb"}', ["episode_id"]),
        ("/reset", b'{"episode_id": "\\u65e5\\u672c"}', ["episode_id"]),
        ("/reset", b'{"episode_id": "ep\\r\\nSet-Cookie: x"}', ["episode_id"]),
    ],
)
def test_bad_requests_are_422_with_a_located_error(http: httpx.Client, path: str, body: bytes, loc: list[Any]) -> None:
    response = http.post(path, content=body, headers=JSON)
    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["loc"] == loc and error["msg"]


def test_step_before_any_http_episode_answers_like_a_fresh_environment(make_server: Any) -> None:
    url = make_server()
    step = httpx.post(f"{url}/step", json={"action": "inspect_logs", "target": "db"}).json()
    assert step["episode_id"] is None and "reset" in step["observation"]["last_action_error"]
    assert httpx.get(f"{url}/state").json()["episode_id"] is None


def test_http_episodes_are_bounded_in_number_and_idle_time(make_server: Any) -> None:
    clock = ManualClock()
    url = make_server(clock=clock, http_max_episodes=2, http_episode_idle_timeout_s=60)
    with httpx.Client(base_url=url) as http:
        ids = [http.post("/reset", json={"episode_id": f"ep-{i}"}).json()["episode_id"] for i in range(3)]
        assert http.get("/state", params={"episode_id": ids[0]}).status_code == 404  # least recently used
        assert http.get("/state", params={"episode_id": ids[2]}).status_code == 200
        assert http.get("/health").json()["http_episodes"] == 2
        clock.advance(61)
        eventually(lambda: http.get("/health").json()["http_episodes"] == 0, "idle episodes expired")
        assert http.get("/state", params={"episode_id": ids[2]}).status_code == 404


def test_discovery_endpoints(http: httpx.Client) -> None:
    assert http.get("/health").json()["status"] == "healthy"
    metadata = http.get("/metadata").json()
    assert metadata["name"] == "service_incident" and metadata["description"] and metadata["version"]
    schema = http.get("/schema").json()
    assert {k: schema[k] for k in ("action", "observation", "state")} == schemas()
    assert schema["reset_observation"] == schema["observation"]
    openapi = http.get("/openapi.json").json()
    assert openapi["info"]["version"].startswith("1.")
    assert {"/reset", "/step", "/state", "/health", "/metadata", "/schema", "/mcp", "/tasks"} <= set(openapi["paths"])
    refs = msgspec.json.encode(openapi).decode()
    for name in [ref.split('"')[0] for ref in refs.split('"#/components/schemas/')[1:]]:
        assert name in openapi["components"]["schemas"]


def test_tasks_publish_the_catalogue_and_nothing_more(http: httpx.Client) -> None:
    assert http.get("/tasks").json() == msgspec.json.decode(msgspec.json.encode(catalogue()))


def rpc(http: httpx.Client, method: str, params: dict[str, Any] | None = None, id: int = 1) -> dict[str, Any]:
    response = http.post("/mcp", json={"jsonrpc": "2.0", "method": method, "params": params or {}, "id": id})
    assert response.status_code == 200
    return response.json()


def test_mcp_errors_are_jsonrpc_with_http_200(http: httpx.Client) -> None:
    for body, code in ((b"", -32700), (b"{oops", -32700), (b"{}", -32600), (b"[]", -32600)):
        response = http.post("/mcp", content=body, headers=JSON)
        assert response.status_code == 200
        assert response.json()["jsonrpc"] == "2.0" and response.json()["error"]["code"] == code
    assert rpc(http, "nope")["error"]["code"] == -32601
    bad = rpc(http, "tools/call", {"name": "declare", "arguments": {"target": "db"}})
    assert bad["error"]["code"] == -32602 and "severity" in bad["error"]["message"]
    assert (
        rpc(http, "tools/call", {"name": "inspect_logs", "arguments": {"target": "db"}, "session_id": "nope"})["error"][
            "code"
        ]
        == -32602
    )


def test_mcp_tools_play_an_http_episode(http: httpx.Client) -> None:
    tools = rpc(http, "tools/list")["result"]["tools"]
    assert [t["name"] for t in tools] == list(ACTION_NAMES)
    assert all(t["inputSchema"]["type"] == "object" and "action" not in t["inputSchema"]["properties"] for t in tools)
    session = rpc(http, "openenv/session/create", {"task_id": "easy", "seed": 3})["result"]["session_id"]
    services = http.get("/state", params={"episode_id": session}).json()
    assert services["step_count"] == 0
    call = rpc(http, "tools/call", {"name": "inspect_logs", "arguments": {"target": "db"}, "session_id": session})
    result = call["result"]
    assert result["isError"] is False and result["content"][0]["type"] == "text"
    assert result["structuredContent"]["observation"]["step_count"] == 1
    assert rpc(http, "openenv/session/close", {"session_id": session})["result"] == {
        "session_id": session,
        "closed": True,
    }
    assert http.get("/state", params={"episode_id": session}).status_code == 404


def test_an_unknown_endpoint_is_refused_in_the_observation_and_the_episode_goes_on(http: httpx.Client) -> None:
    reset = http.post("/reset", json={"task_id": "gen_medium", "seed": 5}).json()["observation"]
    entry = next(card["name"] for card in reset["topology"] if card["user_facing"])
    traced = http.post("/step", json={"action": "inspect_traces", "target": entry}).json()
    refused = http.post("/step", json={"action": "inspect_traces", "target": entry, "endpoint": "POST /nowhere"})
    assert refused.status_code == 200
    observation = refused.json()["observation"]
    assert observation["last_action_error"].startswith(
        f"unknown endpoint 'POST /nowhere' of {entry}; its endpoints are: "
    )
    assert observation["visible_traces"] == traced["observation"]["visible_traces"]
    assert observation["as_of"]["traces"] == {entry: traced["observation"]["clock"][11:16]}
    endpoint = observation["last_action_error"].split("its endpoints are: ")[1].split(", ")[0]
    scoped = http.post("/step", json={"action": "inspect_traces", "target": entry, "endpoint": endpoint}).json()
    assert scoped["observation"]["last_action_error"] is None and scoped["observation"]["step_count"] == 3
    assert f"shown: endpoint {endpoint}" in scoped["observation"]["visible_traces"][entry]
