"""Evaluate an agent on Service Incident and report what it scored.

With nothing set, starts an embedded server on a free local port and runs the expert reference
agent over the evaluation incidents of every task, concurrently, over the WebSocket client.
stdout carries OpenEnv's [START] / [STEP] / [END] lines and nothing else; progress, failures and the
summary go to stderr; episodes.jsonl (every step, with its observation) and report.md go to --output.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import IO

import anyio

from service_incident.client import EnvClientError

from ..holdout import KEY_SETTING, HoldoutKey, fingerprint
from ..tasks import HELD_OUT, TASKS, Task, catalogue, find_task
from . import report
from .agents import AGENTS as REFERENCE_PLAYERS
from .agents import REFERENCE_AGENTS
from .evaluation import DEFAULT_CONCURRENCY, evaluate, reference_policy
from .llm import (
    DEFAULT_API_BASE_URL,
    DEFAULT_LLM_CONCURRENCY,
    DEFAULT_MODEL,
    MODES,
    REPLIES,
    LLMAgent,
    LLMSettings,
    LLMUnavailable,
)
from .records import BENCHMARK, EpisodeRecord, EpisodeSpec, UnreadableResults, decode, encode, plan, transcript
from .session import InProcess, Sessions, over_websocket

LLM = "llm"
AGENTS = (*REFERENCE_PLAYERS, LLM)
# The default LLM run plays at most this many model calls even if every episode spends its whole
# step budget: about 8 minutes at 4 s per call with 4 in flight, 20 minutes at 10 s.
LLM_CALL_BUDGET = 480
# A typical hosted model's answer to a ~4k-token prompt, for the time estimate printed at start.
LLM_SECONDS_PER_CALL = 4.0
EPISODES_FILE, REPORT_FILE = "episodes.jsonl", "report.md"
DEFAULT_OUTPUT = Path("results")
# Exit statuses besides 0 (a clean measurement), 1 (episodes failed, or no environment) and
# argparse's 2 (usage): a run stopped by Ctrl-C or SIGTERM exits as the shell reports those signals.
INTERRUPTED = {signal.SIGINT: 130, signal.SIGTERM: 143}

EPILOG = f"""
environment variables:
  ENV_URL            evaluate against this server instead of an embedded one (same as --env-url)
  {KEY_SETTING}        the key of the held-out tasks ({", ".join(HELD_OUT)}) for an in-process run or
                     the embedded server; a server given by --env-url uses its own
  API_BASE_URL       OpenAI-compatible endpoint for --agent llm (default {DEFAULT_API_BASE_URL})
  MODEL_NAME         model for --agent llm (default {DEFAULT_MODEL})
  HF_TOKEN, API_KEY, OPENAI_API_KEY
                     the key for --agent llm, first one set wins; required, no fallback

examples:
  %(prog)s                                        # expert, every task, embedded server
  %(prog)s --agent {",".join(REFERENCE_AGENTS)}   # the ladder
  %(prog)s --in-process --tasks generated          # no server, no sockets
  HF_TOKEN=... %(prog)s --agent llm --tasks easy,gen_easy --episodes 3 --llm-mode chat --llm-reply tools
  %(prog)s --replay results/{EPISODES_FILE}       # print a saved run again and report it, no server
  %(prog)s --env-url URL --tasks {",".join(HELD_OUT)}   # the held-out tiers of a server that has the key
