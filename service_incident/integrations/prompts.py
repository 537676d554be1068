"""Training prompts for TRL: JSON Lines rows of `prompt`, `task_id`, `seed` (and `incident_id`).

    python -m service_incident.integrations.prompts --out data/ --seeds 1000

writes `train.jsonl` (generated tasks, fresh training seeds: never an evaluation incident) and
`eval.jsonl` (the frozen evaluation incidents, held out, each row naming its `incident_id`), each
readable by `datasets.load_dataset("json", data_files=..., split="train")`. TRL passes each row's
columns to the environment's `reset`, which appends the pager to the prompt's instructions.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from service_incident.tasks import TASKS, Task, find_task
from service_incident.world.rubric import SEVERITY_RUBRIC

GENERATED_TASKS: tuple[str, ...] = tuple(task.id for task in TASKS.values() if task.generated)

Row = dict[str, Any]


def instructions(task: Task) -> str:
    """The user message a rollout starts from; the pager is appended to it."""
    severity = f"Severity follows user-facing impact: {SEVERITY_RUBRIC} " if task.grades_severity else ""
    return (
        f"You are the on-call engineer, paged for a production incident. {task.description} {severity}"
        "Call one tool per step and read what it shows before choosing the next. The pager follows.\n\n"
    )


def _task(task_id: str) -> Task:
    task = find_task(task_id)
    if task is None:
        raise ValueError(f"unknown task {task_id!r}; tasks are: {', '.join(TASKS)}")
    return task


def _row(task: Task, seed: int, **incident: str) -> Row:
    return {"prompt": [{"role": "user", "content": instructions(task)}], "task_id": task.id, "seed": seed, **incident}


def training_rows(seeds: int, tasks: Sequence[str] = GENERATED_TASKS, first_seed: int = 0) -> list[Row]:
    """One row per task and seed, seed-major, so any prefix of the file covers every task.

    Only generated tasks train: their seeds draw fresh incidents, never the frozen evaluation set,
    while a curated task's incidents are all it has, so they stay an evaluation suite.
    """
    chosen = [_task(task_id) for task_id in tasks]
    curated = [task.id for task in chosen if not task.generated]
    if curated:
        raise ValueError(f"{', '.join(curated)}: curated tasks are evaluation suites; train on {GENERATED_TASKS}")
    return [_row(task, seed) for seed in range(first_seed, first_seed + seeds) for task in chosen]


def evaluation_rows(tasks: Iterable[str] = GENERATED_TASKS) -> list[Row]:
    """Every incident of the tasks, named: for generated tasks, the frozen evaluation set."""
    return [_row(task, 0, incident_id=incident) for task in map(_task, tasks) for incident in task.incidents]


def write_jsonl(rows: Iterable[Row], path: Path) -> int:
    encoder = msgspec.json.Encoder()
    count = 0
    with path.open("wb") as out:
        for row in rows:
            out.write(encoder.encode(row) + b"\n")
            count += 1
    return count


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder to write train.jsonl and eval.jsonl to")
    parser.add_argument("--seeds", type=int, default=1000, help="training seeds per task (default 1000)")
    parser.add_argument("--first-seed", type=int, default=0, help="first training seed (default 0)")
    parser.add_argument("--tasks", default=",".join(GENERATED_TASKS), help="comma-separated generated task ids")
    args = parser.parse_args(argv)
    tasks = [task for task in args.tasks.split(",") if task]
    try:
        train = training_rows(args.seeds, tasks, args.first_seed)
    except ValueError as exc:
        parser.error(str(exc))
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("eval", evaluation_rows(tasks))):
        path = args.out / f"{name}.jsonl"
        print(f"wrote {write_jsonl(rows, path)} rows to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
