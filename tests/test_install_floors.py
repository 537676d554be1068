"""The lower bounds in pyproject.toml are true: the package installed with every runtime dependency (and
the llm extra, and the test runner) at exactly its declared minimum passes the core, server, client and
LLM-agent tests.

The minimums are read from pyproject.toml and given to pip as a constraints file, so raising or lowering
a floor is tested by this without editing it.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from install_support import ROOT, fresh_copy, new_venv, run
from packaging.requirements import Requirement
from packaging.version import Version

pytestmark = pytest.mark.slow

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# What the tests below need of the test extra: the runner and the HTTP client of the server tests.
TEST_RUNNER = ("pytest", "pytest-asyncio", "httpx")
TESTS = (
    "tests/test_core_imports.py",
    "tests/test_core_reset.py",
    "tests/test_core_rules.py",
    "tests/test_server_protocol.py",
    "tests/test_server_ws.py",
    "tests/test_server_http.py",
    "tests/test_web_routes.py",
    "tests/test_client_env.py",
    "tests/test_inference_llm.py",
)


def floors() -> dict[str, Version]:
    """Each floored requirement's name and its declared minimum (`>=`)."""
    requirements = [Requirement(text) for text in PROJECT["dependencies"] + PROJECT["optional-dependencies"]["llm"]]
    requirements += [
        Requirement(t) for t in PROJECT["optional-dependencies"]["test"] if Requirement(t).name in TEST_RUNNER
    ]
    minimums = {}
    for requirement in requirements:
        (lowest,) = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
        minimums[requirement.name] = lowest
    return minimums


def test_every_dependency_and_the_test_runner_have_a_floor() -> None:
    assert set(floors()) >= {"msgspec", "starlette", "uvicorn", "websockets", "anyio", "openai", *TEST_RUNNER}


def test_the_declared_minimum_versions_pass_the_core_server_and_client_tests(tmp_path: Path) -> None:
    minimums = floors()
    checkout = fresh_copy(tmp_path / "checkout")
    constraints = tmp_path / "floors.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in minimums.items()))
    python = new_venv(tmp_path / "venv") / "python"
    run([python, "-m", "pip", "install", "-q", "-c", constraints, f"{checkout}[llm]", *TEST_RUNNER], cwd=tmp_path)
    listed = run([python, "-m", "pip", "list", "--format=json"], cwd=tmp_path).stdout
    installed = {entry["name"].lower(): Version(entry["version"]) for entry in json.loads(listed)}
    assert {name: installed[name] for name in minimums} == minimums
    run([python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *TESTS], cwd=checkout, timeout=900)
