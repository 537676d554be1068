"""Transport benchmark on loopback: our server and client against stock OpenEnv and a raw floor.

Every server runs in its own process, and every load generator in a process other than its server's:
ours from this script, the stock client from the stock venv (`make test` builds `.venv/openenv`).

    .venv/bin/python bench/bench_transport.py            # about a minute and a half
    .venv/bin/python bench/bench_transport.py --quick    # a smoke run, a few seconds per row

It measures (a) sequential step round trips: our client and server with the full environment,
stock OpenEnv client and server with a trivial echo environment, and a raw websockets floor (a
server answering every frame with canned bytes of the size of our observation frame); (b) aggregate
steps/s at 1, 16 and 256 concurrent sessions, and at 256 against `server --workers N`, one worker per
core, loaded from two processes (bench_scale's load generators); (c) our server's RSS per idle session at 1,000
sessions; (d) HTTP POST /step requests/s. Every loop is bounded by a count or a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import textwrap
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Protocol

from msgspec import Struct
from websockets.asyncio.client import connect

from service_incident.client import EnvClient, LocalServer, ServiceIncidentEnv
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.models import Action, Declare, InspectLogs, InspectMetrics, State

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
from serving import STOCK_DIR, process_on_socket  # noqa: E402  (the stock side, shared with the interop tests)

STOCK_PYTHON = Path(os.environ.get("OPENENV_PYTHON", ROOT / ".venv" / "openenv" / "bin" / "python"))
CONCURRENCY = (1, 16, 256)
IDLE_SESSIONS = 1000
WARM_UP = 50  # untimed steps before each timed sequence
# Sequential runs alternate between the stacks in rounds, so load from elsewhere on a shared machine
# hits all of them alike rather than whichever ran at the wrong moment.
ROUNDS = 5

# The stock load generator: a typed subclass of the stock async EnvClient, as OpenEnv's templates write one.
STOCK_LOAD = """
import asyncio, json, sys, time
from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server.types import State
from echo_env import EchoAction, EchoObservation

class EchoEnv(EnvClient[EchoAction, EchoObservation, State]):
    def _step_payload(self, a):
        return a.model_dump()
    def _parse_result(self, p):
        o = p.get("observation", {})
        return StepResult(EchoObservation(echoed_message=o.get("echoed_message", ""),
                                          message_length=o.get("message_length", 0),
                                          done=p.get("done", False), reward=p.get("reward")),
                          p.get("reward"), p.get("done", False))
    def _parse_state(self, p):
        return State(**p)

url = sys.argv[1]
hello = EchoAction(message="hello")

async def sequential(n):
    async with EchoEnv(base_url=url) as env:
        await env.reset()
        for _ in range(50):
            await env.step(hello)
        times = []
        for _ in range(n):
            t = time.perf_counter()
            await env.step(hello)
            times.append(time.perf_counter() - t)
    return {"times": times}

async def throughput(n, seconds):
    clients = [EchoEnv(base_url=url, message_timeout_s=120) for _ in range(n)]
    for c in clients:
        await c.connect()
        await c.reset()
    deadline = time.perf_counter() + seconds
    counts, errors = [0] * n, [0]
    async def worker(i):
        while time.perf_counter() < deadline:
            try:
                await clients[i].step(hello)
                counts[i] += 1
            except Exception:
                errors[0] += 1
                return
    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(n)))
    elapsed = time.perf_counter() - started
    for c in clients:
        await c.close()
    return {"steps": sum(counts), "seconds": elapsed, "errors": errors[0]}

# One command per line, "sequential N" or "throughput SESSIONS SECONDS"; one JSON line back for each.
for line in sys.stdin:
    mode, *args = line.split()
    run = sequential(int(args[0])) if mode == "sequential" else throughput(int(args[0]), float(args[1]))
    print(json.dumps(asyncio.run(run)), flush=True)
"""

# The floor: a bare websockets server that answers every frame with canned bytes.
FLOOR_SERVER = """
import asyncio, socket, sys
from websockets.asyncio.server import serve
reply = "x" * int(sys.argv[2])
async def answer(ws):
    async for _ in ws:
        await ws.send(reply)
async def main():
    async with serve(answer, sock=socket.socket(fileno=int(sys.argv[1])), compression=None, max_size=None):
        await asyncio.Future()
