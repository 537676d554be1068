"""The documentation states the very numbers the code uses: rewards, the score, the rubric and the tasks."""

from __future__ import annotations

from pathlib import Path

import pytest

from service_incident import scoring, world
from service_incident.harness import tables
from service_incident.tasks import TASKS, Task

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
WORLD = (ROOT / "docs" / "world.md").read_text()
SCORING = (ROOT / "docs" / "scoring.md").read_text()


def signed(value: float) -> str:
    return "0.00" if value == 0 else f"{value:+.2f}"


def test_reward_table_is_rendered_from_the_constants() -> None:
    assert tables.reward_table() in SCORING
    potential = scoring.REWARD_TABLE[0][2]
    assert f"plus {scoring.INFO_REWARD} for each root cause" in potential
    assert f"at most {scoring.INFO_REWARD_CAP} in all" in potential and f"at most {scoring.POTENTIAL_MAX}" in potential


def test_reward_bounds_and_cap_match_constants() -> None:
    assert f"lies in\n[{scoring.REWARD_MIN:.1f}, {scoring.REWARD_MAX:.1f}]" in SCORING


def test_score_formula_matches_constants() -> None:
    span = scoring.SCORE_CEIL - scoring.SCORE_FLOOR
    assert f"lies in [{scoring.SCORE_FLOOR}, {scoring.SCORE_CEIL}]" in SCORING
    assert f"`score = {scoring.SCORE_FLOOR} + {span:.2f} * clamp(sum of the parts, 0, 1)`" in SCORING
    assert f"cites at least {scoring.RATIONALE_CITES} facts" in SCORING


@pytest.mark.parametrize(
    ("error_rate", "latency_ms"),
    [(world.P0_ERROR_RATE, world.P0_LATENCY_MS), (world.P1_ERROR_RATE, world.P1_LATENCY_MS)],
)
def test_rubric_matches_constants(error_rate: float, latency_ms: float) -> None:
    assert f"at least {error_rate:.0%} of requests, or its p99 latency is at least {latency_ms:.0f} ms" in WORLD


@pytest.mark.parametrize("task", [t for t in TASKS.values() if t.suite == "triage"], ids=lambda t: t.id)
def test_task_table_matches_registry(task: Task) -> None:
    first, last = task.incidents[0], task.incidents[-1]
    assert f"| `{task.id}` | {task.max_steps} | `{first}` … `{last}` |" in WORLD
    assert len(task.incidents) == 5


def test_task_counts_match_the_registry() -> None:
    from service_incident.dataset import EVAL_INCIDENTS
    from service_incident.generator import PRESETS

    suites = {suite: [t for t in TASKS.values() if t.suite == suite] for suite in {t.suite for t in TASKS.values()}}
    curated_other = sum(len(t.incidents) for suite in ("response", "rca") for t in suites[suite])
    triage = sum(len(t.incidents) for t in suites["triage"])
    assert f"- {len(TASKS)} tasks: the triage suite ({triage} curated" in README
    assert "four generated difficulties" in README and len(PRESETS) == 4
    assert f"{EVAL_INCIDENTS * len(PRESETS)} frozen evaluation incidents" in README
    listed = f"the {EVAL_INCIDENTS} listed\nincidents per task are the frozen evaluation set"
    listed += f" (generator seeds 0-{EVAL_INCIDENTS - 1})"
    assert listed in WORLD
    assert f"({curated_other} curated scenarios of the two other systems" in README
