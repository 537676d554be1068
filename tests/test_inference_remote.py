"""inference.py against a server started separately, named by ENV_URL (no embedded server)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from inference_support import INFERENCE, inference_environ, parse_transcript, run_inference

from service_incident.client import LocalServer
from service_incident.harness.records import decode
from service_incident.tasks import TASKS


def test_env_url_points_the_run_at_a_running_server(tmp_path: Path) -> None:
    with LocalServer() as server:
        result = run_inference(
            "--tasks",
            "hard,gen_hard",
            "--episodes",
            "2",
            "--seeds",
            "1,2",
            "--output",
            str(tmp_path),
            cwd=tmp_path,
            env={"ENV_URL": server.base_url},
        )
        alive = server.process is not None and server.process.poll() is None
    assert result.returncode == 0, result.stderr
    assert alive  # the run used the server and left it running
    assert f"against {server.base_url}" in result.stderr
    episodes = parse_transcript(result.stdout)
    expected = {
        f"{task}/{incident}@{seed}"
        for task in ("hard", "gen_hard")
        for incident in TASKS[task].incidents[:2]
        for seed in (1, 2)
    }
    assert {e.task for e in episodes} == expected
    records = decode((tmp_path / "episodes.jsonl").read_bytes())
    assert {(r.incident, r.seed) for r in records} == {
        (name.split("/")[1].split("@")[0], int(name[-1])) for name in expected
    }
    assert f"environment: {server.base_url}" in (tmp_path / "report.md").read_text()


def test_an_unreachable_server_is_reported_with_its_reason_and_nothing_is_played(tmp_path: Path) -> None:
    result = run_inference(
        "--tasks",
        "easy",
        "--episodes",
        "2",
        "--output",
        str(tmp_path / "out"),
        cwd=tmp_path,
        env={"ENV_URL": "http://127.0.0.1:9"},
    )
    assert (result.returncode, result.stdout) == (1, "")
    assert "cannot reach the environment at http://127.0.0.1:9: " in result.stderr
    assert "cannot open a session at ws://127.0.0.1:9/ws: " in result.stderr  # the client says why
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def children(pid: int) -> list[int]:
    return [
        int(child) for task in Path(f"/proc/{pid}/task").iterdir() for child in (task / "children").read_text().split()
    ]


def running(pid: int) -> bool:
    try:
        state = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State"))
    except FileNotFoundError:
        return False
    return "zombie" not in state


def default_sigint() -> None:
    # A shell starting a job in the background makes it ignore SIGINT; a terminal's Ctrl-C does not.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_sigterm_stops_a_run_like_ctrl_c(tmp_path: Path, stop: signal.Signals) -> None:
    """Episodes in flight end with their [END], the embedded server stops, the report covers what finished."""
    process = subprocess.Popen(
        [sys.executable, str(INFERENCE), "--agent", "random,expert", "--seeds", "1,2,3,4", "--concurrency", "2"],
        cwd=tmp_path,
        env=inference_environ(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # an episode has been played: the server is up
        assert first.startswith("[START]")
        [server] = children(process.pid)
        process.send_signal(stop)
        assert process.stderr is not None
        stdout, stderr = process.stdout.read(), process.stderr.read()
        process.wait(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 128 + stop, stderr
    assert f"stopped by {stop.name}; finished episodes are in results/episodes.jsonl" in stderr
    assert not running(server)
    episodes = parse_transcript(first + stdout)
    records = decode((tmp_path / "results" / "episodes.jsonl").read_bytes())
    assert [r.name for r in records] == [e.task for e in episodes]
    assert 0 < len(records) < 4 * 2 * sum(len(t.incidents) for t in TASKS.values())
    assert {r.failure for r in records} <= {None, "interrupted"}
    report = (tmp_path / "results" / "report.md").read_text()
    assert f"stopped by {stop.name} before every episode had finished" in report


def test_a_server_that_goes_away_mid_run_fails_the_rest_apart_from_the_mean(tmp_path: Path) -> None:
    server = LocalServer()
    url = server.start()
    try:
        process = subprocess.Popen(
            [
                sys.executable,
                str(INFERENCE),
                "--agent",
                "random",
                "--seeds",
                "1,2,3,4",
                "--concurrency",
                "1",
                "--env-url",
                url,
            ],
            cwd=tmp_path,
            env=inference_environ(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        assert first.startswith("[START]")
    finally:
        server.stop()
    stdout, stderr = process.stdout.read(), process.stderr.read()
    assert process.wait(timeout=60) == 1
    records = decode((tmp_path / "results" / "episodes.jsonl").read_bytes())
    assert [r.name for r in records] == [e.task for e in parse_transcript(first + stdout)]
    assert len(records) == 4 * sum(len(t.incidents) for t in TASKS.values())  # every episode has its [END]
    graded = [r for r in records if r.graded]
    failed = [r for r in records if r.failure == "environment"]
    assert graded and failed and len(graded) + len(failed) == len(records)
    assert "environment failure, not counted in random's mean" in stderr
    report = (tmp_path / "results" / "report.md").read_text()
    assert f"| random | {len(graded)} |" in report and f"| {len(failed)} environment |" in report
