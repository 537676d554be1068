"""The TRL `environment_factory` class as GRPOTrainer drives it, and the prompt dataset it trains on.

TRL itself needs torch and a GPU to train; everything it does with the class is done here the way its
trainer does it: tools collected with `inspect.getmembers`, schemas built with transformers'
`get_json_schema`, `reset(**row)` with dataset rows, tools called with the model's arguments,
`get_reward` at the end.
"""

from __future__ import annotations

import functools
import inspect
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from holdout_support import KEY
from transformers.utils import get_json_schema

from service_incident import dataset
from service_incident.holdout import HoldoutKey
from service_incident.integrations import prompts, text
from service_incident.integrations.tools import TOOLS_BY_NAME
from service_incident.integrations.trl import IncidentToolEnv, ServiceIncidentToolEnv, episode_reward, for_tasks
from service_incident.models import InvalidAction, InvalidReset, Observation
from service_incident.tasks import TASKS

RESERVED = ("reset", "get_reward")


def trl_tools(environment: IncidentToolEnv) -> dict[str, Callable[..., Any]]:
    """The tools exactly as GRPOTrainer collects them from an environment instance."""
    return {
        name: member
        for name, member in inspect.getmembers(environment, predicate=inspect.ismethod)
        if name not in RESERVED and not name.startswith("_")
    }


