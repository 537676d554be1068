"""The Makefile: `make run` on a fresh copy, a venv of another Python rebuilt, `make clean`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from inference_support import parse_transcript
from install_support import environment, fresh_copy, run

from service_incident.tasks import TASKS

LEFT_BEHIND = (
    ".venv/lib/site.py",
    ".venv/openenv/.installed",
    ".venvs/openenv/.installed",
    "build/lib/x.py",
    "results/episodes.jsonl",
    "test-artifacts/web/play.png",
    ".pytest_cache/README.md",
    ".ruff_cache/CACHEDIR.TAG",
    "service_incident.egg-info/PKG-INFO",
    "service_incident/__pycache__/x.pyc",
    "tests/__pycache__/y.pyc",
)

# A venv whose interpreter is another Python than the one the Makefile builds with.
FOREIGN_PYTHON = "#!/bin/sh\necho /opt/python3.9 3 9\n"


def files(root: Path) -> set[str]:
    return {path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()}


def up_to_date(checkout: Path, target: str) -> bool:
    """`make -q`: exit 0 when the target is up to date, 1 when it would be remade."""
    result = subprocess.run(["make", "-q", target], cwd=checkout, env=environment(), capture_output=True, check=False)
    assert result.returncode in (0, 1), result.stderr
    return result.returncode == 0


def foreign_venv(checkout: Path) -> Path:
    """A .venv that looks set up (its stamp newer than pyproject.toml) but runs another Python."""
    python = checkout / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FOREIGN_PYTHON)
    python.chmod(0o755)
    (checkout / ".venv" / "left-by-the-old-python").touch()
    (checkout / ".venv" / ".installed").touch()
    return checkout / ".venv"


def test_make_clean_removes_what_builds_and_tests_leave(tmp_path: Path) -> None:
    checkout = fresh_copy(tmp_path)
    tracked = files(checkout)
    for name in LEFT_BEHIND:
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text("x")
    run(["make", "clean"], cwd=checkout)
    assert files(checkout) == tracked
    assert not [path for path in checkout.rglob("*") if path.is_dir() and not any(path.iterdir())]


def test_a_venv_of_another_python_is_out_of_date(tmp_path: Path) -> None:
    checkout = fresh_copy(tmp_path)
    foreign_venv(checkout)
    assert not up_to_date(checkout, ".venv/.installed")


@pytest.fixture(scope="module")
def made_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The Quickstart's first command on a fresh copy whose .venv another Python made."""
    checkout = fresh_copy(tmp_path_factory.mktemp("checkout"))
    foreign_venv(checkout)
    return checkout, run(["make", "run"], cwd=checkout).stdout


@pytest.mark.slow
def test_make_run_rebuilds_a_venv_of_another_python(made_run: tuple[Path, str]) -> None:
    checkout, _ = made_run
    venv = checkout / ".venv"
    assert not (venv / "left-by-the-old-python").exists()
    assert (
        run(
            [venv / "bin" / "python", "-c", "import sys, service_incident; print(sys.version_info >= (3, 11))"],
            cwd=checkout,
        ).stdout.strip()
        == "True"
    )
    assert up_to_date(checkout, ".venv/.runtime")


@pytest.mark.slow
def test_make_run_prints_only_the_evaluation_contract(made_run: tuple[Path, str]) -> None:
    checkout, stdout = made_run
    played = parse_transcript(stdout)
    assert len(played) == sum(len(task.incidents) for task in TASKS.values())
    assert all(line.startswith(("[START] ", "[STEP] ", "[END] ")) for line in stdout.splitlines())
    assert (checkout / "results" / "report.md").is_file()
