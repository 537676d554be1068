"""`service-incident-dataset validate` plays thousands of episodes: it says how far it got, on stderr,
while stdout carries the report alone."""

from __future__ import annotations

import re

import pytest

from service_incident.generator import PRESETS
from service_incident.harness.dataset_cli import main

_STEP = re.compile(r"\[(\d+)/(\d+)\] (expert|loudest-signal) policy on (\w+): \d+ s so far, about \d+ s left")


def test_validate_reports_progress_on_stderr_and_the_table_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--seeds", "2"]) == 0
    out, err = capsys.readouterr()
    runs = 2 * len(PRESETS)
    steps = [match.groups() for line in err.splitlines() if (match := _STEP.fullmatch(line))]
    assert [int(done) for done, *_ in steps] == list(range(1, runs + 1))
    assert {total for _, total, *_ in steps} == {str(runs)}
    assert {difficulty for *_, difficulty in steps} == set(PRESETS)
    assert f"playing {runs * 2} episodes" in err
    # The report is the same as before: the check's line and the table, nothing of the progress.
    assert out.splitlines()[0].endswith("identical to a fresh build")
    assert [line for line in out.splitlines()[1:] if not line.startswith("|")] == []
    assert len(out.splitlines()) == 1 + 2 + len(PRESETS)