def test_importable_without_trl_or_torch() -> None:
    probe = (
        "import sys; sys.modules['trl'] = sys.modules['torch'] = None\n"
        "import service_incident.integrations.trl as t; print(t.ServiceIncidentToolEnv.__name__)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ServiceIncidentToolEnv"


@pytest.mark.parametrize("task_id", ["easy", "gen_hard", "easy_incident_triage", "rca_03"])
def test_tool_schemas_are_the_actions_a_task_allows(task_id: str) -> None:
    tools = trl_tools(for_tasks(task_id)())
    assert sorted(tools) == sorted(TASKS[task_id].actions)
    for name, method in tools.items():
        function = get_json_schema(method)["function"]
        schema = TOOLS_BY_NAME[name].input_schema
        assert function["name"] == name and function["description"] == TOOLS_BY_NAME[name].description
        assert function["parameters"]["properties"].keys() == schema["properties"].keys()
        assert set(function["parameters"].get("required", [])) == set(schema["required"])
        assert all(prop["description"] for prop in function["parameters"]["properties"].values())
    if "declare" in tools:
        severity = get_json_schema(tools["declare"])["function"]["parameters"]["properties"]["severity"]
        assert severity["enum"] == ["P0", "P1", "P2"]


def test_the_default_class_has_the_generated_tasks_tools_and_pickles_by_name() -> None:
    assert sorted(trl_tools(ServiceIncidentToolEnv())) == sorted(TASKS["gen_easy"].actions)
    # TRL's asynchronous trainer pickles the factory into its rollout worker.
    assert pickle.loads(pickle.dumps(ServiceIncidentToolEnv)) is ServiceIncidentToolEnv


def _play(environment: IncidentToolEnv, row: dict[str, Any]) -> tuple[list[str], list[Observation]]:
    """A scripted policy: look at every service's logs while the budget allows, then end the episode
    with the task's terminal action. Returns each tool's text and the observation after it."""
    tools = trl_tools(environment)
    environment.reset(**row)
    first = environment.observation
    assert first is not None
    task = TASKS[first.task_id]
    why = {"rationale": "the logs and alerts point there"} if task.rationale_required else {}
    calls = [("inspect_logs", {"target": s, **why}) for s in first.services[: task.max_steps - 2]]
    if "declare" in task.actions:
        calls.append(("declare", {"target": first.services[0], "severity": "P1", **why}))
    else:
        calls.append(("declare_rca", {"targets": first.services[:1]}))
    if task.ends_on == ("resolve",):
        calls.append(("resolve", why))
    texts, seen = [], [first]
    for name, arguments in calls:
        texts.append(tools[name](**arguments))
        seen.append(environment.observation)
    return texts, seen


@pytest.mark.parametrize("task_id", ["medium", "gen_medium", "easy_incident_triage", "rca_05"])
def test_whole_episodes_through_the_class_for_each_task_family(task_id: str) -> None:
    row = {"prompt": [{"role": "user", "content": "…"}], "task_id": task_id, "seed": 5}
    environment = for_tasks(task_id)()
    texts, seen = _play(environment, row)
    last = seen[-1]
    assert last.done is True and last.score is not None
    assert environment.get_reward() == last.score
    assert episode_reward([environment]) == [last.score]
    with pytest.raises(ValueError, match="episode is over"):
        trl_tools(environment)["inspect_logs"](target=last.services[0])
    for tool_text, before, after in zip(texts, seen[:-1], seen[1:], strict=True):
        assert tool_text == text.revealed(before, after)  # what the action revealed, nothing more
    # Over an episode the tools tell far less than the cumulative observations would.
    assert sum(map(len, texts)) < sum(len(msgspec.json.encode(after)) for after in seen[1:]) / 2


def test_a_truncated_rollout_earns_nothing_and_dense_mode_returns_the_step_return_the_score() -> None:
    environment = ServiceIncidentToolEnv()
    environment.reset(task_id="gen_easy", seed=9, prompt=[])
    environment.inspect_logs(target=environment.observation.services[0])
    assert environment.get_reward() == 0.0
    dense = ServiceIncidentToolEnv()
    _, seen = _play(dense, {"prompt": [], "task_id": "gen_easy", "seed": 9, "reward_mode": "dense"})
    assert dense.get_reward() == pytest.approx(sum(o.reward for o in seen))
    assert seen[-1].done and dense.get_reward() == pytest.approx(seen[-1].score, abs=1e-9)


def test_bad_tool_arguments_raise_for_trl_to_hand_back_and_cost_no_step() -> None:
    environment = ServiceIncidentToolEnv()
    environment.reset(task_id="gen_easy", seed=1, prompt=[])
    with pytest.raises(InvalidAction, match="severity"):
        environment.declare(target="db", severity="P7")
    with pytest.raises(TypeError):
        environment.inspect_logs(service="db")  # a hallucinated argument name
    assert environment.observation.step_count == 0


def test_without_a_dataset_reset_samples_a_training_incident_and_gives_the_instructions() -> None:
    environment = ServiceIncidentToolEnv()
    page = environment.reset()
    observation = environment.observation
    assert observation.task_id in prompts.GENERATED_TASKS and "-train-" in observation.incident_id
    assert page == prompts.instructions(TASKS[observation.task_id]) + text.page(observation)


def test_training_rows_never_reach_the_evaluation_incidents(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    assert prompts.main(["--out", str(tmp_path), "--seeds", "3"]) == 0
    # Each file is a split of its own: training rows name no incident, evaluation rows do.
    train = list(datasets.load_dataset("json", data_files=str(tmp_path / "train.jsonl"), split="train"))
    held_out = list(datasets.load_dataset("json", data_files=str(tmp_path / "eval.jsonl"), split="train"))
    assert train == prompts.training_rows(3)
    assert [r["task_id"] for r in train[:4]] == list(prompts.GENERATED_TASKS)  # seed-major
    frozen = set(dataset.frozen())
    assert {r["incident_id"] for r in held_out} == frozen
    environment = ServiceIncidentToolEnv()
    for row in train:
        environment.reset(**row)
        assert environment.observation.incident_id not in frozen
        assert environment.observation.task_id == row["task_id"]
    environment.reset(**held_out[0])
    assert environment.observation.incident_id == held_out[0]["incident_id"]


def test_curated_tasks_are_refused_as_training_rows(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="evaluation suites"):
        prompts.training_rows(1, ["gen_easy", "rca_01"])
    with pytest.raises(SystemExit):
        prompts.main(["--out", "unused", "--tasks", "easy"])
    assert "curated tasks are evaluation suites" in capsys.readouterr().err


def test_the_held_out_tasks_take_the_key_explicitly() -> None:
    factory = functools.partial(ServiceIncidentToolEnv, holdout_key=KEY)
    env = pickle.loads(pickle.dumps(factory))()  # as TRL's asynchronous trainer ships the factory
    env.reset(prompt=[], task_id="holdout_expert", seed=4)
    assert env.observation is not None and env.observation.incident_id == HoldoutKey(KEY).incident_id("expert", 4)
    assert sorted(trl_tools(for_tasks("holdout_expert")())) == sorted(TASKS["gen_expert"].actions)
    declared = trl_tools(env)["declare"](target=env.observation.services[0], severity="P1")
    assert env.observation.done and env.get_reward() == env.observation.score and "postmortem" not in declared
    # The key is never read from anywhere else: without it the tasks are refused.
    with pytest.raises(InvalidReset, match="HOLDOUT_KEY"):
        ServiceIncidentToolEnv().reset(prompt=[], task_id="holdout_expert", seed=4)
