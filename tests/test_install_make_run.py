"""`make run`, the Quickstart's first command, on a fresh copy: it sets up the runtime alone (what
inference.py needs) and prints no warning; the test extra is `make test`'s, on top of it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from inference_support import parse_transcript
from install_support import environment, fresh_copy, run

RUNTIME = ("msgspec", "starlette", "uvicorn", "websockets", "anyio", "swagger_ui_bundle")
TEST_ONLY = ("pytest", "selenium", "mcp", "transformers", "datasets", "gymnasium", "openai", "ruff")
# pip's own notice about an index folder of this machine's pip configuration that does not exist: it
# is about the machine, not about what the project installs.
MACHINE_PIP_NOTICE = re.compile(r"WARNING: Location '[^']+' is ignored: it is neither a file nor a directory\.")
WARNING = re.compile(r"warn|deprecat|!!|\*{8}", re.IGNORECASE)


@pytest.fixture(scope="module")
def made_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    checkout = fresh_copy(tmp_path_factory.mktemp("checkout"))
    return checkout, run(["make", "run"], cwd=checkout)


def up_to_date(checkout: Path, target: str) -> bool:
    result = subprocess.run(["make", "-q", target], cwd=checkout, env=environment(), capture_output=True, check=False)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode == 0


@pytest.mark.slow
def test_make_run_sets_up_the_runtime_alone(made_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    checkout, done = made_run
    probe = "import importlib.util as u, json, sys; print(json.dumps([bool(u.find_spec(n)) for n in sys.argv[1:]]))"
    found = run([checkout / ".venv" / "bin" / "python", "-c", probe, *RUNTIME, *TEST_ONLY], cwd=checkout).stdout
    assert dict(zip(RUNTIME + TEST_ONLY, json.loads(found), strict=True)) == {
        **dict.fromkeys(RUNTIME, True),
        **dict.fromkeys(TEST_ONLY, False),
    }
    assert up_to_date(checkout, ".venv/.runtime") and not up_to_date(checkout, ".venv/.installed")
    assert parse_transcript(done.stdout)


@pytest.mark.slow
def test_make_run_prints_no_warning(made_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    _, done = made_run
    lines = [line for line in done.stderr.splitlines() if not MACHINE_PIP_NOTICE.fullmatch(line)]
    assert lines[0] == "setting up .venv"
    assert [line for line in lines if WARNING.search(line)] == []
