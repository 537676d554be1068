"""The outside load test: 1,000 WebSocket sessions on loopback, each stepping once a second.

    .venv/bin/python bench/bench_load.py                       # 1 worker, then --workers 2; ~3 minutes
    .venv/bin/python bench/bench_load.py --workers 1 --seconds 10 --sessions 200   # a smoke run

For each server configuration it starts `server --workers N` on a free 127.0.0.1 port and opens the
sessions from several load-generator processes (one event loop would add its own queueing to every
reply). Each session resets a training incident (gen_hard by default), then steps at its own fixed
times, one a second from a start drawn at random within the first second (so the sessions' steps are
spread, not in lock step); an episode that ends is reset at once and the pace goes on. After a
warm-up, a timed window: the step round trips of the steps sent in it (from sending the frame to its
reply decoded, what the client's `step()` takes) as p50/p95/p99, resets apart; the CPU per call of
the server's processes over the window (from /proc; its generation processes', told by their
niceness, apart too), and of the load generators over all they sent
while paced (from each one's own clock). A step sent late against its schedule (its session's previous reply came late,
or the generator itself lagged) is counted: if the generators lag, the load they offered was less
than asked, and the figures say so.

Sessions play the transport benchmark's fixed episode (logs, then metrics of every service, then a
declaration): an agent that costs the generator next to nothing per step. They are the project's
client (`EnvClient`: its socket, lock, timeouts and decoder) typed with the one field of the
observation that agent reads, as an outside load generator decodes what it acts on: a typed decode of
the whole observation would cost the generator five times the decode of a step's reply here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from service_incident.models import Action
from service_incident.server.generation import NICENESS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
from bench_scale import percentile, process_cpu  # noqa: E402  (CPU of a server and its processes, from /proc)
from bench_transport import LeanClient, policy, stat_fields  # noqa: E402  (the fixed episode, read by a lean client)
from scale_support import ServerProcess  # noqa: E402  (`server --workers N` on a free port)

TARGET_P99_MS = 50.0
# Handshakes one generator has in flight at once: a thousand at once would time some out.
HANDSHAKES = 32
# A step sent this much after its scheduled time is late.
LATE_S = 0.1


# --- one load-generator process -----------------------------------------------------------------


class Pacer:
    """One session: its own schedule, a step a `period` from `first` on, until `stop`."""

    def __init__(self, env: LeanClient, seed: int, task: str) -> None:
        self.env, self.seed, self.task = env, seed, task
        self.actions: Iterator[Action] = iter(())  # what is left of the episode's fixed actions
        self.steps: list[float] = []  # round trips of steps sent within the window
        self.resets: list[float] = []
        self.late = 0
        self.error: str | None = None  # the exception that ended the session early, if one did
        self.calls = 0  # all it sent while paced, warm-up included: what the generator's CPU was spent on

    async def open(self, gate: asyncio.Semaphore) -> None:
        async with gate:
            await self.env.connect()
            self.actions = iter(policy((await self.env.reset(task_id=self.task, seed=self.seed)).observation))

    async def run(self, first: float, period: float, window: tuple[float, float]) -> None:
        due = first
        try:
            while due < window[1]:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                sent = time.monotonic()
                counted = window[0] <= due
                self.calls += 1
                self.late += counted and sent - due > LATE_S
                action = next(self.actions, None)
                if action is None:  # the episode is over: a new one, and this turn's step is its reset
                    self.seed += 1
                    result = await self.env.reset(task_id=self.task, seed=self.seed)
                    self.actions = iter(policy(result.observation))
                    if counted:
                        self.resets.append(time.monotonic() - sent)
                else:
                    result = await self.env.step(action)
                    if counted:
                        self.steps.append(time.monotonic() - sent)
                    if result.done:
                        self.actions = iter(())
                due += period
        except Exception as exc:  # the session stops; the kind is reported
            self.error = type(exc).__name__


async def generate(url: str, sessions: int, first_seed: int, task: str, period: float) -> None:
    """Open `sessions`, say "ready", wait for the parent's "go START WINDOW_FROM WINDOW_TO" (monotonic
    seconds, one clock for every process on the machine), play, and print the results as JSON."""
    pacers = [
        Pacer(LeanClient(url, connect_timeout_s=120, message_timeout_s=120), first_seed + i * 1000, task)
        for i in range(sessions)
    ]
    gate = asyncio.Semaphore(HANDSHAKES)
    opened = await asyncio.gather(*(p.open(gate) for p in pacers), return_exceptions=True)
    failed = sum(isinstance(o, BaseException) for o in opened)
    pacers = [p for p, o in zip(pacers, opened, strict=True) if not isinstance(o, BaseException)]
    print("ready", flush=True)
    _, start, window_from, window_to = (await asyncio.to_thread(sys.stdin.readline)).split()
    window = (float(window_from), float(window_to))
    draw = random.Random(first_seed)
    cpu = time.process_time()
    await asyncio.gather(*(p.run(float(start) + draw.random() * period, period, window) for p in pacers))
    cpu = time.process_time() - cpu
    result = {
        "steps": [t for p in pacers for t in p.steps],
        "resets": [t for p in pacers for t in p.resets],
        "late": sum(p.late for p in pacers),
        "errors": Counter(p.error for p in pacers if p.error) + Counter({"connect or first reset": failed}),
        "cpu_s": cpu,
        "calls": sum(p.calls for p in pacers),
    }
    print(json.dumps(result), flush=True)
    await asyncio.gather(*(p.env.close() for p in pacers), return_exceptions=True)


# --- the parent ---------------------------------------------------------------------------------


def raise_descriptor_limit(needed: int) -> int:
    """Raise this process's soft descriptor limit to its hard one (children inherit it)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        sys.exit(f"{needed} descriptors needed, the hard limit is {hard}: raise it (ulimit -Hn) first")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def run(workers: int, args: argparse.Namespace) -> dict[str, Any]:
    environ = {
        "MAX_CONCURRENT_ENVS": str(args.sessions + 64),
        # Every session comes from 127.0.0.1: the per-address bound must admit them all (settings.py).
        "MAX_CONNECTIONS_PER_CLIENT": str(args.sessions + 64),
    }
    server = ServerProcess(environ, workers).start()
    loaders: list[subprocess.Popen[str]] = []
    try:
        share = [args.sessions // args.loaders + (i < args.sessions % args.loaders) for i in range(args.loaders)]
        for i, sessions in enumerate(share):
            command = [sys.executable, __file__, "--generate", server.url, str(sessions), str(i * 10_000_000)]
            command += ["--task", args.task, "--period", str(args.period)]
            loaders.append(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        for loader in loaders:
            assert loader.stdout is not None and loader.stdout.readline() == "ready\n", "a load generator failed"
        start = time.monotonic() + 0.5
        window = (start + args.warmup, start + args.warmup + args.seconds)
        for loader in loaders:
            assert loader.stdin is not None
            loader.stdin.write(f"go {start} {window[0]} {window[1]}\n")
            loader.stdin.flush()
        time.sleep(max(0.0, window[0] - time.monotonic()))
        before = process_cpu([server])
        time.sleep(max(0.0, window[1] - time.monotonic()))
        each = {pid: cpu - before.get(pid, 0.0) for pid, cpu in process_cpu([server]).items()}
        spent = sum(each.values())
        generating = sum(cpu for pid, cpu in each.items() if niceness(pid) == NICENESS)
        results = [json.loads(loader.stdout.readline()) for loader in loaders if loader.stdout is not None]
    finally:
        for loader in loaders:
            loader.communicate(timeout=120)
        try:
            server.stop()
        except subprocess.TimeoutExpired:  # an overloaded server may drain a thousand sessions slower than that
            assert server.process is not None
            server.process.kill()
            server.process.wait()
    steps = [t for r in results for t in r["steps"]]
    resets = [t for r in results for t in r["resets"]]
    calls = max(len(steps) + len(resets), 1)
    return {
        "steps": steps,
        "resets": resets,
        "late": sum(r["late"] for r in results),
        "errors": sum((Counter(r["errors"]) for r in results), Counter()),
        "server_cpu_us": spent / calls * 1e6,
        "generation_cpu_us": generating / calls * 1e6,
        "loader_cpu_us": sum(r["cpu_s"] for r in results) / max(sum(r["calls"] for r in results), 1) * 1e6,
        "server_cores": spent / args.seconds,
    }


def niceness(pid: int) -> int:
    """A process's nice value (a generation process runs at `NICENESS`, the server's others at 0)."""
    return int(stat_fields(pid)[16])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30.0, help="the timed window")
    parser.add_argument("--warmup", type=float, default=5.0, help="paced seconds before the window")
    parser.add_argument("--period", type=float, default=1.0, help="seconds between a session's steps")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="server configurations to run")
    parser.add_argument("--loaders", type=int, default=4, help="load-generator processes")
    parser.add_argument("--task", default="gen_hard")
    parser.add_argument("--generate", nargs=3, metavar=("URL", "SESSIONS", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        url, sessions, seed = args.generate
        asyncio.run(generate(url, int(sessions), int(seed), args.task, args.period))
        return
    # The server holds a descriptor per session, every generator one per its share, and a few beside.
    limit = raise_descriptor_limit(args.sessions * 2 + 256)
    rows = {workers: run(workers, args) for workers in args.workers}
    offered = args.sessions / args.period
    print(
        f"\nLoad test: {args.sessions} sessions at one step per {args.period:g} s ({offered:,.0f} calls/s offered), "
        f"{args.task}, {args.seconds:g} s window after {args.warmup:g} s warm-up, {args.loaders} load generators, "
        f"{os.cpu_count()} cores, descriptor limit {limit}\n"
    )
    print(
        "| server | steps | step p50 ms | p95 ms | p99 ms | reset p50 / p99 ms | server CPU per call µs "
        "| of it, generation µs | server cores busy | generator CPU per call µs | late | errors | p99 ≤ 50 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for workers, r in rows.items():
        steps, resets = r["steps"], r["resets"]
        p99 = percentile(steps, 0.99) * 1e3
        errors = ", ".join(f"{count} {kind}" for kind, count in r["errors"].items())
        print(
            f"| --workers {workers} | {len(steps):,} | {percentile(steps, 0.5) * 1e3:.1f} "
            f"| {percentile(steps, 0.95) * 1e3:.1f} | {p99:.1f} "
            f"| {percentile(resets, 0.5) * 1e3:.1f} / {percentile(resets, 0.99) * 1e3:.1f} "
            f"| {r['server_cpu_us']:.0f} | {r['generation_cpu_us']:.0f} | {r['server_cores']:.2f} "
            f"| {r['loader_cpu_us']:.0f} | {r['late']} "
            f"| {errors or 0} | {'met' if p99 <= TARGET_P99_MS else 'MISSED'} |"
        )
    print(
        "\nA call is a step or a reset (an episode's end is followed by a reset at the next turn); the server's"
        "\nCPU per call is the window's CPU over its calls (of it, the generation processes', which build the"
        "\nincidents of resets beside the event loop), the generators' their paced run's. Late: calls"
        f"\nsent more than {LATE_S * 1e3:.0f} ms after their schedule. Errors: sessions ended early, by exception."
    )


if __name__ == "__main__":
    main()