"""


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parse.add_argument(
        "--agent",
        default=["expert"],
        type=_names(AGENTS),
        help=f"agent(s) to evaluate, comma-separated, in order: {', '.join(AGENTS)} (default expert)",
    )
    tasks = catalogue(held_out=True)
    suites = list(dict.fromkeys(task.suite for task in tasks))
    parse.add_argument(
        "--tasks",
        default=None,
        type=_names((*(task.id for task in tasks), *suites)),
        help=f"task ids or suite names ({', '.join(suites)}), comma-separated (default: every "
        "task but the held-out ones)",
    )
    parse.add_argument(
        "--episodes",
        type=_positive,
        default=None,
        metavar="N",
        help="the first N evaluation incidents of each task (a held-out task's first N, each "
        "played under its own index as the seed; default: all of them for reference "
        "agents; for llm, incidents taken in turn from each task while at most "
        f"{LLM_CALL_BUDGET} model calls can be needed)",
    )
    parse.add_argument(
        "--seeds",
        default=[42],
        type=_ints,
        help="episode seeds, comma-separated; each incident is played under each (default 42)",
    )
    parse.add_argument(
        "--concurrency",
        type=_positive,
        default=None,
        metavar="N",
        help=f"episodes in flight (default {DEFAULT_CONCURRENCY}; for llm also the model requests "
        f"in flight, default {DEFAULT_LLM_CONCURRENCY})",
    )
    parse.add_argument(
        "--output",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"folder for {EPISODES_FILE} and {REPORT_FILE} (default {DEFAULT_OUTPUT}; "
        "with --replay, the replayed file's folder)",
    )
    where = parse.add_mutually_exclusive_group()
    where.add_argument(
        "--env-url",
        default=os.environ.get("ENV_URL") or None,
        metavar="URL",
        help="server to evaluate against over WebSocket, or several comma-separated that sessions are spread "
        "across (default $ENV_URL, else an embedded server)",
    )
    where.add_argument(
        "--in-process", action="store_true", help="play on the environment in this process: no server, no sockets"
    )
    parse.add_argument(
        "--replay",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"print a saved {EPISODES_FILE} as stdout lines and write its report beside it "
        "(or in --output); plays nothing",
    )
    parse.add_argument(
        "--llm-mode",
        choices=MODES,
        default="prompt",
        help="prompt: each turn one fresh prompt with the whole observation; chat: one "
        "conversation, each turn adds only what the last action revealed (default prompt)",
    )
    parse.add_argument(
        "--llm-reply",
        choices=REPLIES,
        default="text",
        help="text: a JSON object in the reply; json: the same with the provider's JSON mode; "
        "tools: the provider's tool calling, one tool per action (default text)",
    )
    return parse


def _names(allowed: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [name.strip() for name in text.split(",") if name.strip()]
        unknown = [name for name in names if name not in allowed]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"unknown {unknown or text!r}; choose from {', '.join(allowed)}")
        return names

    return parse


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a positive integer: {text!r}")
    return value


def _ints(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None


def selected_tasks(names: list[str] | None) -> list[Task]:
    """Tasks in registry order; a suite name selects all of its tasks. The held-out ones only by name."""
    if names is None:
        return list(TASKS.values())
    return [t for t in catalogue(held_out=True) if t.id in names or t.suite in names]


def holdout_key() -> str | None:
    """The key of the held-out tasks for a run played here, from the environment of the run."""
    return os.environ.get(KEY_SETTING) or None


def check_holdout_key(tasks: list[Task], args: argparse.Namespace) -> None:
    """Held-out tasks played here (in-process or on the embedded server) need the key in the environment
    of the run; ValueError saying what is wrong. A server given by URL has a key of its own, or not."""
    key = holdout_key()
    held_out = [t.id for t in tasks if t.held_out]
    if not held_out or args.env_url is not None:
        return
    if key is None:
        raise ValueError(
            f"{', '.join(held_out)} need the holdout key: set {KEY_SETTING} in the environment of "
            "the run, or evaluate against a server that has it with --env-url"
        )
    try:
        HoldoutKey(key)
    except ValueError as exc:
        raise ValueError(f"{KEY_SETTING}: {exc}") from None


def within_calls(specs: list[EpisodeSpec], budget: int) -> list[EpisodeSpec]:
    """Each task's first incident, then each one's second, and so on, while the step budgets of the
    episodes taken (the most model calls they can need) add up to no more than `budget`."""
    rank: dict[str, int] = {}
    ranked = []
    for spec in specs:
        rank[spec.task_id] = rank.get(spec.task_id, -1) + 1
        ranked.append((rank[spec.task_id], spec))
    taken, calls = [], 0
    for _, spec in sorted(ranked, key=lambda item: item[0]):
        calls += _budget(spec)
        if calls > budget:
            break
        taken.append(spec)
    return taken


def _budget(spec: EpisodeSpec) -> int:
    task = find_task(spec.task_id, held_out=True)
    assert task is not None
    return task.max_steps


class Output:
    """Where finished episodes go, in the order they finish: stdout (their lines, together), the
    JSONL file, the progress bar, and stderr for failures that are not the agent's."""

    def __init__(self, total: int, prog: str) -> None:
        self.total = total
        self.prog = prog
        self.records: list[EpisodeRecord] = []
        self.results: IO[bytes] | None = None
        self.reasons: set[str] = set()
        self.notes: list[str] = []  # report header lines learnt while playing
        self.stopped: signal.Signals | None = None
        self.unreachable: str | None = None
        self.started = time.monotonic()
        self.tty = sys.stderr.isatty()

    def __call__(self, record: EpisodeRecord) -> None:
        print_episode(record)
        self.records.append(record)
        if self.results is not None:
            self.results.write(encode(record))
            self.results.flush()
        if not record.counted and record.failure != "interrupted" and record.error not in self.reasons:
            # Each distinct reason once: a dead endpoint would otherwise say the same thing per episode.
            self.reasons.add(record.error or "")
            say(
                self.prog,
                f"{record.name}: {record.failure} failure, not counted in {record.agent}'s mean: {record.error}",
            )
        self.progress()

    def progress(self) -> None:
        done = len(self.records)
        counted = [r.score for r in self.records if r.counted]
        mean = f"mean score {sum(counted) / len(counted):.3f}" if counted else "no score yet"
        width, filled = 30, done * 30 // max(self.total, 1)
        line = (
            f"[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} episodes, {mean}, "
            f"{time.monotonic() - self.started:.0f} s"
        )
        if self.tty:
            print(f"\r{line}", end="\n" if done == self.total else "", file=sys.stderr, flush=True)
        elif done == self.total or done % max(self.total // 10, 1) == 0:
            print(line, file=sys.stderr, flush=True)


def say(prog: str, text: str) -> None:
    print(f"{prog}: {text}", file=sys.stderr, flush=True)


def print_episode(record: EpisodeRecord) -> None:
    # One write per episode: concurrent episodes never interleave their lines.
    sys.stdout.write("\n".join(transcript(record)) + "\n")
    sys.stdout.flush()


class Unreachable(Exception):
    """The environment cannot be reached (or the embedded server did not start): nothing was played."""


@asynccontextmanager
async def environment(args: argparse.Namespace) -> AsyncIterator[Sessions]:
    """Where the run plays, checked by opening one session before any episode starts."""
    if args.in_process:
        yield InProcess(holdout_key())
        return
    async with AsyncExitStack() as stack:
        try:
            sessions = await stack.enter_async_context(over_websocket(args.env_url))
            async with sessions.open():
                pass
        except Exception as exc:
            # The client's own errors say what failed and where; anything else is named by its type.
            reason = str(exc) if isinstance(exc, EnvClientError) else f"{type(exc).__name__}: {exc}"
            raise Unreachable(f"cannot reach the environment at {where(args)}: {reason}") from None
        yield sessions


async def run(
    args: argparse.Namespace, plans: dict[str, list[EpisodeSpec]], settings: LLMSettings | None, output: Output
) -> None:
    """Play every agent's episodes; `output` learns what stopped the run early, if anything did."""

    async def stop_on_sigterm(scope: anyio.CancelScope) -> None:
        # Handled like Ctrl-C: the episodes in flight end (each gets its [END]), servers stop, the
        # report covers what finished.
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async for signum in signals:
                output.stopped = signal.Signals(signum)
                scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(stop_on_sigterm, group.cancel_scope)
        try:
            await play_all(args, plans, settings, output)
        except Unreachable as exc:
            output.unreachable = str(exc)
        group.cancel_scope.cancel()


async def play_all(
    args: argparse.Namespace, plans: dict[str, list[EpisodeSpec]], settings: LLMSettings | None, output: Output
) -> None:
    # One environment (embedded unless --env-url or --in-process) for every agent of the run.
    async with environment(args) as sessions:
        args.output.mkdir(parents=True, exist_ok=True)
        with (args.output / EPISODES_FILE).open("wb") as results:
            output.results = results
            for name, specs in plans.items():
                if name == LLM:
                    assert settings is not None
                    async with LLMAgent(settings) as agent:
                        await evaluate(
                            agent,
                            specs,
                            agent=agent.name,
                            sessions=sessions,
                            concurrency=settings.concurrency,
                            on_episode=output,
                        )
                    output.notes.append(f"- llm token limit sent as `{agent.token_limit_name}`")
                else:
                    await evaluate(
                        reference_policy(name),
                        specs,
                        agent=name,
                        sessions=sessions,
                        concurrency=args.concurrency or DEFAULT_CONCURRENCY,
                        on_episode=output,
                    )
            output.results = None


def read_replay(parse: argparse.ArgumentParser, path: Path) -> list[EpisodeRecord]:
    """The records of a results file; anything else is a usage error that names the file."""
    try:
        records = decode(path.read_bytes())
    except OSError as exc:
        parse.error(f"--replay {path}: {exc.strerror or exc}")
    except UnreadableResults as exc:
        parse.error(f"--replay {path}: {exc}")
    if not records:
        parse.error(f"--replay {path}: holds no episode records")
    return records


def replay_report(path: Path, output: Path | None) -> Path:
    """A replayed file's report goes beside it (or in `output`): `report.md` for an `episodes.jsonl`,
    `<name>.report.md` for any other name, so no other run's report is overwritten."""
    name = REPORT_FILE if path.name == EPISODES_FILE else f"{path.stem}.{REPORT_FILE}"
    return (output if output is not None else path.parent) / name


def write_report(records: list[EpisodeRecord], path: Path, episodes_file: str, header: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report.markdown(records, header, episodes_file=episodes_file), encoding="utf-8")


def where(args: argparse.Namespace) -> str:
    return "in-process" if args.in_process else args.env_url or "an embedded server"


def run_header(args: argparse.Namespace, records: list[EpisodeRecord], settings: LLMSettings | None) -> list[str]:
    lines = [
        f"- benchmark `{BENCHMARK}`, environment: {where(args)}",
        f"- {len(records)} episodes, seeds {_seeds(records)}",
    ]
    held_out = sorted({r.task for r in records if report.held_out(r)})
    if held_out:
        key = holdout_key()
        named = (
            "the key's fingerprint is the server's `holdout_fingerprint` at /health"
            if args.env_url
            else f"key fingerprint `{fingerprint(key)}`"
            if key
            else "key unknown"
        )
        lines.append(f"- held-out tasks {', '.join(held_out)}: {named}")
    if settings is not None:
        lines.append(f"- llm: {settings.model} at {settings.base_url}, {settings.mode} mode, {settings.reply} replies")
    return lines


def _seeds(records: list[EpisodeRecord]) -> str:
    """The seeds played; a held-out task's are the indices of its incidents, shown as a range."""
    seeds = sorted({r.seed for r in records if not report.held_out(r)})
    indices = sorted({r.seed for r in records if report.held_out(r)})
    shown = ",".join(map(str, seeds))
    if indices:
        shown += f"{'; ' if shown else ''}held-out incidents {indices[0]}-{indices[-1]}"
    return shown


def main(argv: Sequence[str] | None = None) -> int:
    parse = parser()
    args = parse.parse_args(argv)
    started = time.monotonic()
    if args.replay is not None:
        records = read_replay(parse, args.replay)
        for record in records:
            print_episode(record)
        path = replay_report(args.replay, args.output)
        header = [
            f"- benchmark `{BENCHMARK}`, replayed from {args.replay}",
            f"- {len(records)} episodes",
            "- wall time: see the original run",
        ]
        write_report(records, path, args.replay.name, header)
        print(report.summary_text(records), file=sys.stderr)
        print(f"{len(records)} episodes replayed; report: {path}", file=sys.stderr)
        return 1 if any(r.error for r in records) else 0

    args.output = args.output or DEFAULT_OUTPUT
    tasks = selected_tasks(args.tasks)
    try:
        check_holdout_key(tasks, args)
    except ValueError as exc:
        say(parse.prog, str(exc))
        return 2
    try:  # checked first: a missing key fails before any server starts
        settings = (
            LLMSettings.from_env(
                mode=args.llm_mode,
                reply=args.llm_reply,
                **({"concurrency": args.concurrency} if args.concurrency else {}),
            )
            if LLM in args.agent
            else None
        )
    except LLMUnavailable as exc:
        say(parse.prog, str(exc))
        return 2
    plans = {
        name: within_calls(plan(tasks, None, args.seeds), LLM_CALL_BUDGET)
        if name == LLM and args.episodes is None
        else plan(tasks, args.episodes, args.seeds)
        for name in args.agent
    }
    total = sum(len(specs) for specs in plans.values())
    against = where(args) if args.in_process else f"against {where(args)}"
    print(f"evaluating {', '.join(args.agent)} on {len(tasks)} task(s), {total} episodes, {against}", file=sys.stderr)
    if settings is not None:
        calls = sum(map(_budget, plans[LLM]))
        minutes = calls * LLM_SECONDS_PER_CALL / settings.concurrency / 60
        print(
            f"llm: {settings.model} at {settings.base_url}, {settings.mode} mode, {settings.reply} replies; at "
            f"most {calls} model calls, about {minutes:.0f} min at {LLM_SECONDS_PER_CALL:g} s per call with "
            f"{settings.concurrency} in flight",
            file=sys.stderr,
        )

    output = Output(total, parse.prog)
    try:
        anyio.run(run, args, plans, settings, output)
    except KeyboardInterrupt:
        output.stopped = signal.SIGINT
    if output.unreachable is not None:
        say(parse.prog, output.unreachable)
        return 1
    records, stopped = output.records, output.stopped
    path = args.output / REPORT_FILE
    wall_s = time.monotonic() - started
    if records:
        header = [*run_header(args, records, settings), *output.notes, f"- wall time {wall_s:.1f} s"]
        if stopped is not None:
            header.append(f"- stopped by {stopped.name} before every episode had finished")
        write_report(records, path, EPISODES_FILE, header)
    if stopped is not None:
        # Episodes in flight have printed their [END]; episodes.jsonl holds every finished one.
        say(parse.prog, f"stopped by {stopped.name}; finished episodes are in {args.output / EPISODES_FILE}")
        return INTERRUPTED[stopped]
    print(report.summary_text(records), file=sys.stderr)
    print(f"{len(records)} episodes in {wall_s:.1f} s; report: {path}", file=sys.stderr)
    # A run in which any episode failed (environment, model or unusable replies) is not a clean measurement.
    return 1 if any(r.error for r in records) else 0
