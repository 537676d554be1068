"""`python inference.py` with nothing set: embedded server, expert agent, every task's evaluation incidents."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from inference_support import EXPERT_FLOOR, parse_transcript, run_inference

from service_incident.harness.records import decode
from service_incident.tasks import TASKS

Run = tuple[Path, str, str]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    cwd = tmp_path_factory.mktemp("default")
    result = run_inference(cwd=cwd)
    assert result.returncode == 0, result.stderr
    return cwd, result.stdout, result.stderr


def test_stdout_is_the_contract_for_every_evaluation_incident(default_run: Run) -> None:
    _, stdout, _ = default_run
    episodes = parse_transcript(stdout)
    expected = sorted(f"{task.id}/{incident}" for task in TASKS.values() for incident in task.incidents)
    assert sorted(e.task for e in episodes) == expected
    assert {(e.env, e.model) for e in episodes} == {("service_incident", "expert")}
    for episode in episodes:
        assert episode.steps and episode.steps[-1]["done"] == "true"
        assert episode.end["success"] == ("true" if episode.score >= 0.5 else "false")  # the score as printed
    assert statistics.fmean(e.score for e in episodes) >= EXPERT_FLOOR


def test_stderr_has_progress_and_summary(default_run: Run) -> None:
    _, _, stderr = default_run
    assert f"{len(parse_transcript(default_run[1]))}/" in stderr  # the progress bar
    assert "expert: mean score" in stderr and "(95% CI)" in stderr


def test_results_json_holds_every_step_with_its_observation(default_run: Run) -> None:
    cwd, stdout, _ = default_run
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


def test_the_report_has_agents_tasks_and_difficulties(default_run: Run) -> None:
    report = (default_run[0] / "results" / "report.md").read_text()
    total = sum(len(task.incidents) for task in TASKS.values())
    assert f"| expert | {total} | 0." in report
    for task in TASKS.values():
        assert f"| {task.id} | {len(task.incidents)} | 0." in report
    for difficulty in {task.difficulty for task in TASKS.values()}:
        assert f"| {difficulty} |" in report.split("## Per difficulty")[1]


def test_a_saved_run_replays_without_a_server(default_run: Run, tmp_path: Path) -> None:
    cwd, stdout, _ = default_run
    replayed = run_inference(
        "--replay",
        str(cwd / "results" / "episodes.jsonl"),
        "--output",
        str(tmp_path),
        cwd=tmp_path,
        env={"ENV_URL": "http://127.0.0.1:9"},
    )  # a server that is not there
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == stdout
    original = (cwd / "results" / "report.md").read_text()
    assert (tmp_path / "report.md").read_text().split("## Agents")[1] == original.split("## Agents")[1]


def test_a_replay_reports_beside_the_file_it_read(default_run: Run, tmp_path: Path) -> None:
    lines = (default_run[0] / "results" / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "subset.jsonl").write_bytes(b"".join(lines[:6]))
    (tmp_path / "runs" / "episodes.jsonl").write_bytes(b"".join(lines[6:9]))
    for name, report, count in (("subset.jsonl", "subset.report.md", 6), ("episodes.jsonl", "report.md", 3)):
        replayed = run_inference("--replay", f"runs/{name}", cwd=tmp_path)
        assert replayed.returncode == 0, replayed.stderr
        assert len(parse_transcript(replayed.stdout)) == count
        written = (tmp_path / "runs" / report).read_text()
        assert f"| expert | {count} |" in written and f"replay=%2Fresults%2F{name}" in written
        assert f"report: runs/{report}" in replayed.stderr
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "episodes.jsonl",
        "report.md",
        "subset.jsonl",
        "subset.report.md",
    ]
    assert not (tmp_path / "results").exists()  # no other run's report was touched


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "No such file or directory"),
        (b"", "holds no episode records"),
        (b'{"name": "easy/easy_001"}\n', "line 1 is not an episode record"),
        (b"\n\n[START] task=x\n", "line 3 is not an episode record"),
    ],
)
def test_a_replay_of_anything_but_results_is_a_usage_error(tmp_path: Path, content: bytes | None, reason: str) -> None:
    path = tmp_path / "episodes.jsonl"
    if content is not None:
        path.write_bytes(content)
    replayed = run_inference("--replay", str(path), cwd=tmp_path)
    assert (replayed.returncode, replayed.stdout) == (2, "")
    assert "usage:" in replayed.stderr and f"--replay {path}: " in replayed.stderr and reason in replayed.stderr
    assert "Traceback" not in replayed.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if content is None else ["episodes.jsonl"])


def test_in_process_play_prints_what_the_websocket_run_printed(default_run: Run, tmp_path: Path) -> None:
    result = run_inference(
        "--in-process",
        "--tasks",
        "triage,response,gen_hard",
        "--output",
        str(tmp_path),
        cwd=tmp_path,
        env={"ENV_URL": "http://127.0.0.1:9"},
    )  # never contacted
    assert result.returncode == 0, result.stderr
    assert "in-process" in result.stderr
    over_websocket = {e.task: e for e in parse_transcript(default_run[1])}
    in_process = parse_transcript(result.stdout)
    assert len(in_process) == sum(
        len(TASKS[t].incidents) for t in TASKS if TASKS[t].suite in ("triage", "response") or t == "gen_hard"
    )
    for episode in in_process:
        assert episode == over_websocket[episode.task]
    assert "environment: in-process" in (tmp_path / "report.md").read_text()


def test_replay_links_of_a_multi_agent_run_open_each_agents_own_episode(tmp_path: Path) -> None:
    result = run_inference(
        "--in-process",
        "--agent",
        "random,symptom_chaser",
        "--tasks",
        "triage,rca",
        "--output",
        str(tmp_path),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    records = [r for r in decode((tmp_path / "episodes.jsonl").read_bytes()) if r.reset is not None]
    section = (tmp_path / "report.md").read_text().split("## Replay")[1]
    links = re.findall(r"^- \[(\S+) · (\S+)\]\((\S+)\): score (\S+)$", section, re.MULTILINE)
    assert len(links) == 10 and len({url for _, _, url, _ in links}) == 10
    for agent, name, url, score in links:
        assert url.startswith("/web/?") and "://" not in url
        query = parse_qs(urlsplit(url).query)
        assert query["replay"] == ["/results/episodes.jsonl"]
        # What the page opens: the episode of that name, else the n-th replayable one.
        [key] = query["episode"]
        named = [r for r in records if r.name == key]
        opened = named[0] if named else records[int(key)]
        assert (opened.agent, opened.name, f"{opened.score:.2f}") == (agent, name, score)


def test_help_explains_every_option(tmp_path: Path) -> None:
    result = run_inference("--help", cwd=tmp_path)
    assert result.returncode == 0
    for option in (
        "--agent",
        "--tasks",
        "--episodes",
        "--seeds",
        "--concurrency",
        "--output",
        "--env-url",
        "--in-process",
        "--replay",
        "--llm-mode",
        "--llm-reply",
        "ENV_URL",
        "API_BASE_URL",
        "MODEL_NAME",
        "HF_TOKEN",
    ):
        assert option in result.stdout
