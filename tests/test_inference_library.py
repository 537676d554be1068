"""The evaluation as a library: any async policy, the reference ladder, the stdout lines, the reply parser."""

from __future__ import annotations

from pathlib import Path

import pytest
from openai.types.chat import ChatCompletionMessage

from service_incident.harness import report
from service_incident.harness.agents import REFERENCE_AGENTS
from service_incident.harness.evaluation import (
    MAX_UNUSABLE_REPLIES,
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
from service_incident.harness.llm import InvalidReply, LLMSettings, MissingApiKey, parse_reply
from service_incident.models import Declare, DeclareRootCauses, InspectLogs, Observation
from service_incident.tasks import TASKS

EXPERT_FLOOR = 0.85
README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


async def test_any_async_policy_can_be_evaluated(server_url: str) -> None:
    async def declare_first(observation: Observation) -> Declare:
        return Declare(target=observation.services[0], severity="P1")

    seen: list[str] = []
    specs = plan([TASKS["easy"], TASKS["gen_medium"]], episodes=3)
    records = await evaluate(lambda spec: declare_first, specs, agent="mine", base_url=server_url, concurrency=4,
                             on_episode=lambda record: seen.append(record.name))
    assert [r.name for r in records] == [s.name for s in specs]  # in the order given
    assert sorted(seen) == sorted(s.name for s in specs)
    assert all(r.graded and r.steps == 1 and r.agent == "mine" and r.error is None for r in records)


async def test_a_policy_that_never_acts_is_given_up_on(server_url: str) -> None:
    async def mute(observation: Observation) -> Turn:
        return Turn(action=None, error="nothing to say", prompt_tokens=7)

    [record] = await evaluate(lambda spec: mute, plan([TASKS["easy"]], episodes=1), base_url=server_url)
    assert record.steps == MAX_UNUSABLE_REPLIES and not record.graded and record.score == 0.01
    assert record.prompt_tokens == 7 * MAX_UNUSABLE_REPLIES and "unusable" in (record.error or "")


async def test_a_failing_policy_fails_its_episode_only(server_url: str) -> None:
    async def broken(observation: Observation) -> Declare:
        raise RuntimeError("boom")

    specs = plan([TASKS["easy"]], episodes=2)
    records = await evaluate(lambda spec: broken if spec == specs[0] else reference_policy("expert")(spec), specs,
                             base_url=server_url)
    assert records[0].error == "RuntimeError: boom" and records[0].reset is not None
    assert records[1].error is None and records[1].graded


async def test_the_reference_ladder_is_strictly_ordered_with_clear_gaps(server_url: str) -> None:
    """Over the whole evaluation set, through the WebSocket server, as the README's table shows."""
    specs = plan(TASKS.values())
    summaries = {}
    for name in REFERENCE_AGENTS:
        records = await evaluate(reference_policy(name), specs, agent=name, base_url=server_url)
        assert not any(r.error for r in records)
        summaries[name] = report.summarize(records)
    assert list(summaries) == ["random", "symptom_chaser", "structured", "expert"]
    for gap in report.gaps(summaries):
        assert gap.clear, gap
    assert summaries["expert"].mean >= EXPERT_FLOOR
    section = README.split("<!-- inference:begin -->")[1].split("<!-- inference:end -->")[0]
    for row in report.agents_table(summaries):
        assert row in section, (
            "README's ladder is stale: run `python inference.py --agent random,symptom_chaser,structured,expert` "
            "and copy the Agents table of results/report.md"
        )


def test_step_lines_follow_the_contract() -> None:
    action = Declare(target="db", severity="P0", additional_targets=["cache"])
    record = EpisodeRecord(name="easy/easy_001", task="easy", incident="easy_001", seed=1, agent="a", steps=2,
                           rewards=[0.1, -0.25], score=0.456, success=False)
    record.trace = [
        StepRecord(step=1, action=InspectLogs(target="db"), action_text="inspect_logs(db)", reward=0.1,
                   done=False, error="unknown service 'x';\n  services are: db", observation=None),
        StepRecord(step=2, action=action, action_text=describe(action), reward=-0.25, done=True, error=None,
                   observation=None),
    ]
    assert transcript(record) == [
        "[START] task=easy/easy_001 env=service_incident model=a",
        "[STEP] step=1 action=inspect_logs(db) reward=0.10 done=false error=unknown service 'x'; services are: db",
        "[STEP] step=2 action=declare(db+cache,P0) reward=-0.25 done=true error=null",
        "[END] success=false steps=2 score=0.46 rewards=0.10,-0.25",
    ]
    assert describe(DeclareRootCauses(targets=["a", "b"])) == "declare_rca(a+b)"


def test_plan_names_episodes_uniquely() -> None:
    specs = plan([TASKS["easy"]], episodes=2, seeds=[3, 4])
    assert [s.name for s in specs] == [f"easy/{i}@{seed}" for i in TASKS["easy"].incidents[:2] for seed in (3, 4)]
    assert plan([TASKS["easy"]], episodes=1) == [
        EpisodeSpec(name=f"easy/{TASKS['easy'].incidents[0]}", task_id="easy",
                    incident_id=TASKS["easy"].incidents[0], seed=42)
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"action": "inspect_logs", "target": "db"}', InspectLogs(target="db")),
        ('Sure.\n```json\n{"action": "inspect_logs", "target": "db"}\n```', InspectLogs(target="db")),
        ('<think>maybe {"action": "declare"}?</think>{"action": "inspect_logs", "target": "db"}',
         InspectLogs(target="db")),
        ('I set {x} aside. {"action": "declare", "target": "db", "severity": "P1"} done',
         Declare(target="db", severity="P1")),
    ],
)
def test_replies_are_parsed_robustly(content: str, expected: object) -> None:
    assert parse_reply(ChatCompletionMessage(role="assistant", content=content)) == expected


def test_tool_calls_are_actions() -> None:
    message = ChatCompletionMessage.model_validate({
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "1", "type": "function",
                        "function": {"name": "act", "arguments": '{"action": "inspect_logs", "target": "db"}'}}],
    })
    assert parse_reply(message) == InspectLogs(target="db")


@pytest.mark.parametrize(
    ("content", "reason"),
    [("no json here", "holds no JSON object"), ('{"action": "reboot_the_world"}', "not a valid action"),
     ('{"action": "declare", "target": "db"}', "severity")],
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


def test_confidence_intervals_use_student_t() -> None:
    assert report.t975(1) == pytest.approx(12.706)
    assert report.t975(4) == pytest.approx(2.776, abs=1e-3)
    assert report.t975(30) == pytest.approx(2.042, abs=1e-3)
    records = [EpisodeRecord(name=str(i), task="easy", incident="", seed=0, agent="a", score=s)
               for i, s in enumerate((0.2, 0.4, 0.6))]
    summary = report.summarize(records)
    assert summary.mean == pytest.approx(0.4) and summary.ci == pytest.approx(4.303 * 0.2 / 3**0.5, rel=1e-3)
