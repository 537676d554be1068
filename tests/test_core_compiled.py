"""The core's compiled modules (setup.py, `service_incident.compiled`): what runs is the source as it
stands, compiled where the build compiled that source, and compiled or not it computes the same."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from service_incident import compiled

ROOT = Path(__file__).resolve().parents[1]


def compiler_here() -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler here: the package installs without its compiled modules")


def run(code: str, *, cwd: Path = ROOT, compiled_on: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, compiled.SWITCH: "1" if compiled_on else "0"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=cwd, env=env)


def test_every_module_the_build_compiled_runs_compiled() -> None:
    compiler_here()
    built = json.loads(compiled.MANIFEST.read_text())
    assert set(built) == set(compiled.MODULES)
    for name in compiled.MODULES:
        assert importlib.import_module(name).__file__.endswith(tuple(EXTENSION_SUFFIXES)), name


def test_switched_off_every_module_runs_its_source() -> None:
    code = f"import importlib\nfor name in {compiled.MODULES!r}: print(importlib.import_module(name).__file__)"
    found = run(code, compiled_on=False)
    assert all(line.endswith(".py") for line in found.stdout.split()), found.stdout
    assert found.stdout.count("\n") == len(compiled.MODULES)


def test_a_module_edited_since_it_was_compiled_runs_its_source_and_says_so(tmp_path: Path) -> None:
    compiler_here()
    package = tmp_path / "service_incident"
    shutil.copytree(ROOT / "service_incident", package, ignore=shutil.ignore_patterns("__pycache__"))
    edited = package / "telemetry" / "logs.py"
    edited.write_text(edited.read_text() + "\nEDITED = True\n")
    code = (
        "import service_incident.telemetry.logs as logs, service_incident.telemetry.pages as pages\n"
        "print(logs.__file__, logs.EDITED, pages.__file__)"
    )
    found = run(code, cwd=tmp_path)
    logs_file, edited_flag, pages_file = found.stdout.split()
    assert logs_file == str(edited) and edited_flag == "True"
    assert pages_file.startswith(str(package)) and pages_file.endswith(tuple(EXTENSION_SUFFIXES))
    assert "service_incident.telemetry.logs runs its source" in found.stderr
    assert "pages" not in found.stderr


def test_compiled_and_source_compute_the_same_observations() -> None:
    """bench/digest.py's hash over every task's episodes (every agent, remedies and both reward
    modes), the core compiled and the core's source."""
    compiler_here()
    digests = [
        subprocess.run(
            [sys.executable, "bench/digest.py", "--seeds", "2"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={**os.environ, compiled.SWITCH: switch},
        ).stdout
        for switch in ("1", "0")
    ]
    assert digests[0] == digests[1]
    assert digests[0].count("\n") > 20
