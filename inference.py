"""Evaluate an agent on Service Incident and report what it scored.

With nothing set, starts an embedded server on a free local port and runs the expert reference
agent over the evaluation incidents of every task, concurrently, over the WebSocket client.
stdout carries OpenEnv's [START] / [STEP] / [END] lines and nothing else; progress and the summary
go to stderr; episodes.jsonl (every step, with its observation) and report.md go to --output.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import anyio

from service_incident.harness import report
from service_incident.harness.agents import REFERENCE_AGENTS
from service_incident.harness.evaluation import (
    BENCHMARK,
    DEFAULT_CONCURRENCY,
    EpisodeRecord,
    EpisodeSpec,
    decode,
    encode,
    evaluate,
    plan,
    reference_policy,
    server,
    transcript,
)
from service_incident.harness.llm import DEFAULT_API_BASE_URL, DEFAULT_MODEL, LLMAgent, LLMSettings, MissingApiKey
from service_incident.tasks import TASKS, Task

LLM = "llm"
AGENTS = (*REFERENCE_AGENTS, LLM)
# The default LLM run plays at most this many model calls even if every episode spends its whole
# step budget: about 8 minutes at 4 s per call with 4 in flight, 20 minutes at 10 s (README: sizing).
LLM_CALL_BUDGET = 480
# A typical hosted model's answer to a ~4k-token prompt, for the time estimate printed at start.
LLM_SECONDS_PER_CALL = 4.0
EPISODES_FILE, REPORT_FILE = "episodes.jsonl", "report.md"

EPILOG = f"""
environment variables:
  ENV_URL            evaluate against this server instead of an embedded one (same as --env-url)
  API_BASE_URL       OpenAI-compatible endpoint for --agent llm (default {DEFAULT_API_BASE_URL})
  MODEL_NAME         model for --agent llm (default {DEFAULT_MODEL})
  HF_TOKEN, API_KEY, OPENAI_API_KEY
                     the key for --agent llm, first one set wins; required, no fallback

examples:
  python inference.py                                        # expert, every task, embedded server
  python inference.py --agent {",".join(REFERENCE_AGENTS)}   # the ladder
  HF_TOKEN=... python inference.py --agent llm --tasks easy,gen_easy --episodes 3
  python inference.py --replay results/{EPISODES_FILE}       # print a saved run again, no server
