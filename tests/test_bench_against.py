"""The in-process benchmarks' `--against DIR` (bench/against.py): each core timed in processes of its
own, a child that found the package anywhere but the checkout it was given refused, every core's rounds
pooled, and the rows of both printed with their ratio. A compiled core does not import twice in one
process, which the option once tried."""

from __future__ import annotations

import argparse
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
    with pytest.raises(argparse.ArgumentTypeError, match="no service_incident package"):
        against.checkout(str(tmp_path))


def test_a_child_that_timed_another_checkouts_core_is_refused(tmp_path: Path) -> None:
    found = {"package": str(against.ROOT / "service_incident"), "compiled": True, "rows": {"easy": [1.0]}}
    assert against.checked(found, against.ROOT) == {"easy": [1.0]}
    with pytest.raises(SystemExit, match="not the core at"):
        against.checked(found, tmp_path)


def test_rounds_are_pooled_row_by_row_and_a_row_some_lack_is_left_out() -> None:
    runs = [
        {"easy": [[1.0, 2.0], [3.0]], "look": [5.0], "once": [9.0]},
        {"easy": [[4.0], []], "look": [6.0, 7.0]},
    ]
    assert against.pooled(runs) == {"easy": [[1.0, 2.0, 4.0], [3.0]], "look": [5.0, 6.0, 7.0]}


def _against_this_checkout(script: str, *argv: str) -> list[str]:
    # This checkout against itself: each child imports the package from the root it is given, and says so.
    command = [sys.executable, str(BENCH / script), *argv, "--against", str(against.ROOT), "--rounds", "1"]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=300).stdout.splitlines()


def test_bench_core_times_another_checkouts_core_beside_this_one() -> None:
    lines = _against_this_checkout("bench_core.py", "--episodes", "2", "--tasks", "easy", "--no-frozen")
    assert lines[0].split()[-4:] == ["reset", "x", "step", "x"]
    easy = next(line for line in lines if line.startswith("easy"))
    assert len(easy.split()) == 7  # four figures and the two ratios
    assert lines[lines.index(easy) + 1].lstrip().startswith("against")


def test_bench_views_times_another_checkouts_core_beside_this_one() -> None:
    lines = _against_this_checkout("bench_views.py", "--episodes", "1")
    assert lines[0].split()[-3:] == ["against", "p50", "x"]
    looks = [line for line in lines[1:] if line.startswith(("InspectLogs", "CheckHealth"))]
    assert looks and all(len(line.split()) == 7 for line in looks)  # label (two words), steps, p50, p99, theirs, x
