"""inference.py against a server started separately, named by ENV_URL (no embedded server)."""

from __future__ import annotations

from pathlib import Path

from inference_support import parse_transcript, run_inference

from service_incident.client import LocalServer
from service_incident.harness.evaluation import decode
from service_incident.tasks import TASKS


def test_env_url_points_the_run_at_a_running_server(tmp_path: Path) -> None:
    with LocalServer() as server:
        result = run_inference("--tasks", "hard,gen_hard", "--episodes", "2", "--seeds", "1,2",
                               "--output", str(tmp_path), cwd=tmp_path, env={"ENV_URL": server.base_url})
        alive = server.process is not None and server.process.poll() is None
    assert result.returncode == 0, result.stderr
    assert alive  # the run used the server and left it running
    assert f"against {server.base_url}" in result.stderr
    episodes = parse_transcript(result.stdout)
    expected = {f"{task}/{incident}@{seed}" for task in ("hard", "gen_hard")
                for incident in TASKS[task].incidents[:2] for seed in (1, 2)}
    assert {e.task for e in episodes} == expected
    records = decode((tmp_path / "episodes.jsonl").read_bytes())
    assert {(r.incident, r.seed) for r in records} == {(name.split("/")[1].split("@")[0], int(name[-1]))
                                                      for name in expected}
    assert f"server: {server.base_url}" in (tmp_path / "report.md").read_text()


def test_an_unreachable_server_fails_every_episode_but_each_gets_its_end(tmp_path: Path) -> None:
    result = run_inference("--tasks", "easy", "--episodes", "2", "--output", str(tmp_path), cwd=tmp_path,
                           env={"ENV_URL": "http://127.0.0.1:9"})
    assert result.returncode == 1
    episodes = parse_transcript(result.stdout)
    assert len(episodes) == 2
    assert all(e.steps == [] and e.end["success"] == "false" and e.end["score"] == "0.01" for e in episodes)
    assert all(r.error for r in decode((tmp_path / "episodes.jsonl").read_bytes()))