"""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="inference.py",
        description=__doc__.split("\n\n")[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--agent", default="expert", type=_names(AGENTS),
                        help=f"agent(s) to evaluate, comma-separated, in order: {', '.join(AGENTS)} (default expert)")
    suites = list(dict.fromkeys(task.suite for task in TASKS.values()))
    parser.add_argument("--tasks", default=None, type=_names((*TASKS, *suites)),
                        help=f"task ids or suite names ({', '.join(suites)}), comma-separated (default: every task)")
    parser.add_argument("--episodes", type=_positive, default=None, metavar="N",
                        help="the first N evaluation incidents of each task (default: all of them for reference "
                             "agents; for llm, incidents taken in turn from each task while at most "
                             f"{LLM_CALL_BUDGET} model calls can be needed)")
    parser.add_argument("--seeds", default="42", type=_ints,
                        help="episode seeds, comma-separated; each incident is played under each (default 42)")
    parser.add_argument("--concurrency", type=_positive, default=None, metavar="N",
                        help=f"episodes in flight (default {DEFAULT_CONCURRENCY}; for llm also the model requests "
                             "in flight, default 4)")
    parser.add_argument("--output", type=Path, default=Path("results"), metavar="DIR",
                        help=f"folder for {EPISODES_FILE} and {REPORT_FILE} (default results)")
    parser.add_argument("--env-url", default=os.environ.get("ENV_URL") or None, metavar="URL",
                        help="server to evaluate against (default $ENV_URL, else an embedded server)")
    parser.add_argument("--replay", type=Path, default=None, metavar="FILE",
                        help=f"print a saved {EPISODES_FILE} as stdout lines and write its report; plays nothing")
    return parser.parse_args(argv)


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
    """Tasks in registry order; a suite name selects all of its tasks."""
    return [t for t in TASKS.values() if names is None or t.id in names or t.suite in names]


class Output:
    """Where finished episodes go: stdout (their lines, together), the JSONL file and the progress bar."""

    def __init__(self, total: int, results: IO[bytes]) -> None:
        self.total = total
        self.results = results
        self.done = 0
        self.scores = 0.0
        self.started = time.monotonic()
        self.tty = sys.stderr.isatty()

    def __call__(self, record: EpisodeRecord) -> None:
        print_episode(record)
        self.results.write(encode(record))
        self.results.flush()
        self.done += 1
        self.scores += record.score
        self.progress()

    def progress(self) -> None:
        width, filled = 30, self.done * 30 // max(self.total, 1)
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} episodes, "
                f"mean score {self.scores / self.done:.3f}, {time.monotonic() - self.started:.0f} s")
        if self.tty:
            print(f"\r{line}", end="\n" if self.done == self.total else "", file=sys.stderr, flush=True)
        elif self.done == self.total or self.done % max(self.total // 10, 1) == 0:
            print(line, file=sys.stderr, flush=True)


async def run(args: argparse.Namespace) -> list[EpisodeRecord]:
    tasks = selected_tasks(args.tasks)
    # Checked first: a missing key must fail before any server starts.
    overrides = {"concurrency": args.concurrency} if args.concurrency else {}
    settings = LLMSettings.from_env(**overrides) if LLM in args.agent else None
    plans = {
        name: within_calls(plan(tasks, None, args.seeds), LLM_CALL_BUDGET)
        if name == LLM and args.episodes is None else plan(tasks, args.episodes, args.seeds)
        for name in args.agent
    }
    total = sum(len(specs) for specs in plans.values())
    where = args.env_url or "an embedded server"
    print(f"evaluating {', '.join(args.agent)} on {len(tasks)} task(s), {total} episodes, against {where}",
          file=sys.stderr)
    if settings is not None:
        calls = sum(TASKS[s.task_id].max_steps for s in plans[LLM])
        minutes = calls * LLM_SECONDS_PER_CALL / settings.concurrency / 60
        print(f"llm: {settings.model} at {settings.base_url}; at most {calls} model calls, about {minutes:.0f} min "
              f"at {LLM_SECONDS_PER_CALL:g} s per call with {settings.concurrency} in flight", file=sys.stderr)
    args.output.mkdir(parents=True, exist_ok=True)
    records: list[EpisodeRecord] = []
    # One server (embedded unless --env-url) for every agent of the run.
    async with server(args.env_url) as base_url:
        with (args.output / EPISODES_FILE).open("wb") as results:
            output = Output(total, results)
            for name, specs in plans.items():
                if name == LLM:
                    assert settings is not None
                    async with LLMAgent(settings) as agent:
                        records += await evaluate(agent, specs, agent=agent.name, base_url=base_url,
                                                  concurrency=settings.concurrency, on_episode=output)
                else:
                    records += await evaluate(reference_policy(name), specs, agent=name, base_url=base_url,
                                              concurrency=args.concurrency or DEFAULT_CONCURRENCY, on_episode=output)
    return records


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
        calls += TASKS[spec.task_id].max_steps
        if calls > budget:
            break
        taken.append(spec)
    return taken


def print_episode(record: EpisodeRecord) -> None:
    # One write per episode: concurrent episodes never interleave their lines.
    sys.stdout.write("\n".join(transcript(record)) + "\n")
    sys.stdout.flush()


def replay(path: Path) -> list[EpisodeRecord]:
    records = decode(path.read_bytes())
    for record in records:
        print_episode(record)
    return records


def write_report(records: list[EpisodeRecord], args: argparse.Namespace, wall_s: float) -> Path:
    server = "replayed from " + str(args.replay) if args.replay else (args.env_url or "embedded server")
    header = [
        f"- benchmark `{BENCHMARK}`, server: {server}",
        f"- {len(records)} episodes, seeds {','.join(map(str, sorted({r.seed for r in records})))}",
        f"- wall time {wall_s:.1f} s" if not args.replay else "- wall time: see the original run",
    ]
    args.output.mkdir(parents=True, exist_ok=True)
    path = args.output / REPORT_FILE
    path.write_text(report.markdown(records, header), encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    try:
        records = replay(args.replay) if args.replay else anyio.run(run, args)
    except MissingApiKey as exc:
        print(f"inference.py: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Episodes in flight have printed their [END]; episodes.jsonl holds every finished one.
        print(f"inference.py: interrupted; finished episodes are in {args.output / EPISODES_FILE}", file=sys.stderr)
        return 130
    wall_s = time.monotonic() - started
    path = write_report(records, args, wall_s)
    print(report.summary_text(records), file=sys.stderr)
    print(f"{len(records)} episodes in {wall_s:.1f} s; report: {path}", file=sys.stderr)
    # A run in which any episode failed (server, model or unusable replies) is not a clean measurement.
    return 1 if any(r.error for r in records) else 0


if __name__ == "__main__":
    raise SystemExit(main())
