"""The evaluation as a library: any async policy on either session, the reference ladder, failures
and whose they are, the stdout lines, the reply parser."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec
import pytest
from inference_support import EXPERT_FLOOR
from openai.types.chat import ChatCompletionMessage

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness import report
from service_incident.harness.evaluation import (
    MAX_UNUSABLE_REPLIES,
    EndpointFailure,
    EpisodeRecord,
    EpisodeSpec,
    StepRecord,
    Turn,
    describe,
    evaluate,
    plan,
    reference_policy,
    transcript,
)
from service_incident.harness.llm import (
    InvalidReply,
    LLMSettings,
    LLMUnavailable,
    MissingApiKey,
    delta_prompt,
    parse_reply,
    user_prompt,
)
from service_incident.harness.session import InProcess, Session, WebSocket
from service_incident.models import (
    Action,
    CheckHealth,
    Declare,
    DeclareRootCauses,
    InspectLogs,
    Observation,
    ResetRequest,
)
from service_incident.tasks import TASKS

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


class Recorded:
    """In-process sessions that keep every reset request, and can be told to fail a step."""

    where = "recorded"

    def __init__(self, fail_step: int | None = None) -> None:
        self.requests: list[ResetRequest] = []
        self.fail_step = fail_step

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Session]:
        async with InProcess().open() as inner:
            yield _Recording(self, inner)


class _Recording:
    def __init__(self, owner: Recorded, inner: Session) -> None:
        self.owner, self.inner, self.steps = owner, inner, 0

    async def reset(self, request: ResetRequest) -> Observation:
        self.owner.requests.append(request)
        return await self.inner.reset(request)

    async def step(self, action: Action) -> Observation:
        self.steps += 1
        if self.steps == self.owner.fail_step:
            raise ConnectionResetError("the session went away")
        return await self.inner.step(action)


async def test_any_async_policy_can_be_evaluated(server_url: str) -> None:
    async def declare_first(observation: Observation) -> Declare:
        return Declare(target=observation.services[0], severity="P1")

    seen: list[str] = []
    specs = plan([TASKS["easy"], TASKS["gen_medium"]], episodes=3)
    records = await evaluate(
        lambda spec: declare_first,
        specs,
        agent="mine",
        base_url=server_url,
        concurrency=4,
        on_episode=lambda record: seen.append(record.name),
    )
    assert [r.name for r in records] == [s.name for s in specs]  # in the order given
    assert sorted(seen) == sorted(s.name for s in specs)
    assert all(r.graded and r.steps == 1 and r.agent == "mine" and r.error is None for r in records)


async def test_in_process_and_websocket_sessions_play_byte_identical_episodes(server_url: str) -> None:
    specs = plan([TASKS["hard"], TASKS["gen_expert"], TASKS["rca_15"], TASKS["easy_incident_triage"]], episodes=3)
    played = {}
    for sessions in (InProcess(), WebSocket(server_url)):
        records = await evaluate(reference_policy("expert"), specs, agent="expert", sessions=sessions)
        # Wall time and the episode's random id aside, everything recorded is the same, every
        # observation included.
        played[sessions.where] = [
            re.sub(rb'"episode_id":"[^"]*"', b"", msgspec.json.encode(msgspec.structs.replace(r, wall_s=0.0)))
            for r in records
        ]
    in_process, over_websocket = played.values()
    assert in_process == over_websocket and len(in_process) == len(specs)


async def test_every_episode_is_played_with_final_rewards() -> None:
    sessions = Recorded()
    specs = plan([TASKS["easy"], TASKS["gen_easy"]], episodes=2)
    records = await evaluate(reference_policy("expert"), specs, sessions=sessions)
    assert {r.reward_mode for r in sessions.requests} == {"final"}
    assert sorted((r.task_id, r.incident_id, r.seed) for r in sessions.requests) == sorted(
        (s.task_id, s.incident_id, s.seed) for s in specs
    )
    assert all(r.graded for r in records)


async def test_a_policy_that_never_acts_is_given_up_on() -> None:
    async def mute(observation: Observation) -> Turn:
        return Turn(action=None, error="nothing to say", prompt_tokens=7)

    [record] = await evaluate(lambda spec: mute, plan([TASKS["easy"]], episodes=1), sessions=InProcess())
    assert record.steps == MAX_UNUSABLE_REPLIES and not record.graded and record.score == 0.01
    assert record.prompt_tokens == 7 * MAX_UNUSABLE_REPLIES and "unusable" in (record.error or "")
    assert record.failure == "agent" and record.counted


async def test_failures_are_the_agents_the_models_or_the_environments() -> None:
    async def broken(observation: Observation) -> Declare:
        raise RuntimeError("boom")

    async def unreachable(observation: Observation) -> Declare:
        raise EndpointFailure("model endpoint http://127.0.0.1:9/v1: APIConnectionError: Connection error.")

    specs = plan([TASKS["easy"]], episodes=4)
    policies = {specs[0].name: broken, specs[1].name: unreachable}
    records = await evaluate(
        lambda spec: policies.get(spec.name) or reference_policy("expert")(spec), specs, sessions=Recorded(fail_step=2)
    )
    assert [(r.failure, r.counted) for r in records] == [
        ("agent", True),
        ("model", False),
        ("environment", False),
        ("environment", False),
    ]
    assert records[0].error == "RuntimeError: boom" and records[0].reset is not None
    assert (
        records[1].error == "EndpointFailure: model endpoint http://127.0.0.1:9/v1: APIConnectionError: "
        "Connection error."
    )
    # The session failed on the second step: the first is kept.
    assert records[2].error == "ConnectionResetError: the session went away" and records[2].steps == 1
    summary = report.summarize(records)
    assert (summary.n, summary.failed, summary.apart) == (1, 1, {"model": 1, "environment": 2})


def test_the_reference_ladder_is_strictly_ordered_with_clear_gaps(
    reference_ladder: dict[str, list[EpisodeRecord]],
) -> None:
    """Over the whole evaluation set, through the WebSocket server, as the README's table shows."""
    specs = plan(TASKS.values())
    summaries = {}
    for name, records in reference_ladder.items():
        assert [r.name for r in records] == [s.name for s in specs]
        assert not any(r.error for r in records)
        summaries[name] = report.summarize(records)
    assert list(summaries) == ["random", "symptom_chaser", "structured", "expert"]
    for gap in report.gaps(summaries):
        assert gap.clear, gap
    assert summaries["expert"].mean >= EXPERT_FLOOR
    section = README.split("<!-- inference:begin -->")[1].split("<!-- inference:end -->")[0]
    for name, s in summaries.items():
        # The figures, as the report's Agents table starts each row.
        figures = f"| {name} | {s.n} | {s.cell} | {s.success:.0%} | {s.steps:.1f} |"
        assert figures in section, (
            "README's ladder is stale: run `python inference.py --agent random,symptom_chaser,structured,expert` "
            "and copy the Agents table of results/report.md"
        )


