"""The task registry: where a task's incidents come from, its budget, and the actions it allows."""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Mapping

from msgspec import Struct, structs

from . import dataset, holdout
from .generator import PRESETS
from .holdout import HoldoutKey
from .incidents import Incident, load_suite
from .models import INSPECTIONS, REMEDIATIONS, action_name


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
    # Show every service's health at a glance (the response system's service dashboard).
    dashboard: bool = False
    # Incidents derived from a host's key (see holdout): offered only where one is set, and an
    # episode of one shows neither its seed nor, at the end, its postmortem.
    held_out: bool = False


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


INVESTIGATION = tuple(action_name(t) for t in INSPECTIONS)
REMEDIATION = tuple(action_name(t) for t in REMEDIATIONS)
# Budgets of the generated tiers, from the steps an efficient investigator needs: one look that
# localizes (traces from the page) and the answer; per fault at most, a look at the suspect, a
# second view to choose the fix, the fix, and a look to see it work; and slack: two steps, and one
# more for every two red herrings that may cost a look.
BUDGET_BASE = 2
BUDGET_PER_FAULT = 4
BUDGET_SLACK: Mapping[str, int] = {name: 2 + knobs.red_herrings // 2 for name, knobs in PRESETS.items()}


def generated_budget(difficulty: str) -> int:
    return BUDGET_BASE + BUDGET_PER_FAULT * PRESETS[difficulty].faults[1] + BUDGET_SLACK[difficulty]


GENERATED_BUDGETS: Mapping[str, int] = {difficulty: generated_budget(difficulty) for difficulty in PRESETS}


def _investigate(max_steps: int) -> str:
    return (
        "investigate a system of services, remediate if you can, and declare the root-cause service(s) (there "
        "may be more than one: every service failing of its own fault, whether users wait on it or not) and the "
        f"severity (graded on user-facing impact) within {max_steps} steps."
    )


def _generated(difficulty: str, max_steps: int) -> Task:
    return Task(
        id=f"gen_{difficulty}",
        suite="generated",
        difficulty=difficulty,
        max_steps=max_steps,
        description=(
            f"Generated {difficulty} incident: {_investigate(max_steps)} Any seed draws a training incident; the "
            "listed incidents are the frozen evaluation set."
        ),
        actions=(*INVESTIGATION, *REMEDIATION, "declare"),
        ends_on=("declare",),
        grading="generated",
        incidents=dataset.eval_ids(difficulty),
        generated=True,
    )


def _response(difficulty: str, incidents: tuple[str, ...]) -> Task:
    return Task(
        id=f"{difficulty}_incident_triage",
        suite="response",
        difficulty=difficulty,
        max_steps=10,
        description=(
            "Response: restore service. Investigate, remediate, "
            "name the root cause with `declare`, and `resolve` once users are served again. Every action "
            "needs a rationale; rationales are credited for citing what you observed."
        ),
        actions=(*INVESTIGATION, *REMEDIATION, "declare", "resolve"),
        ends_on=("resolve",),
        grading="response",
        rationale_required=True,
        dashboard=True,
        incidents=incidents,
    )


# The root-cause suite: one task per scenario, on one six-service stack; budgets by difficulty.
RCA_BUDGETS: Mapping[str, int] = {"easy": 10, "medium": 15, "hard": 20, "expert": 25}
RCA_DIFFICULTY: Mapping[str, str] = {
    "task_cpu_spike": "easy",
    "task_disk_full": "easy",
    "task_db_connection_leak": "medium",
    "task_redis_memory_eviction": "medium",
    "task_api_rate_limit": "medium",
    "task_deadlock_order_service": "medium",
    "task_ssl_cert_expired": "medium",
    "task_slow_query_postgres": "medium",
    "task_auth_service_500": "medium",
    "task_k8s_pod_crashloop": "medium",
    "task_memory_leak": "medium",
    "task_thread_starvation": "medium",
    "task_canary_poison": "hard",
    "task_clock_skew": "hard",
    "task_expert": "expert",
}


# The root-cause system's own task ids name the fault they hide ("task_disk_full"), so the suite
# publishes neutral ids and accepts the originals at reset only, for agents written against it.
RCA_IDS: Mapping[str, str] = {legacy_id: f"rca_{index:02d}" for index, legacy_id in enumerate(RCA_DIFFICULTY, 1)}


def _rca(task_id: str, difficulty: str) -> Task:
    budget = RCA_BUDGETS[difficulty]
    return Task(
        id=task_id,
        suite="rca",
        difficulty=difficulty,
        max_steps=budget,
        description=(
            "Root-cause analysis: find every service at fault (there may be more than one), fix what you "
            f"can, and name them all with `declare_rca` within {budget} steps."
        ),
        actions=(*INVESTIGATION, *REMEDIATION, "declare_rca", "declare"),
        ends_on=("declare_rca", "declare"),
        grading="rca",
        grades_severity=False,
        incidents=(task_id,),
    )


TASKS: Mapping[str, Task] = {
    task.id: task
    for task in (
        _triage("easy", "easy_", 3),
        _triage("medium", "med_", 5),
        _triage("hard", "hard_", 6),
        *(_generated(difficulty, budget) for difficulty, budget in GENERATED_BUDGETS.items()),
        _response("easy", ("easy_001", "easy_002")),
        _response("medium", ("medium_001",)),
        _response("hard", ("hard_001",)),
        *(_rca(RCA_IDS[legacy_id], difficulty) for legacy_id, difficulty in RCA_DIFFICULTY.items()),
    )
}


def _held_out(difficulty: str) -> Task:
    """The open tier's task (budget, actions, grading) on incidents the host's key derives."""
    open_tier = TASKS[f"gen_{difficulty}"]
    return structs.replace(
        open_tier,
        id=holdout.task_id(difficulty),
        suite="holdout",
        description=(
            f"Held-out {difficulty} incident, generated like {open_tier.id}'s from a key only the host holds: "
            f"{_investigate(open_tier.max_steps)} The seed picks the incident."
        ),
        incidents=(),
        held_out=True,
    )


HELD_OUT: Mapping[str, Task] = {task.id: task for task in map(_held_out, holdout.TIERS)}
DEFAULT_TASK = "easy"
# The root-cause system's walkthrough also names tasks by difficulty alone: the first scenario of each.
_BY_DIFFICULTY: Mapping[str, str] = {
    f"task_{difficulty}": RCA_IDS[next(legacy_id for legacy_id, d in RCA_DIFFICULTY.items() if d == difficulty)]
    for difficulty in ("easy", "medium", "hard")
}
TASK_ALIASES: Mapping[str, str] = {**RCA_IDS, **_BY_DIFFICULTY}


def find_task(task_id: str, held_out: bool = False) -> Task | None:
    """A task by its id or by an alias it is also known by; the held-out tasks too if `held_out`."""
    found = TASKS.get(TASK_ALIASES.get(task_id, task_id))
    return found or (HELD_OUT.get(task_id) if held_out else None)


def catalogue(held_out: bool = False) -> list[Task]:
    """Every task, as published on GET /tasks; the held-out ones where a key is set."""
    return [*TASKS.values(), *(HELD_OUT.values() if held_out else ())]


def resolve_incident(task: Task, incident_id: str | None, seed: int, key: HoldoutKey | None = None) -> Incident:
    """The incident an episode plays: named, or drawn from the task by the episode's seed (for a
    held-out task, the seed is the index of the incident `key` derives)."""
    if not draws_incident(task, incident_id):
        return _named_incident(task, incident_id, seed)
    draw = _draw(task, seed, key)
    found = _DRAWN.get(draw)
    if found is None:
        found = _generate(task, seed, key)
    keep_drawn(task, seed, key, found)
    return found


def draws_incident(task: Task, incident_id: str | None) -> bool:
    """Whether an episode's incident is generated from its seed, rather than curated or frozen."""
    return incident_id is None and (task.generated or task.held_out)


def keep_drawn(task: Task, seed: int, key: HoldoutKey | None, incident: Incident) -> None:
    """Keep a drawn incident for the next episodes of the same draw: `resolve_incident` returns it
    without generating it again (a server generates it in another process and leaves it here)."""
    draw = _draw(task, seed, key)
    _DRAWN[draw] = incident
    _DRAWN.move_to_end(draw)
    while len(_DRAWN) > DRAWS_KEPT:
        _DRAWN.popitem(last=False)


# Generating is most of a training reset, and episodes of one draw recur: a group of rollouts resets
# one seed several times, and a resumed episode replays its reset. The last draws are kept, least
# recently used first out; an incident is a few kilobytes.
DRAWS_KEPT = 256
# A draw: the task, the seed, and the fingerprint of the key a held-out incident derives from.
_Draw = tuple[str, int, str | None]
_DRAWN: OrderedDict[_Draw, Incident] = OrderedDict()


def _draw(task: Task, seed: int, key: HoldoutKey | None) -> _Draw:
    return (task.id, seed, key.fingerprint if task.held_out and key is not None else None)


def _generate(task: Task, seed: int, key: HoldoutKey | None) -> Incident:
    if not task.held_out:
        return dataset.training_incident(task.difficulty, seed)
    # A held-out task's incidents derive from the host's key alone.
    if key is None:
        raise KeyError(None)
    return key.incident(task.difficulty, seed)


def _named_incident(task: Task, incident_id: str | None, seed: int) -> Incident:
    if task.generated:
        if incident_id not in task.incidents:
            raise KeyError(incident_id)
        return dataset.frozen()[incident_id]
    if task.held_out:
        raise KeyError(incident_id)
    if incident_id is None:
        incident_id = random.Random(f"{task.id}:{seed}").choice(task.incidents)
    for candidate in load_suite(task.suite):
        if candidate.id == incident_id and incident_id in task.incidents:
            return candidate
    raise KeyError(incident_id)


def task_of(incident_id: str) -> Task | None:
    """The task whose incidents include this id."""
    return next((task for task in TASKS.values() if incident_id in task.incidents), None)
