"""The task registry: where a task's incidents come from, its budget, and the actions it allows."""

from __future__ import annotations

import random
from collections.abc import Mapping

from msgspec import Struct

from . import dataset
from .incidents import Incident, load_suite


class Task(Struct, frozen=True, kw_only=True):
    """A published task description; it names incidents, never their answers."""

    id: str
    suite: str
    difficulty: str
    max_steps: int
    description: str
    actions: tuple[str, ...]
    # The actions that close an episode; other actions keep it running.
    ends_on: tuple[str, ...]
    grading: str
    grades_severity: bool = True
    rationale_required: bool = False
    sla_minutes: int = 30
    # Curated incident ids; generated tasks list their frozen evaluation incidents here.
    incidents: tuple[str, ...] = ()
    # Generated tasks draw a fresh incident from any seed (the training distribution).
    generated: bool = False


TRIAGE_ACTIONS = ("inspect_logs", "inspect_metrics", "declare")


def _triage(difficulty: str, prefix: str, max_steps: int) -> Task:
    return Task(
        id=difficulty,
        suite="triage",
        difficulty=difficulty,
        max_steps=max_steps,
        description=(
            "Triage: you are paged with a three-service incident. Inspect logs and metrics of the services "
            f"you choose, then declare the root-cause service and the severity (P0/P1/P2) within {max_steps} steps."
        ),
        actions=TRIAGE_ACTIONS,
        ends_on=("declare",),
        grading="triage",
        incidents=tuple(i.id for i in load_suite("triage") if i.id.startswith(prefix)),
    )


INVESTIGATION = ("inspect_logs", "inspect_metrics", "check_health", "inspect_deploys", "run_db_query")
REMEDIATION = ("restart", "rollback", "scale_up", "escalate")
GENERATED_BUDGETS: Mapping[str, int] = {"easy": 8, "medium": 10, "hard": 12, "expert": 14}


def _generated(difficulty: str, max_steps: int) -> Task:
    return Task(
        id=f"gen_{difficulty}",
        suite="generated",
        difficulty=difficulty,
        max_steps=max_steps,
        description=(
            f"Generated {difficulty} incident: investigate a system of services, remediate if you can, and "
            f"declare the root-cause service(s) and the severity within {max_steps} steps. Any seed draws a "
            "training incident; the listed incidents are the frozen evaluation set."
        ),
        actions=(*INVESTIGATION, *REMEDIATION, "declare"),
        ends_on=("declare",),
        grading="generated",
        incidents=dataset.eval_ids(difficulty),
        generated=True,
    )


TASKS: Mapping[str, Task] = {
    task.id: task
    for task in (
        _triage("easy", "easy_", 3),
        _triage("medium", "med_", 5),
        _triage("hard", "hard_", 6),
        *(_generated(difficulty, budget) for difficulty, budget in GENERATED_BUDGETS.items()),
    )
}
DEFAULT_TASK = "easy"


def catalogue() -> list[Task]:
    """Every task, as published on GET /tasks."""
    return list(TASKS.values())


def resolve_incident(task: Task, incident_id: str | None, seed: int) -> Incident:
    """The incident an episode plays: named, or drawn from the task by the episode's seed."""
    if task.generated:
        if incident_id is None:
            return dataset.training_incident(task.difficulty, seed)
        if incident_id not in task.incidents:
            raise KeyError(incident_id)
        return dataset.frozen()[incident_id]
    if incident_id is None:
        incident_id = random.Random(f"{task.id}:{seed}").choice(task.incidents)
    for candidate in load_suite(task.suite):
        if candidate.id == incident_id and incident_id in task.incidents:
            return candidate
    raise KeyError(incident_id)


def task_of(incident_id: str) -> Task | None:
    """The task whose incidents include this id."""
    return next((task for task in TASKS.values() if incident_id in task.incidents), None)