def test_step_lines_follow_the_contract() -> None:
    action = Declare(target="db", severity="P0", additional_targets=["cache"])
    record = EpisodeRecord(
        name="easy/easy_001",
        task="easy",
        incident="easy_001",
        seed=1,
        agent="a",
        steps=2,
        rewards=[0.1, -0.25],
        score=0.456,
        success=False,
    )
    record.trace = [
        StepRecord(
            step=1,
            action=InspectLogs(target="db"),
            action_text="inspect_logs(db)",
            reward=0.1,
            done=False,
            error="unknown service 'x';\n  services are: db",
            observation=None,
        ),
        StepRecord(
            step=2, action=action, action_text=describe(action), reward=-0.25, done=True, error=None, observation=None
        ),
    ]
    assert transcript(record) == [
        "[START] task=easy/easy_001 env=service_incident model=a",
        "[STEP] step=1 action=inspect_logs(db) reward=0.10 done=false error=unknown service 'x'; services are: db",
        "[STEP] step=2 action=declare(db+cache,P0) reward=-0.25 done=true error=null",
        "[END] success=false steps=2 score=0.46 rewards=0.10,-0.25",
    ]
    assert describe(DeclareRootCauses(targets=["a", "b"])) == "declare_rca(a+b)"


def test_an_action_with_arguments_of_its_own_is_described_whole() -> None:
    class ToggleFlag(InspectLogs.__mro__[1], tag="toggle_flag"):  # any action the models come to define
        target: str
        flag: str
        enabled: bool = False

    assert describe(ToggleFlag(target="checkout", flag="new pricing", rationale="x y")) == (
        "toggle_flag(checkout,new_pricing,False)"
    )


