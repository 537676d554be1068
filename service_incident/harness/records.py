"""What an evaluation plays and what it keeps: episode specs, step and episode records, OpenEnv's
[START] / [STEP] / [END] lines, and records as JSON Lines.

Pure data and pure functions (no I/O, no client): the report and a replay work from these alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import msgspec
from msgspec import Struct

from ..dataset import EVAL_INCIDENTS
from ..models import Action, Observation, action_name
from ..scoring import SCORE_FLOOR
from ..tasks import Task

BENCHMARK = "service_incident"
SUCCESS_SCORE = 0.5
SCORE_DIGITS = 2  # as the [END] line prints a score


def succeeded(score: float) -> bool:
    """Success as a reader of the [END] line sees it: the printed score reaches the bar."""
    return round(score, SCORE_DIGITS) >= SUCCESS_SCORE


# Why an episode ended without a grade. "agent": the policy's own doing (it raised, or its replies
# could not be used), scored at the floor like any failure of the agent. The others are not the
# agent's doing and are counted apart from its mean: the environment (server unreachable, session
# lost), the model endpoint the agent depends on, or a run interrupted by its user.
# "lost": the connection to the server went and the episode could not be resumed there.
Failure = Literal["agent", "environment", "lost", "model", "interrupted"]
NOT_THE_AGENTS: frozenset[Failure] = frozenset({"environment", "lost", "model", "interrupted"})


class EpisodeSpec(Struct, frozen=True, kw_only=True):
    """One episode to play: a task's evaluation incident under a seed, or (`incident_id` None) the
    incident the seed draws. `name` is unique within a run."""

    name: str
    task_id: str
    incident_id: str | None
    seed: int


class Turn(Struct, kw_only=True):
    """A policy's answer to one observation: an action, or why there is none."""

    action: Action | None
    error: str | None = None
    reply: str | None = None  # the raw model output, kept for the record
    prompt_tokens: int = 0
    completion_tokens: int = 0


class StepRecord(Struct, kw_only=True):
    """One [STEP]. `observation` is what the environment answered (None when no action was sent)."""

    step: int
    action: Action | None
    action_text: str
    reward: float
    done: bool
    error: str | None
    observation: Observation | None
    reply: str | None = None


class EpisodeRecord(Struct, kw_only=True):
    """Everything about one played episode; enough to replay it without the server."""

    name: str
    task: str
    incident: str
    seed: int
    agent: str
    actions: list[str] = []
    rewards: list[float] = []
    score: float = SCORE_FLOOR
    breakdown: dict[str, float] | None = None
    steps: int = 0
    success: bool = False
    graded: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    # Why the episode ended without a grade, and whose failure that was.
    error: str | None = None
    failure: Failure | None = None
    # Times the episode's session was lost (a connection cut, a server going away, a reply too
    # late) and carried on from the server's episode log.
    resumes: int = 0
    reset: Observation | None = None
    trace: list[StepRecord] = []

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def counted(self) -> bool:
        """Whether the episode measures the agent: graded, or failed by the agent's own doing."""
        return self.failure not in NOT_THE_AGENTS


def plan(tasks: Iterable[Task], episodes: int | None = None, seeds: Sequence[int] = (42,)) -> list[EpisodeSpec]:
    """The first `episodes` evaluation incidents of each task (all when None), each under every seed.

    A held-out task lists no incidents: its seed is the index of one, so it plays its first
    `episodes` (as many as an open tier's evaluation set when None), each under its own index.
    """
    specs = []
    for task in tasks:
        if task.held_out:
            specs += [
                EpisodeSpec(name=f"{task.id}/{index:04d}", task_id=task.id, incident_id=None, seed=index)
                for index in range(episodes or EVAL_INCIDENTS)
            ]
            continue
        for incident_id in task.incidents[:episodes]:
            for seed in seeds:
                suffix = f"@{seed}" if len(seeds) > 1 else ""
                specs.append(
                    EpisodeSpec(
                        name=f"{task.id}/{incident_id}{suffix}", task_id=task.id, incident_id=incident_id, seed=seed
                    )
                )
    return specs


_TARGETS = ("target", "targets", "additional_targets")
_UNSHOWN = ("rationale", "metadata")


def describe(action: Action) -> str:
    """An action as one token for the [STEP] line: `inspect_logs(db)`, `declare(db+cache,P0)`: the
    services it names joined by `+`, then its other arguments, whatever the action."""
    fields = msgspec.structs.asdict(action)
    targets = [t for name in _TARGETS for t in _listed(fields.get(name))]
    args = ["+".join(targets)] if targets else []
    args += [
        "+".join(_listed(value))
        for name, value in fields.items()
        if name not in _TARGETS and name not in _UNSHOWN and _listed(value)
    ]
    return "_".join(f"{action_name(action)}({','.join(args)})".split())  # one token, spaces and all


def _listed(value: Any) -> list[str]:
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return [] if value in (None, "", {}) else [str(value)]


# --- OpenEnv's stdout contract ----------------------------------------------------------------


def transcript(record: EpisodeRecord, env: str = BENCHMARK) -> list[str]:
    """The episode's [START], [STEP]... and [END] lines: two decimals, lowercase booleans, one line each."""
    lines = [f"[START] task={record.name} env={env} model={record.agent}"]
    lines += [
        f"[STEP] step={s.step} action={s.action_text} reward={s.reward:.2f} done={_bool(s.done)} "
        f"error={_one_line(s.error) if s.error else 'null'}"
        for s in record.trace
    ]
    lines.append(
        f"[END] success={_bool(record.success)} steps={record.steps} score={record.score:.{SCORE_DIGITS}f} "
        f"rewards={','.join(f'{r:.2f}' for r in record.rewards)}"
    )
    return lines


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --- results as JSON Lines --------------------------------------------------------------------

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(EpisodeRecord)


class UnreadableResults(ValueError):
    """A results file that is not episode records, one JSON object a line; says which line and why."""


def encode(record: EpisodeRecord) -> bytes:
    """One JSON line; `tokens` is added for readers that do not sum the two counts themselves."""
    data: dict[str, Any] = msgspec.to_builtins(record)
    data["tokens"] = record.tokens
    return _encoder.encode(data) + b"\n"


def decode(raw: bytes) -> list[EpisodeRecord]:
    records = []
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(_decoder.decode(line))
        except msgspec.DecodeError as exc:  # not JSON, or not a record
            raise UnreadableResults(f"line {number} is not an episode record: {exc}") from None
    return records
