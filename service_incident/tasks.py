"""The task registry: which incidents a task draws from, its step budget and the actions it allows."""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import Struct

from .incidents import Incident, load_suite
from .models import ACTION_NAMES


class Task(Struct, frozen=True):
    """A published task description; it names incidents, never their answers."""

    id: str
    suite: str
    difficulty: str
    max_steps: int
    description: str
    actions: tuple[str, ...]
    incidents: tuple[str, ...]


_TRIAGE_BRIEF = (
    "Triage: you are paged with a three-service incident. Inspect logs and metrics of the services "
    "you choose, then declare the root-cause service and the severity (P0/P1/P2) within {n} steps."
)


def _triage(difficulty: str, prefix: str, max_steps: int) -> Task:
    ids = tuple(i.id for i in load_suite("triage") if i.id.startswith(prefix))
    return Task(
        id=difficulty,
        suite="triage",
        difficulty=difficulty,
        max_steps=max_steps,
        description=_TRIAGE_BRIEF.format(n=max_steps),
        actions=ACTION_NAMES,
        incidents=ids,
    )


TASKS: Mapping[str, Task] = {
    task.id: task
    for task in (
        _triage("easy", "easy_", 3),
        _triage("medium", "med_", 5),
        _triage("hard", "hard_", 6),
    )
}
DEFAULT_TASK = "easy"


def catalogue() -> list[Task]:
    """Every task, as published on GET /tasks."""
    return list(TASKS.values())


def incident(task: Task, incident_id: str) -> Incident:
    for candidate in load_suite(task.suite):
        if candidate.id == incident_id and incident_id in task.incidents:
            return candidate
    raise KeyError(incident_id)


def task_of(incident_id: str) -> Task | None:
    """The task whose incidents include this id."""
    return next((task for task in TASKS.values() if incident_id in task.incidents), None)
