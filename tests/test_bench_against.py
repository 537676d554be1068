"""The in-process benchmarks' `--against DIR` (bench/against.py): each core timed in processes of its
own, the other checkout's found first on the child's path, and the rows of both printed with their
ratio. A compiled core does not import twice in one process, which the option once tried."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import against  # noqa: E402  (bench/ is not a package)


def test_a_child_is_given_the_benchmarks_arguments_without_the_other_checkout_or_the_rounds() -> None:
    argv = ["--episodes", "3", "--against", "/x", "--clock", "cpu", "--rounds=4", "--against=/y", "--rounds", "2"]
    assert against.child_argv(argv) == ["--episodes", "3", "--clock", "cpu"]


def test_a_directory_without_the_package_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no service_incident package"):
        against.checkout(tmp_path)


def test_bench_core_times_another_checkouts_core_beside_this_one() -> None:
    # This checkout against itself: the child of "the other" imports the package from the root it is given.
    command = [sys.executable, str(BENCH / "bench_core.py"), "--episodes", "2", "--tasks", "easy", "--no-frozen"]
    done = subprocess.run(
        [*command, "--clock", "cpu", "--against", str(against.ROOT), "--rounds", "1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    lines = done.stdout.splitlines()
    assert lines[0].split()[-4:] == ["reset", "x", "step", "x"]
    easy = next(line for line in lines if line.startswith("easy"))
    assert len(easy.split()) == 7  # four figures and the two ratios
    assert lines[lines.index(easy) + 1].lstrip().startswith("against")
