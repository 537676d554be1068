"""inference.py with the LLM agent against a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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

from service_incident.harness.cli import LLM_CALL_BUDGET
from service_incident.harness.llm import MAX_RETRIES
from service_incident.harness.records import decode
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
            EASY[0]: [failure(429), failure(500), inspect_first_service, text("The database looks down to me."),
                      declare_first_service],
            # Three unusable replies in a row: the episode is given up on.
            EASY[1]: [text("{not json"), text('{"action": "page_everyone"}'), no_choices()],
            # A server error that outlasts every retry.
            EASY[2]: [failure(503)] * (MAX_RETRIES + 1),
        },
        fallback=declare_first_service,
    )
    with stub.serve() as api:
        result = run_inference(
            "--agent", "llm", "--tasks", "easy", "--episodes", "3", "--output", str(tmp_path), cwd=tmp_path,
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
    assert f"easy/{EASY[2]}: model failure, not counted in stub-model's mean: EndpointFailure: model endpoint {api}" \
        in result.stderr
    report = (tmp_path / "report.md").read_text()
    assert "| stub-model | 2 | 0." in report and "| 1 | 1 model |" in report
    assert "## Not counted" in report and "InternalServerError (HTTP 503)" in report.split("## Not counted")[1]


def test_the_default_llm_run_fits_its_call_budget_and_prompts_with_task_schemas_and_observation(
    tmp_path: Path,
) -> None:
    stub = ScriptedOpenAI({}, fallback=declare_first_service)
    with stub.serve() as api:
        result = run_inference("--output", str(tmp_path), "--agent", "llm", cwd=tmp_path,
                               env={"API_BASE_URL": api, "MODEL_NAME": "stub-model", "HF_TOKEN": "test-key"})
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
