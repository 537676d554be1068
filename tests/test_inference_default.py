"""`python inference.py` with nothing set: embedded server, expert agent, every task's evaluation incidents."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest
from inference_support import parse_transcript, run_inference

from service_incident.harness.evaluation import decode
from service_incident.tasks import TASKS

# The README promises the default run finishes in under two minutes on 2 cores.
DEFAULT_RUN_LIMIT_S = 120


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, float]:
    cwd = tmp_path_factory.mktemp("default")
    started = time.monotonic()
    result = run_inference(cwd=cwd)
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    return cwd, result.stdout, result.stderr, elapsed


def test_stdout_is_the_contract_for_every_evaluation_incident(default_run: tuple[Path, str, str, float]) -> None:
    _, stdout, _, elapsed = default_run
    episodes = parse_transcript(stdout)
    expected = sorted(f"{task.id}/{incident}" for task in TASKS.values() for incident in task.incidents)
    assert sorted(e.task for e in episodes) == expected
    assert {(e.env, e.model) for e in episodes} == {("service_incident", "expert")}
    for episode in episodes:
        assert episode.steps and episode.steps[-1]["done"] == "true"
        assert episode.end["success"] == ("true" if episode.score >= 0.5 else "false")
    assert statistics.fmean(e.score for e in episodes) >= 0.85
    assert elapsed < DEFAULT_RUN_LIMIT_S


def test_stderr_has_progress_and_summary(default_run: tuple[Path, str, str, float]) -> None:
    _, _, stderr, _ = default_run
    assert f"{len(parse_transcript(default_run[1]))}/" in stderr  # the progress bar
    assert "expert: mean score" in stderr and "(95% CI)" in stderr


def test_results_json_holds_every_step_with_its_observation(default_run: tuple[Path, str, str, float]) -> None:
    cwd, stdout, _, _ = default_run
    records = decode((cwd / "results" / "episodes.jsonl").read_bytes())
    printed = {e.task: e for e in parse_transcript(stdout)}
    assert {r.name for r in records} == set(printed)
    for record in records:
        assert f"{record.score:.2f}" == printed[record.name].end["score"]
        assert record.graded and record.error is None and record.breakdown
        assert record.reset is not None and record.reset.incident_id == record.incident
        assert len(record.trace) == record.steps == len(record.actions) == len(record.rewards)
        assert all(step.observation is not None and step.observation.step_count == step.step for step in record.trace)
        assert record.trace[-1].observation.score == record.score
        assert record.wall_s > 0 and record.tokens == 0


def test_the_report_has_agents_tasks_and_difficulties(default_run: tuple[Path, str, str, float]) -> None:
    report = (default_run[0] / "results" / "report.md").read_text()
    total = sum(len(task.incidents) for task in TASKS.values())
    assert f"| expert | {total} | 0." in report
    for task in TASKS.values():
        assert f"| {task.id} | {len(task.incidents)} | 0." in report
    for difficulty in {task.difficulty for task in TASKS.values()}:
        assert f"| {difficulty} |" in report.split("## Per difficulty")[1]


def test_a_saved_run_replays_without_a_server(default_run: tuple[Path, str, str, float], tmp_path: Path) -> None:
    cwd, stdout, _, _ = default_run
    replayed = run_inference("--replay", str(cwd / "results" / "episodes.jsonl"), "--output", str(tmp_path),
                             cwd=tmp_path, env={"ENV_URL": "http://127.0.0.1:9"})  # a server that is not there
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == stdout
    original = (cwd / "results" / "report.md").read_text()
    assert (tmp_path / "report.md").read_text().split("## Agents")[1] == original.split("## Agents")[1]


def test_help_explains_every_option(tmp_path: Path) -> None:
    result = run_inference("--help", cwd=tmp_path)
    assert result.returncode == 0
    for option in ("--agent", "--tasks", "--episodes", "--seeds", "--concurrency", "--output", "--env-url",
                   "--replay", "ENV_URL", "API_BASE_URL", "MODEL_NAME", "HF_TOKEN"):
        assert option in result.stdout