asyncio.run(main())
"""


def stat_fields(pid: int) -> list[str]:
    """A process's /proc stat fields after its name (which may hold spaces): the state first."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_s(pid: int) -> float:
    """User plus system CPU time the process has used."""
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class StockLoad:
    """The stock load generator, one long-lived process in the stock venv, so its runs can be
    interleaved with ours instead of paying a 3 s import each time."""

    def __init__(self, stock_dir: Path, url: str) -> None:
        self.process = subprocess.Popen(
            [str(STOCK_PYTHON), "-c", STOCK_LOAD, url],
            cwd=STOCK_DIR,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def run(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the stock load generator died")
        return json.loads(line)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


# --- our side -----------------------------------------------------------------------------------


class Listed(Protocol):
    """An observation as the fixed episode reads it: its services (any client's type will do)."""

    services: list[str]


class Seen(Struct):
    """What the fixed episode reads of an observation; the decoder skips the rest."""

    services: list[str]


class LeanClient(EnvClient[Action, Seen, State]):
    """Our client decoding only what the fixed episode reads: a load generator that leaves the cores
    to the servers it measures (a whole observation's decode costs the client about a third of what
    the step costs the server)."""


def policy(observation: Listed) -> list[Action]:
    """A fixed, full-length episode: look at everything, then declare."""
    services = observation.services
    return [
        *(InspectLogs(target=s) for s in services),
        *(InspectMetrics(target=s) for s in services),
        Declare(target=services[0], severity="P1"),
    ]


async def our_sequential(url: str, steps: int) -> dict[str, list[float]]:
    """Round trips of steps (and, apart, of resets) over whole hard-task episodes; then of steps on an
    episode that is over, where the environment answers in under a microsecond: the transport alone."""
    times: dict[str, list[float]] = {"step": [], "reset": [], "transport": []}
    async with ServiceIncidentEnv(url) as env:
        seed = 0
        while len(times["step"]) < steps + WARM_UP:
            seed += 1
            t = time.perf_counter()
            result = await env.reset(task_id="hard", seed=seed)
            times["reset"].append(time.perf_counter() - t)
            for action in policy(result.observation):
                t = time.perf_counter()
                result = await env.step(action)
                times["step"].append(time.perf_counter() - t)
                if result.done:
                    break
        look = InspectLogs(target=result.observation.services[0])
        for _ in range(steps + WARM_UP):
            t = time.perf_counter()
            await env.step(look)
            times["transport"].append(time.perf_counter() - t)
    return {"step": times["step"][WARM_UP:], "reset": times["reset"], "transport": times["transport"][WARM_UP:]}


def environment_alone(steps: int) -> dict[str, list[float]]:
    """The same episodes played in process, no transport: what the environment itself costs."""
    env = ServiceIncidentEnvironment()
    times: dict[str, list[float]] = {"step": [], "reset": []}
    seed = 0
    while len(times["step"]) < steps:
        seed += 1
        t = time.perf_counter()
        observation = env.reset(task_id="hard", seed=seed)
        times["reset"].append(time.perf_counter() - t)
        for action in policy(observation):
            t = time.perf_counter()
            observation = env.step(action)
            times["step"].append(time.perf_counter() - t)
            if observation.done:
                break
    return times


async def step_frame_bytes(url: str) -> int:
    """What a step reply weighs on the wire, for the floor to carry the same bytes."""
    async with connect(url.replace("http", "ws") + "/ws", compression=None) as ws:
        await ws.send('{"type":"reset","data":{"task_id":"hard","seed":1}}')
        await ws.recv()
        await ws.send('{"type":"step","data":{"action":"inspect_logs","target":"db"}}')
        return len(await ws.recv(decode=False))


async def our_throughput(url: str, sessions: int, seconds: float, transport_only: bool = False) -> dict[str, Any]:
    """Steps/s over `sessions` concurrent sessions. `transport_only` steps an episode that is over:
    the environment answers in under a microsecond, with a frame of the usual size."""
    clients = await open_sessions(url, sessions)
    try:
        return await play(clients, seconds, transport_only)
    finally:
        await asyncio.gather(*(c.close() for c in clients))


async def open_sessions(
    url: str, sessions: int, client: type[EnvClient[Any, Any, Any]] = ServiceIncidentEnv, **options: Any
) -> list[Any]:
    clients = [client(url, message_timeout_s=120, **options) for _ in range(sessions)]
    await asyncio.gather(*(c.connect() for c in clients))
    return clients


async def play(clients: list[ServiceIncidentEnv], seconds: float, transport_only: bool = False) -> dict[str, Any]:
    """Every client plays hard-task episodes (our_throughput) for `seconds`: steps, seconds, errors."""
    counts, errors = [0] * len(clients), [0]
    deadline = time.perf_counter() + seconds

    async def worker(i: int) -> None:
        env, seed = clients[i], i * 100_000
        try:
            if transport_only:
                result = await env.reset(task_id="hard", seed=seed)
                await env.step(Declare(target=result.observation.services[0], severity="P1"))
                look = InspectLogs(target=result.observation.services[0])
                while time.perf_counter() < deadline:
                    await env.step(look)
                    counts[i] += 1
                return
            while time.perf_counter() < deadline:
                seed += 1
                result = await env.reset(task_id="hard", seed=seed)
                for action in policy(result.observation):
                    result = await env.step(action)
                    counts[i] += 1
                    if result.done or time.perf_counter() >= deadline:
                        break
        except Exception:
            errors[0] += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(len(clients))))
    elapsed = time.perf_counter() - started
    return {"steps": sum(counts), "seconds": elapsed, "errors": errors[0]}


