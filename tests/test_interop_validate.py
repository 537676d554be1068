"""`openenv validate` (stock package) on our package and against our running server.

Its runtime level needs a Docker engine to build and start the image, which this machine lacks, so
that level's three contract graders are run here directly on a live server instead: the same
collector and graders `openenv validate` uses, minus the image build.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from install_support import fresh_copy

from service_incident import scoring

ROOT = Path(__file__).resolve().parent.parent

# Runs in the stock venv: collect one episode from a live server and grade it.
RUNTIME_GRADERS = r"""
import json, sys
from pathlib import Path
from openenv.validation.graders import Subject
from openenv.validation.graders.runtime import ObservationSchemaGrader, RewardWellFormedGrader, StateContractGrader
from openenv.validation.parsers.openenv_yaml import OpenEnvYamlParser
from openenv.validation.runtime.collector import collect_runtime_evidence
from openenv.validation.runtime.contracts import RuntimePlan

url, package = sys.argv[1], Path(sys.argv[2])
manifest = OpenEnvYamlParser().parse(package)
plan = RuntimePlan.model_validate({
    "plan_schema_version": "1",
    "reset": {"episode_id": "validate-1", "seed": 7, "options": {"task_id": "hard"}},
    "actions": [{"action": "inspect_logs", "target": "db"}, {"action": "inspect_logs", "target": "db"},
                {"action": "inspect_metrics", "target": "nowhere"}, {"action": "declare", "target": "db",
                 "severity": "P1"}],
})
evidence = collect_runtime_evidence(url, plan, episode_timeout_s=manifest.resources.episode_timeout_s)
subject = Subject(root=package, manifest=manifest, image_ref=None, running=None, outputs_dir=package,
                  runtime_evidence=evidence)
results = {g.check_id: g.run(subject) for g in (RewardWellFormedGrader(), ObservationSchemaGrader(),
                                                  StateContractGrader())}
print(json.dumps({"failure": evidence.failure_reason, "exchanges": len(evidence.exchanges),
                  "results": {k: [r.status.value, r.evidence] for k, r in results.items()}}))
"""


@pytest.fixture(scope="module")
def stock_runs(openenv_python: Path, server_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The three stock-side runs, started together: each spends ~3 s importing openenv (and gradio)."""
    package = fresh_copy(tmp_path_factory.mktemp("package"))
    cli = str(openenv_python.parent / "openenv")
    commands = {
        "package": [cli, "validate", str(package), "--json"],
        "url": [cli, "validate", "--url", server_url, "--json"],
        "graders": [str(openenv_python), "-c", RUNTIME_GRADERS, server_url, str(package)],
    }
    running = {
        name: subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, c in commands.items()
    }
    return {name: (process.communicate(timeout=120), process.returncode) for name, process in running.items()}


def report(stock_runs: dict[str, Any], name: str) -> Any:
    (stdout, stderr), returncode = stock_runs[name]
    assert returncode == 0, stdout + stderr  # for `openenv validate`: 0 = pass or warn
    return json.loads(stdout)


def test_manifest_declares_the_real_reward_range() -> None:
    manifest = yaml.safe_load((ROOT / "openenv.yaml").read_text())
    assert manifest["spec_version"] == 1 and manifest["port"] == 8000
    assert manifest["validation"]["reward"]["range"] == [scoring.REWARD_MIN, scoring.REWARD_MAX]


def test_openenv_validate_passes_on_the_package(stock_runs: dict[str, Any]) -> None:
    statuses = {r["check_id"]: r["status"] for r in report(stock_runs, "package")["results"]}
    assert statuses["static.manifest"] == "pass"
    assert "fail" not in statuses.values() and "error" not in statuses.values()


def test_openenv_validate_url_passes_on_our_server(stock_runs: dict[str, Any]) -> None:
    url = report(stock_runs, "url")
    assert url["passed"] is True and url["standard_profile"] == "openenv-http/1.x"
    assert url["mode"] == "simulation"
    assert {c["id"] for c in url["criteria"] if c["passed"]} == {
        "openapi_version_available",
        "health_endpoint",
        "metadata_endpoint",
        "schema_endpoint",
        "mcp_endpoint",
        "mode_endpoint_consistency",
    }


def test_openenv_runtime_graders_pass_on_our_server(stock_runs: dict[str, Any]) -> None:
    out = report(stock_runs, "graders")
    assert out["failure"] is None and out["exchanges"] == 10  # reset, 4 steps, a state after each
    assert out["results"] == {
        "runtime.reward_well_formed": ["pass", ["observed runtime contract holds"]],
        "runtime.observation_schema": ["pass", ["observed runtime contract holds"]],
        "runtime.state_contract": ["pass", ["observed runtime contract holds"]],
    }
