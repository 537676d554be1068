"""README states the very numbers the code uses: rewards, score weights, the rubric and the tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from service_incident import scoring, world
from service_incident.tasks import TASKS

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def signed(value: float) -> str:
    return "0.00" if value == 0 else f"{value:+.2f}"


@pytest.mark.parametrize(
    ("event", "value"),
    [
        ("new inspection that reveals an anomaly", scoring.INFO_REWARD),
        ("new inspection that reveals nothing abnormal", scoring.NO_INFO_REWARD),
        ("redundant inspection or unknown target", scoring.WASTE_PENALTY),
        ("declare: service and severity right", scoring.DECLARE_EXACT),
        ("declare: service right, severity wrong", scoring.DECLARE_ROOT_ONLY),
        ("declare: wrong service", scoring.DECLARE_WRONG),
        ("step budget spent without a declaration", scoring.BUDGET_EXHAUSTED),
    ],
)
def test_reward_table_matches_constants(event: str, value: float) -> None:
    assert f"| {event} | {signed(value)} |" in README


def test_score_formula_matches_constants() -> None:
    span = scoring.SCORE_CEIL - scoring.SCORE_FLOOR
    expected = [
        f"score = {scoring.SCORE_FLOOR} + {span:.2f} * clamp(",
        f"root_cause = {scoring.SCORE_ROOT_CAUSE} if",
        f"severity   = {scoring.SCORE_SEVERITY} if",
        f"evidence   = {scoring.SCORE_EVIDENCE} x",
        f"efficiency = {scoring.SCORE_EFFICIENCY} x",
        f"waste      = -{scoring.SCORE_WASTE} per",
        f"lies in [{scoring.SCORE_FLOOR}, {scoring.SCORE_CEIL}]",
        f"at most {scoring.INFO_REWARD_CAP} of them",
        f"[{scoring.REWARD_MIN:.1f}, {scoring.REWARD_MAX:.1f}]",
    ]
    for text in expected:
        assert text in README, text


@pytest.mark.parametrize(
    ("error_rate", "latency_ms"),
    [(world.P0_ERROR_RATE, world.P0_LATENCY_MS), (world.P1_ERROR_RATE, world.P1_LATENCY_MS)],
)
def test_rubric_matches_constants(error_rate: float, latency_ms: float) -> None:
    assert f"at least {error_rate:.0%} of requests, or its p99 latency is at least {latency_ms:.0f} ms" in README


@pytest.mark.parametrize("task", list(TASKS.values()), ids=list(TASKS))
def test_task_table_matches_registry(task) -> None:
    first, last = task.incidents[0], task.incidents[-1]
    assert f"| `{task.id}` | {task.max_steps} | `{first}` … `{last}` |" in README
    assert len(task.incidents) == 5