async def floor_sequential(url: str, steps: int) -> list[float]:
    frame = '{"type":"step","data":{"action":"inspect_logs","target":"db"}}'
    times = []
    async with connect(url.replace("http", "ws"), compression=None, max_size=None) as ws:
        for i in range(steps + WARM_UP):
            t = time.perf_counter()
            await ws.send(frame)
            await ws.recv(decode=False)
            if i >= WARM_UP:
                times.append(time.perf_counter() - t)
    return times


async def idle_sessions(url: str, pid: int, count: int) -> dict[str, Any]:
    """RSS of the server before and after `count` sessions that connected, reset once and went idle."""
    async with ServiceIncidentEnv(url) as warm:  # load every code path before the baseline
        await warm.reset(task_id="hard")
    await asyncio.sleep(0.5)
    baseline = rss_kb(pid)
    clients = [ServiceIncidentEnv(url, message_timeout_s=120, ping_interval_s=None) for _ in range(count)]
    errors = 0
    gate = asyncio.Semaphore(64)

    async def open_one(env: ServiceIncidentEnv, seed: int) -> bool:
        async with gate:
            try:
                await env.connect()
                await env.reset(task_id="hard", seed=seed)
                return True
            except Exception:
                return False

    ok = await asyncio.gather(*(open_one(c, i) for i, c in enumerate(clients)))
    errors += ok.count(False)
    await asyncio.sleep(1.0)
    loaded = rss_kb(pid)
    # Every session must still answer.
    states = await asyncio.gather(*(c.state() for c in clients), return_exceptions=True)
    errors += sum(isinstance(s, BaseException) for s in states)
    await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
    return {
        "baseline_kb": baseline,
        "loaded_kb": loaded,
        "per_session_kb": (loaded - baseline) / count,
        "errors": errors,
    }


def http_steps(url: str, requests: int, body: bytes, reset_body: bytes | None, episode: int) -> float:
    """Sequential keep-alive POST /step; requests/s. With `reset_body`, resets every `episode` steps."""
    connection = http.client.HTTPConnection(url[7:], timeout=30)
    connection.connect()
    # http.client writes headers and body separately: without this, Nagle's algorithm meets the
    # server's delayed ACK and every request waits ~40 ms, whichever server it is.
    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    headers = {"Content-Type": "application/json"}

    def post(path: str, payload: bytes) -> None:
        connection.request("POST", path, payload, headers)
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{path} -> {response.status}")

    elapsed = 0.0
    for i in range(requests):
        if reset_body is not None and i % episode == 0:
            post("/reset", reset_body)
        t = time.perf_counter()
        post("/step", body)
        elapsed += time.perf_counter() - t
    connection.close()
    return requests / elapsed