def test_plan_names_episodes_uniquely() -> None:
    specs = plan([TASKS["easy"]], episodes=2, seeds=[3, 4])
    assert [s.name for s in specs] == [f"easy/{i}@{seed}" for i in TASKS["easy"].incidents[:2] for seed in (3, 4)]
    assert plan([TASKS["easy"]], episodes=1) == [
        EpisodeSpec(
            name=f"easy/{TASKS['easy'].incidents[0]}", task_id="easy", incident_id=TASKS["easy"].incidents[0], seed=42
        )
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"action": "inspect_logs", "target": "db"}', InspectLogs(target="db")),
        ('Sure.\n```json\n{"action": "inspect_logs", "target": "db"}\n```', InspectLogs(target="db")),
        (
            '<think>maybe {"action": "declare"}?</think>{"action": "inspect_logs", "target": "db"}',
            InspectLogs(target="db"),
        ),
        (
            'I set {x} aside. {"action": "declare", "target": "db", "severity": "P1"} done',
            Declare(target="db", severity="P1"),
        ),
    ],
)
def test_replies_are_parsed_robustly(content: str, expected: object) -> None:
    assert parse_reply(ChatCompletionMessage(role="assistant", content=content)) == expected


def test_tool_calls_are_actions() -> None:
    message = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "1",
                    "type": "function",
                    "function": {"name": "act", "arguments": '{"action": "inspect_logs", "target": "db"}'},
                }
            ],
        }
    )
    assert parse_reply(message) == InspectLogs(target="db")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("no json here", "holds no JSON object"),
        ('{"action": "reboot_the_world"}', "not a valid action"),
        ('{"action": "declare", "target": "db"}', "severity"),
    ],
)
def test_unusable_replies_say_why(content: str, reason: str) -> None:
    with pytest.raises(InvalidReply, match=reason):
        parse_reply(ChatCompletionMessage(role="assistant", content=content))


def test_llm_settings_come_from_the_usual_variables() -> None:
    settings = LLMSettings.from_env({"API_KEY": "a", "OPENAI_API_KEY": "b", "MODEL_NAME": "m"})
    assert (settings.api_key, settings.model) == ("a", "m")
    assert LLMSettings.from_env({"HF_TOKEN": "h", "API_KEY": "a"}).api_key == "h"
    with pytest.raises(MissingApiKey, match="HF_TOKEN"):
        LLMSettings.from_env({"API_KEY": ""})


def test_prompts_print_text_views_as_they_read_and_a_chat_turn_only_what_changed() -> None:
    env = ServiceIncidentEnvironment()
    reset = env.reset(task_id="gen_easy", seed=3)
    [(first, _)] = reset.visible_logs.items()
    other = next(s for s in reset.services if s != first)
    after = env.step(CheckHealth(target=other))
    whole = user_prompt(after)
    # Each view headed by the minute it was taken: the logs from reset keep theirs.
    then, now = reset.clock[11:16], after.clock[11:16]
    assert then != now
    assert f"--- logs of {first} (as of {then}) ---\n{after.visible_logs[first]}" in whole
    assert f"--- health of {other} (as of {now}) ---\n{after.visible_health[other]}" in whole
    turn = delta_prompt(reset, after)
    assert f"--- health of {other} (as of {now}) ---" in turn and f"--- logs of {first} " not in turn
    assert '"topology"' not in turn and '"topology"' in whole
    for prompt in (whole, turn):
        assert '"reward"' not in prompt and '"metadata"' not in prompt and '"score"' not in prompt


def test_the_llm_agent_without_the_openai_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openai" else real(name, *a))
    with pytest.raises(LLMUnavailable, match=r"\[llm\]"):
        LLMSettings.from_env({"HF_TOKEN": "x"})
