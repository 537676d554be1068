"""inference.py with the LLM agent against a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
from inference_support import (
    USAGE,
    ScriptedOpenAI,
    failure,
    no_choices,
    observation_of,
    parse_transcript,
    run_inference,
    text,
    tool_call,
)

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.cli import LLM_CALL_BUDGET
from service_incident.harness.llm import FAILURES_TO_STOP, MAX_RETRIES, STILL_FIRING, delta_prompt, revealed
from service_incident.harness.records import decode
from service_incident.models import InspectLogs, InspectMetrics
from service_incident.tasks import TASKS

EASY = TASKS["easy"].incidents


def inspect_first_service(request: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    service = observation_of(request)["services"][0]
    return text(f'Let me look.\n```json\n{{"action": "inspect_logs", "target": "{service}"}}\n```')


def declare_first_service(request: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    service = observation_of(request)["services"][0]
    return tool_call("declare", {"target": service, "severity": "P0", "rationale": "scripted"})


def test_retries_unusable_replies_and_failures_each_episode_gets_its_end(tmp_path: Path) -> None:
    stub = ScriptedOpenAI(
        {
            # Rate limited, then a server error, both retried; a fenced JSON reply; prose the agent
            # cannot use (it gets the reason back); a tool call that declares.
            EASY[0]: [
                failure(429),
                failure(500),
                inspect_first_service,
                text("The database looks down to me."),
                declare_first_service,
            ],
            # Three unusable replies in a row: the episode is given up on.
            EASY[1]: [text("{not json"), text('{"action": "page_everyone"}'), no_choices()],
            # A server error that outlasts every retry.
            EASY[2]: [failure(503)] * (MAX_RETRIES + 1),
        },
        fallback=declare_first_service,
    )
    with stub.serve() as api:
        result = run_inference(
            "--agent",
            "llm",
            "--tasks",
            "easy",
            "--episodes",
            "3",
            "--output",
            str(tmp_path),
            cwd=tmp_path,
            env={"API_BASE_URL": api, "MODEL_NAME": "stub-model", "API_KEY": "test-key"},
        )
    # Episodes failed, so the run says it is not a clean measurement; stdout is still the contract.
    assert result.returncode == 1, result.stderr
    episodes = {e.task: e for e in parse_transcript(result.stdout)}
    assert set(episodes) == {f"easy/{incident}" for incident in EASY[:3]}
    assert {e.model for e in episodes.values()} == {"stub-model"}

    played = episodes[f"easy/{EASY[0]}"]
    assert stub.statuses[EASY[0]] == [429, 500, 200, 200, 200]
    assert [s["action"].split("(")[0] for s in played.steps] == ["inspect_logs", "null", "declare"]
    assert played.steps[0]["error"] == "null" and played.steps[2]["error"] == "null"
    assert played.steps[1]["error"].startswith("unusable reply: the reply holds no JSON object")
    assert (played.steps[1]["reward"], played.steps[1]["done"], played.steps[2]["done"]) == ("0.00", "false", "true")
    # The reason went back to the model with its next request.
    assert "could not be used" in stub.requests[EASY[0]][-1]["messages"][-1]["content"]
    assert "could not be used" not in stub.requests[EASY[0]][2]["messages"][-1]["content"]

    abandoned = episodes[f"easy/{EASY[1]}"]
    assert [s["action"] for s in abandoned.steps] == ["null"] * 3
    assert "not a valid action" in abandoned.steps[1]["error"]
    assert "holds no message" in abandoned.steps[2]["error"]
    assert abandoned.end == {"success": "false", "steps": "3", "score": "0.01", "rewards": "0.00,0.00,0.00"}

    failed = episodes[f"easy/{EASY[2]}"]
    assert stub.statuses[EASY[2]] == [503] * (MAX_RETRIES + 1)
    assert failed.steps == [] and failed.end["success"] == "false" and failed.end["steps"] == "0"

    records = {r.incident: r for r in decode((tmp_path / "episodes.jsonl").read_bytes())}
    per_reply = USAGE["prompt_tokens"] + USAGE["completion_tokens"]
    assert records[EASY[0]].tokens == 3 * per_reply and records[EASY[0]].graded
    assert records[EASY[1]].tokens == 3 * per_reply and "unusable replies" in (records[EASY[1]].error or "")
    assert "InternalServerError (HTTP 503)" in (records[EASY[2]].error or "") and records[EASY[2]].tokens == 0
    assert [records[i].failure for i in EASY[:3]] == [None, "agent", "model"]
    assert records[EASY[0]].trace[1].reply == "The database looks down to me."
    # The endpoint's failure is not the agent's: reported with its reason, left out of the mean.
    assert (
        f"easy/{EASY[2]}: model failure, not counted in stub-model's mean: EndpointFailure: model endpoint {api}"
        in result.stderr
    )
    report = (tmp_path / "report.md").read_text()
    assert "| stub-model | 2 | 0." in report and "| 1 | 1 model |" in report
    assert "## Not counted" in report and "InternalServerError (HTTP 503)" in report.split("## Not counted")[1]


def test_the_default_llm_run_fits_its_call_budget_and_prompts_with_task_schemas_and_observation(
    tmp_path: Path,
) -> None:
    stub = ScriptedOpenAI({}, fallback=declare_first_service)
    with stub.serve() as api:
        result = run_inference(
            "--output",
            str(tmp_path),
            "--agent",
            "llm",
            cwd=tmp_path,
            env={"API_BASE_URL": api, "MODEL_NAME": "stub-model", "HF_TOKEN": "test-key"},
        )
    assert result.returncode == 0, result.stderr
    episodes = parse_transcript(result.stdout)
    # Every task is played, and the step budgets of the episodes chosen fit the call budget.
    assert {e.task.split("/")[0] for e in episodes} == set(TASKS)
    worst = sum(TASKS[e.task.split("/")[0]].max_steps for e in episodes)
    assert worst <= LLM_CALL_BUDGET and f"at most {worst} model calls" in result.stderr

    request = stub.requests[TASKS["gen_easy"].incidents[0]][0]
    system, user = (m["content"] for m in request["messages"])
    assert TASKS["gen_easy"].description in system
    for action in TASKS["gen_easy"].actions:
        assert f'"enum": ["{action}"]' in system
    assert observation_of(request)["incident_id"] == TASKS["gen_easy"].incidents[0]
    assert "--- logs of " in user and "Steps left: " in user
    assert request["model"] == "stub-model" and request["temperature"] == 0.0


def test_the_llm_agent_without_a_key_fails_clearly(tmp_path: Path) -> None:
    result = run_inference("--agent", "llm", "--tasks", "easy", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "needs an API key" in result.stderr and "HF_TOKEN" in result.stderr
    assert not (tmp_path / "results").exists()


def investigate_then_declare(request: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    """A tool-calling model in chat mode: looks at each service but the first in turn, then declares the first."""
    services = observation_of(request)["services"]
    looked = sum(1 for m in request["messages"] if m["role"] == "assistant")
    if looked < len(services) - 1:
        return tool_call("inspect_logs", {"target": services[looked + 1]})
    return tool_call("declare", {"target": services[0], "severity": "P1"})


def run_llm(tmp_path: Path, stub: ScriptedOpenAI, *args: str) -> tuple[Any, str]:
    with stub.serve() as api:
        result = run_inference(
            "--agent",
            "llm",
            "--output",
            str(tmp_path),
            *args,
            cwd=tmp_path,
            env={"API_BASE_URL": api, "MODEL_NAME": "stub-model", "API_KEY": "test-key"},
        )
    return result, api


def test_tool_calling_in_chat_mode_adds_only_what_each_action_revealed(tmp_path: Path) -> None:
    incident = TASKS["hard"].incidents[0]
    stub = ScriptedOpenAI({}, fallback=investigate_then_declare)
    result, _ = run_llm(
        tmp_path, stub, "--tasks", "hard", "--episodes", "1", "--llm-mode", "chat", "--llm-reply", "tools"
    )
    assert result.returncode == 0, result.stderr
    [episode] = parse_transcript(result.stdout)
    requests = stub.requests[incident]
    services = observation_of(requests[0])["services"]
    assert [s["action"] for s in episode.steps] == [
        *(f"inspect_logs({s})" for s in services[1:]),
        f"declare({services[0]},P1)",
    ]

    # One tool per allowed action, from the actions' own schemas, and a call is required.
    first = requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == list(TASKS["hard"].actions)
    for tool in first["tools"]:
        parameters = tool["function"]["parameters"]
        assert "action" not in parameters["properties"] and "metadata" not in parameters["properties"]
        assert tool["function"]["description"]
    assert first["tool_choice"] == "required" and "response_format" not in first
    assert "JSON Schemas" not in first["messages"][0]["content"]  # the tools carry them

    # One conversation: each turn answers the last tool call with what that action revealed.
    last = requests[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user"] + ["assistant", "tool"] * (len(services) - 1)
    for turn, (call, answer) in enumerate(zip(last[2::2], last[3::2], strict=True), 1):
        assert answer["tool_call_id"] == call["tool_calls"][0]["id"]
        inspected = services[turn]
        # The new view, stamped with the minute it was taken: this step's.
        clock = json.loads(next(line for line in answer["content"].splitlines() if line.startswith("{")))["clock"]
        assert f"--- logs of {inspected} (as of {clock[11:16]}) ---" in answer["content"]
        # Only the new view: the logs seen before are not sent again, nor any reward.
        assert re.findall(r"--- logs of (\S+) ", answer["content"]) == [inspected]
        assert '"reward"' not in answer["content"] and "topology" not in answer["content"]
        assert len(answer["content"]) < len(last[1]["content"])
    assert all('"reward"' not in m["content"] for m in last if m["role"] in ("system", "user"))
    report = (tmp_path / "report.md").read_text()
    per_reply = USAGE["prompt_tokens"]
    [record] = decode((tmp_path / "episodes.jsonl").read_bytes())
    assert f"| stub-model | 1 | {record.score:.3f} |" in report
    assert f"| {len(services) * per_reply} |" in report  # prompt tokens per episode
    assert "chat mode, tools replies" in report


def test_json_mode_and_one_prompt_mode_resend_the_whole_observation(tmp_path: Path) -> None:
    incident = TASKS["medium"].incidents[0]

    def inspect_then_declare(request: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        observation = observation_of(request)
        if not observation["action_history"]:
            return text(json.dumps({"action": "inspect_logs", "target": observation["services"][1]}))
        return text(json.dumps({"action": "declare", "target": observation["services"][0], "severity": "P2"}))

    stub = ScriptedOpenAI({}, fallback=inspect_then_declare)
    result, _ = run_llm(tmp_path, stub, "--tasks", "medium", "--episodes", "1", "--llm-reply", "json", "--in-process")
    assert result.returncode == 0, result.stderr
    first, second = stub.requests[incident]
    assert first["response_format"] == {"type": "json_object"} and "tools" not in first
    assert [m["role"] for m in second["messages"]] == ["system", "user"]
    # The whole observation again: the logs seen at reset and those just revealed, each with the
    # minute it was taken, so the one from reset does not read as current.
    stamped = r"--- logs of (\S+) \(as of (\d\d:\d\d)\) ---"
    reset_minute, step_minute = (observation_of(request)["clock"][11:16] for request in (first, second))
    assert reset_minute != step_minute
    seen_at_reset = re.findall(stamped, first["messages"][1]["content"])
    inspected = observation_of(first)["services"][1]
    assert seen_at_reset and all(at == reset_minute for _, at in seen_at_reset)
    assert inspected not in [name for name, _ in seen_at_reset]
    assert re.findall(stamped, second["messages"][1]["content"]) == [*seen_at_reset, (inspected, step_minute)]
    assert '"reward"' not in second["messages"][1]["content"]


def test_the_token_limit_goes_under_the_name_the_endpoint_accepts(tmp_path: Path) -> None:
    seen: list[set[str]] = []

    def reasoning_model(request: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        seen.append({k for k in ("max_tokens", "max_completion_tokens") if k in request})
        if "max_tokens" in request:
            return (
                400,
                {
                    "error": {
                        "message": "Unsupported parameter: 'max_tokens' is not supported with this "
                        "model. Use 'max_completion_tokens' instead.",
                        "type": "invalid_request_error",
                        "param": "max_tokens",
                        "code": "unsupported_parameter",
                    }
                },
                {},
            )
        return declare_first_service(request)

    stub = ScriptedOpenAI({}, fallback=reasoning_model)
    result, _ = run_llm(tmp_path, stub, "--tasks", "easy", "--episodes", "3", "--concurrency", "1", "--in-process")
    assert result.returncode == 0, result.stderr
    assert seen == [{"max_tokens"}, {"max_completion_tokens"}, {"max_completion_tokens"}, {"max_completion_tokens"}]
    assert "token limit sent as `max_completion_tokens`" in (tmp_path / "report.md").read_text()


def test_a_failing_model_endpoint_is_reported_and_counted_apart(tmp_path: Path) -> None:
    stub = ScriptedOpenAI({}, fallback=failure(503))
    result, api = run_llm(tmp_path, stub, "--tasks", "easy", "--episodes", "5", "--concurrency", "1", "--in-process")
    assert result.returncode == 1
    episodes = parse_transcript(result.stdout)
    assert len(episodes) == 5 and all(e.steps == [] for e in episodes)
    # Each call is retried; after FAILURES_TO_STOP calls in a row failed the endpoint is not called again.
    assert sum(len(statuses) for statuses in stub.statuses.values()) == FAILURES_TO_STOP * (MAX_RETRIES + 1)
    reasons = [line for line in result.stderr.splitlines() if "model failure, not counted" in line]
    assert len(reasons) == 2  # the endpoint's error, then the run's decision to stop calling it
    assert f"model endpoint {api}: InternalServerError (HTTP 503)" in reasons[0]
    assert "not calling again" in reasons[1]
    records = decode((tmp_path / "episodes.jsonl").read_bytes())
    assert {r.failure for r in records} == {"model"}
    assert "| stub-model | 0 | - |" in (tmp_path / "report.md").read_text()
    assert "stub-model: no episode measured the agent; not counted: 5 model" in result.stderr


def test_a_refused_request_fails_its_episode_but_the_endpoint_is_still_called(tmp_path: Path) -> None:
    too_long = (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
        {},
    )
    stub = ScriptedOpenAI({}, fallback=too_long)
    result, _ = run_llm(tmp_path, stub, "--tasks", "easy", "--episodes", "5", "--concurrency", "1", "--in-process")
    assert result.returncode == 1
    # Not retried, and each episode still asks: a request refused says nothing of the next one.
    assert sorted(stub.statuses.values()) == [[400]] * 5
    records = decode((tmp_path / "episodes.jsonl").read_bytes())
    assert [r.failure for r in records] == ["model"] * 5
    assert all("BadRequestError (HTTP 400)" in (r.error or "") for r in records)


def test_a_chat_turn_keeps_an_alert_that_is_still_firing_in_view() -> None:
    """A page whose value did not move is still firing: the turn says so rather than dropping it."""
    env = ServiceIncidentEnvironment()
    before = env.reset(task_id="easy_incident_triage", seed=0)
    firing = [alert for alert in before.alerts if alert.status == "firing"]
    assert len(firing) >= 2
    moved = msgspec.structs.replace(firing[0], value=firing[0].value + 0.01)
    after = msgspec.structs.replace(
        env.step(InspectLogs(target=before.services[-1], rationale="look")), alerts=[moved, *before.alerts[1:]]
    )
    turn = delta_prompt(before, after)
    changed = revealed(before, after)
    assert changed["alerts"] == [msgspec.to_builtins(moved)]
    assert changed[STILL_FIRING] == [f"{a.service} {a.signal}" for a in firing[1:]]
    assert json.dumps(msgspec.to_builtins(moved), separators=(",", ":")) in turn
    assert all(f"{a.service} {a.signal}" in turn for a in firing[1:])
    # Nothing else new: the turn says nothing changed, and still lists every page that fires.
    quiet = delta_prompt(after, after)
    assert "nothing changed" in quiet and all(f"{a.service} {a.signal}" in quiet for a in firing[1:])


def test_a_chat_turn_shows_a_view_taken_again_even_where_it_reads_as_before() -> None:
    """A second look that reads as the first (a log backlog, a quiet service) is news of its own minute."""
    env = ServiceIncidentEnvironment()
    first = env.reset(task_id="gen_easy", seed=0)
    target = first.services[-1]
    before = env.step(InspectLogs(target=target, rationale="look"))
    after = env.step(InspectMetrics(target=target, rationale="look further"))
    # The logs asked for again: the same text at a later minute, as a log backlog reads.
    minutes = {**after.as_of, "logs": {**after.as_of["logs"], target: "23:59"}}
    after = msgspec.structs.replace(after, as_of=minutes)
    assert before.taken("visible_logs", target) != after.taken("visible_logs", target)
    turn = delta_prompt(before, after)
    assert f"--- logs of {target} (as of {after.taken('visible_logs', target)}) ---" in turn
    assert before.visible_logs[target] in turn