def workers_throughput(seconds: float) -> dict[str, Any]:
    """Steps/s at 256 sessions against `server --workers N`, a worker per core, from bench_scale's two
    load-generator processes: one would be the bottleneck for several workers."""
    from bench_scale import load  # imported here: bench_scale imports this module
    from scale_support import servers

    with servers(1, {}, workers=os.cpu_count() or 1) as processes:
        return load([processes[0].url], seconds, processes)


# --- report -------------------------------------------------------------------------------------


def micros(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{statistics.fmean(times) * 1e6:.0f} µs (p50 {statistics.median(times) * 1e6:.0f}, p99 {p99 * 1e6:.0f})"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def rate(run: dict[str, Any]) -> float:
    return run["steps"] / run["seconds"]


def measured(pid: int, run: Any) -> dict[str, Any]:
    """Run a throughput measurement and add the server's CPU time per step to its result."""
    before = cpu_s(pid)
    result = run()
    result["server_cpu_us"] = (cpu_s(pid) - before) / max(result["steps"], 1) * 1e6
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs: a smoke test, not a measurement")
    args = parser.parse_args()
    steps, seconds, http_requests = (300, 1.0, 200) if args.quick else (3000, 5.0, 2000)
    if not STOCK_PYTHON.exists():
        sys.exit(f"stock OpenEnv venv missing at {STOCK_PYTHON}: run `make test` first (or set OPENENV_PYTHON)")
    ours_settings = {"max_concurrent_envs": IDLE_SESSIONS + 64, "session_idle_timeout_s": 3600}
    stock_command = [str(STOCK_PYTHON), str(STOCK_DIR / "serve.py"), "{fd}", "echo_env:app"]

    with ExitStack() as running:
        ours = running.enter_context(LocalServer(ours_settings))
        assert ours.process is not None
        pid, url = ours.process.pid, ours.base_url
        frame_bytes = asyncio.run(step_frame_bytes(url))
        floor_url, _ = running.enter_context(
            process_on_socket([sys.executable, "-c", FLOOR_SERVER, "{fd}", str(frame_bytes)], ready_path=None)
        )
        stock_url, stock_server = running.enter_context(
            process_on_socket(stock_command, cwd=STOCK_DIR, env={"MAX_CONCURRENT_ENVS": "300"})
        )
        stock = StockLoad(STOCK_DIR, stock_url)
        running.callback(stock.close)

        seq: dict[str, list[float]] = {"step": [], "reset": [], "transport": [], "stock": [], "floor": []}
        for _ in range(ROUNDS):
            for name, times in asyncio.run(our_sequential(url, steps // ROUNDS)).items():
                seq[name] += times
            seq["floor"] += asyncio.run(floor_sequential(floor_url, steps // ROUNDS))
            seq["stock"] += stock.run(f"sequential {steps // ROUNDS}")["times"]
        ours_tp, stock_tp = {}, {}
        for n in CONCURRENCY:
            ours_tp[n] = measured(pid, lambda n=n: asyncio.run(our_throughput(url, n, seconds)))
            stock_tp[n] = measured(stock_server.pid, lambda n=n: stock.run(f"throughput {n} {seconds}"))
        bare_tp = measured(pid, lambda: asyncio.run(our_throughput(url, 256, seconds, transport_only=True)))
        every_core = workers_throughput(seconds)
        memory = asyncio.run(idle_sessions(url, pid, IDLE_SESSIONS))
        ours_http = http_steps(
            url, http_requests, b'{"action": "inspect_logs", "target": "db"}', b'{"task_id": "hard"}', episode=6
        )
        stock_http = http_steps(stock_url, http_requests, b'{"action": {"message": "hello"}}', None, episode=0)

    # Ratios of medians: on a shared machine a few stalls of milliseconds move a mean more than the stack does.
    alone = environment_alone(steps)
    mid = {
        name: statistics.median(seq[key])
        for name, key in (("ours", "step"), ("bare", "transport"), ("stock", "stock"), ("floor", "floor"))
    }
    # The most a step round trip should take: the bare transport's and the core's own step's.
    floor_and_core = mid["floor"] + statistics.median(alone["step"])
    rows = [
        (
            "(a) step round trip, ours (full env, hard task)",
            micros(seq["step"]),
            f"{mid['ours'] / mid['stock']:.2f}x stock, {mid['ours'] / mid['floor']:.2f}x floor, "
            f"{mid['ours'] / floor_and_core:.2f}x floor + core step (target ≤ 1.5x: "
            f"{verdict(mid['ours'] <= 1.5 * floor_and_core)})",
        ),
        (
            "(a) step round trip, ours, transport only (env answers in < 1 µs)",
            micros(seq["transport"]),
            f"{mid['bare'] / mid['stock']:.2f}x stock, {mid['bare'] / mid['floor']:.2f}x floor",
        ),
        ("(a) reset round trip, ours (full env, hard task)", micros(seq["reset"]), ""),
        (
            "(a) the environment alone, in process: step / reset",
            f"{statistics.fmean(alone['step']) * 1e6:.0f} / {statistics.fmean(alone['reset']) * 1e6:.0f} µs",
            "what the full-env rows spend in the core",
        ),
        ("(a) step round trip, stock OpenEnv 0.10.0 (echo env)", micros(seq["stock"]), ""),
        (f"(a) raw websockets floor ({frame_bytes} B reply)", micros(seq["floor"]), ""),
    ]
    for n in CONCURRENCY:
        o, s = ours_tp[n], stock_tp[n]
        target = f"; target ≥ 1.5x: {verdict(rate(o) >= 1.5 * rate(s))}" if n == 256 else ""
        rows.append(
            (
                f"(b) {n} sessions, steps/s ours / stock",
                f"{rate(o):,.0f} / {rate(s):,.0f}",
                f"{rate(o) / rate(s):.2f}x; server CPU/step {o['server_cpu_us']:.0f} / "
                f"{s['server_cpu_us']:.0f} µs; errors {o['errors']} / {s['errors']}{target}",
            )
        )
    workers_rate, stock_rate = every_core["rate"], rate(stock_tp[256])
    rows.append(
        (
            f"(b) 256 sessions, steps/s ours with --workers {os.cpu_count()} / stock",
            f"{workers_rate:,.0f} / {stock_rate:,.0f}",
            f"{workers_rate / stock_rate:.2f}x (target ≥ 3x: {verdict(workers_rate >= 3 * stock_rate)}); "
            f"server CPU/step {every_core['cpu_us']:.0f} µs, load generators' {every_core['client_cpu_us']:.0f} µs; "
            f"errors {every_core['errors']}",
        )
    )
    rows.append(
        (
            "(b) 256 sessions, ours, transport only",
            f"{rate(bare_tp):,.0f}",
            f"{rate(bare_tp) / rate(stock_tp[256]):.2f}x stock; server CPU/step "
            f"{bare_tp['server_cpu_us']:.0f} µs; errors {bare_tp['errors']}",
        )
    )
    rows.append(
        (
            f"(c) our server RSS per idle session, {IDLE_SESSIONS} sessions",
            f"{memory['per_session_kb']:.1f} KB",
            f"RSS {memory['baseline_kb'] / 1024:.0f} -> {memory['loaded_kb'] / 1024:.0f} MB; errors "
            f"{memory['errors']} (≤ 50 KB: {verdict(memory['per_session_kb'] <= 50)}; "
            f"0 errors: {verdict(memory['errors'] == 0)})",
        )
    )
    rows.append(
        (
            "(d) HTTP POST /step, req/s ours / stock",
            f"{ours_http:,.0f} / {stock_http:,.0f}",
            f"{ours_http / stock_http:.1f}x",
        )
    )

    print(
        f"\nTransport benchmark, Python {platform.python_version()}, {os.cpu_count()} cores, loopback"
        f"{' (QUICK: a smoke run, not a measurement)' if args.quick else ''}\n"
    )
    print("| measure | result | vs target |\n|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(
        textwrap.dedent(f"""
        Round trips: mean (p50, p99) of {steps} sequential steps per stack, in {ROUNDS} alternating rounds after
        {WARM_UP} warm-up steps each; ratios are of medians. Throughput: {seconds:g} s per row, ours and stock back
        to back, all sessions in one asyncio load-generator process; our sessions play whole hard-task episodes
        (a reset every 7 calls, timed but not counted as a step); stock runs the section-11 echo env.
    """).strip()
    )


if __name__ == "__main__":
    main()
