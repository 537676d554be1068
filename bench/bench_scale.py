"""Scale-out benchmark on loopback: workers, nginx, the episode stores, resuming, and the kill drill.

    .venv/bin/python bench/bench_scale.py            # a few minutes
    .venv/bin/python bench/bench_scale.py --quick    # a smoke run
    .venv/bin/python bench/bench_scale.py --saves [--against DIR]   # only (b) in process, beside DIR's stores

It measures, in one run (quote ratios from one run: the machine may be shared):
(a) full-environment steps/s at 256 sessions (hard task, whole episodes): one process with each
    store; `--workers 2` (its embedded SQLite store); two processes sharing a Redis, addressed
    directly and through nginx (as the Ingress: /ws to the least busy, HTTP hashing on Episode-Id).
    Every row's servers run throughout and the rows take turns, so neighbours weigh on all alike.
    The load comes from two client processes on the same cores; their CPU per step is read with the
    servers', and from both follows the most a second worker could give on this machine. Beside
    them, the cores the benchmark's processes had (what a second worker can use is what neighbours
    leave) and the busiest server process's part of the servers' CPU (50% when two share evenly);
(b) what the episode log adds per step: in process, the CPU of saves alone (64 episodes saving at
    once, so the stores write in batches) against a step alone; and in the server, row (a)'s
    1-process figures. `--saves` runs the in-process part alone, the least of SAVE_TRIES runs a
    store; `--against DIR` times another checkout's stores (its `server/`) in turns with these;
(c) resume latency over a WebSocket (connect, resume, reply) at step 5 and at the last step of a
    gen_expert episode, p50 and p99, per store;
(d) the kill drill: 200 episodes across two processes behind nginx, one killed (SIGKILL) a third of
    the way and restarted: completed, lost, resumed, and how long the resumed sessions waited;
(e) HTTP episodes held in the process: what a step costs the episode store when it checks a held
    copy against the log first and when it does not, and the server's CPU and round trip per
    `POST /step`, per store (`--http` runs this alone);
(f) making room in a full bounded store (HTTP episodes, sessions), per open, by entries held.
Needs nginx and redis-server (`make scale-services`).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import http.client
import importlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import msgspec
from websockets.asyncio.client import connect

from service_incident.client import ServiceIncidentEnv
from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import REFERENCE_AGENTS
from service_incident.harness.evaluation import evaluate, reference_policy
from service_incident.harness.records import EpisodeRecord, EpisodeSpec
from service_incident.models import InspectLogs, ResetRequest
from service_incident.server.bounded import BoundedStore
from service_incident.server.episode_log import open_log
from service_incident.server.http_episodes import EpisodeStore
from service_incident.server.replay import Episode, Replayer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
from bench_transport import cpu_s, policy  # noqa: E402
from scale_support import ServerProcess, nginx, redis_server, servers  # noqa: E402

SESSIONS = 256
LOADERS = 2
# Turns each row of (a) takes, its seconds shared among them.
ROUNDS = 3
# Episodes saving at once in the in-process store measurement.
CONCURRENT = 64
# Runs of each store in `--saves`, taken in turns with the other checkout's: the least of them counts.
SAVE_TRIES = 5

# One load generator: a share of the sessions, spread over the URLs given. It connects them all, says
# so, and plays once told to: handshakes and imports stay out of the timed window. It reports its own
# CPU over that window, as the server processes' is read over it: on a small machine the load
# generator's share of the cores is part of the answer.
LOADER = """
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[1])
from bench_transport import LeanClient, open_sessions, play
urls, sessions, seconds = sys.argv[2].split(","), int(sys.argv[3]), float(sys.argv[4])
async def main():
    share = [sessions // len(urls) + (i < sessions % len(urls)) for i in range(len(urls))]
    # 256 handshakes at once on a loaded machine take longer than the default 10 s.
    opened = (open_sessions(u, n, LeanClient, connect_timeout_s=120) for u, n in zip(urls, share) if n)
    groups = await asyncio.gather(*opened)
    print("ready", flush=True)
    sys.stdin.readline()
    cpu = time.process_time()
    runs = await asyncio.gather(*(play(clients, seconds) for clients in groups))
    cpu = time.process_time() - cpu
    steps, errors = sum(r["steps"] for r in runs), sum(r["errors"] for r in runs)
    played = max(r["seconds"] for r in runs)
    print(json.dumps({"steps": steps, "seconds": played, "errors": errors, "cpu_s": cpu}), flush=True)
    await asyncio.gather(*(c.close() for clients in groups for c in clients))
asyncio.run(main())
"""


def load(urls: list[str], seconds: float, processes: list[ServerProcess]) -> dict[str, Any]:
    """SESSIONS sessions from LOADERS processes for `seconds`: steps/s over the timed window, and the
    CPU per step of the servers and of the load generators over it."""
    command = [sys.executable, "-c", LOADER, str(ROOT / "bench"), ",".join(urls)]
    loaders = [
        subprocess.Popen(
            [*command, str(SESSIONS // LOADERS), str(seconds)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(LOADERS)
    ]
    try:
        for loader in loaders:
            assert loader.stdout is not None and loader.stdout.readline() == "ready\n", "a load generator failed"
        before = process_cpu(processes)
        for loader in loaders:
            assert loader.stdin is not None
            loader.stdin.write("go\n")
            loader.stdin.flush()
        results = [json.loads(loader.stdout.readline()) for loader in loaders if loader.stdout is not None]
        after = process_cpu(processes)
    finally:
        for loader in loaders:
            loader.communicate(timeout=120)
    steps = max(sum(r["steps"] for r in results), 1)
    played = max(r["seconds"] for r in results)
    each = {pid: after[pid] - before.get(pid, 0.0) for pid in after}
    spent, client = sum(each.values()), sum(r["cpu_s"] for r in results)
    return {
        "steps": steps,
        "rate": steps / played,
        "errors": sum(r["errors"] for r in results),
        "cpu_us": spent / steps * 1e6,
        "client_cpu_us": client / steps * 1e6,
        # How much of the machine the benchmark had: what a second worker can use is what is left.
        "cores_used": (spent + client) / played,
        # The busiest process's part of the servers' CPU: 0.5 when two share the work evenly.
        "busiest": max(each.values()) / spent if spent else 0.0,
    }


def process_cpu(processes: list[ServerProcess]) -> dict[int, float]:
    """CPU seconds of each server process and of its descendants (uvicorn's workers, the processes
    that generate incidents), by pid."""
    spent: dict[int, float] = {}
    for server in processes:
        assert server.process is not None
        pids = [server.process.pid]
        for pid in pids:  # grows as it goes: every descendant
            children = Path(f"/proc/{pid}/task/{pid}/children")
            if children.exists():
                pids += [int(child) for child in children.read_text().split()]
        spent |= {pid: cpu_s(pid) for pid in pids}
    return spent


def server_cpu(processes: list[ServerProcess]) -> float:
    """CPU seconds of the server processes and their children."""
    return sum(process_cpu(processes).values())


ONE = "1 process (memory store)"
WORKERS = "--workers 2 (embedded SQLite)"
DIRECT = "2 processes, Redis, direct"
PROXIED = "2 processes, Redis, via nginx"


def throughput(seconds: float, sqlite_url: str, redis_url: str) -> dict[str, dict[str, Any]]:
    """Every row's servers run at once, idle but for the row being measured, and the rows take turns
    in ROUNDS of `seconds / ROUNDS` each: a neighbour's burst on a shared machine falls on all alike."""
    with ExitStack() as stack:
        (one,) = stack.enter_context(servers(1, {"EPISODE_STORE": "memory"}))
        (sqlite,) = stack.enter_context(servers(1, {"EPISODE_STORE": sqlite_url}))
        (redis,) = stack.enter_context(servers(1, {"EPISODE_STORE": redis_url}))
        (workers,) = stack.enter_context(servers(1, {"EPISODE_STORE": "memory"}, workers=2))
        pair = stack.enter_context(servers(2, {"EPISODE_STORE": redis_url}))
        balancer = stack.enter_context(nginx(pair))
        rows = {
            ONE: ([one], [one.url]),
            "1 process (SQLite store)": ([sqlite], [sqlite.url]),
            "1 process (Redis store)": ([redis], [redis.url]),
            WORKERS: ([workers], [workers.url]),
            DIRECT: (pair, [server.url for server in pair]),
            PROXIED: (pair, [balancer]),
        }
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in rows}
        for _ in range(ROUNDS):
            for name, (processes, urls) in rows.items():
                runs[name].append(load(urls, seconds / ROUNDS, processes))
    return {name: _combined(each) for name, each in runs.items()}


def _combined(runs: list[dict[str, Any]]) -> dict[str, Any]:
    steps = sum(run["steps"] for run in runs)
    return {
        "steps": steps,
        "rate": steps / sum(run["steps"] / run["rate"] for run in runs),
        "errors": sum(run["errors"] for run in runs),
        **{
            key: sum(run[key] * run["steps"] for run in runs) / steps
            for key in ("cpu_us", "client_cpu_us", "cores_used", "busiest")
        },
    }


# --- (b) the log's cost per step, in process --------------------------------------------------------


def step_cpu(steps: int) -> float:
    """CPU µs of this process per step of whole hard-task episodes played alone, resets included."""
    env, taken, seed = ServiceIncidentEnvironment(), 0, 0
    started = time.process_time()
    while taken < steps:
        seed += 1
        observation = env.reset(task_id="hard", seed=seed)
        for action in policy(observation):
            taken += 1
            if env.step(action).done:
                break
    return (time.process_time() - started) / taken * 1e6


class StoreCode(NamedTuple):
    """One checkout's episode stores, as (b) drives them."""

    open_log: Callable[..., Any]
    replayer: Callable[..., Replayer]
    episode: Callable[..., Episode]


THIS = StoreCode(open_log, Replayer, Episode)


def checkout_stores(root: Path) -> StoreCode:
    """Another checkout's stores, imported beside these: its server package's modules import one
    another relatively, so a copy of it under a name of its own is that checkout's."""
    home = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    shutil.copytree(root / "server", home / "against_server", ignore=shutil.ignore_patterns("__pycache__", "web"))
    sys.path.insert(0, str(home))
    episode_log = importlib.import_module("against_server.episode_log")
    replay = importlib.import_module("against_server.replay")
    return StoreCode(episode_log.open_log, replay.Replayer, replay.Episode)


def save_cpu(steps: int, store: str, code: StoreCode = THIS) -> float:
    """CPU µs of this process (every thread of it) per step that saving costs, with CONCURRENT
    episodes saving at once as a server's sessions do (so a store may write many saves together):
    each creates its log, appends a hard episode's actions one save a step, yielding after each as
    the server does after every frame, and drops it. The environment does not run: the figure is the
    store's alone, not a difference of two noisy totals."""
    recorded = ServiceIncidentEnvironment()
    first = recorded.reset(task_id="hard", seed=1)
    actions = [msgspec.json.encode(action) for action in policy(first)]
    head = msgspec.json.encode(ResetRequest(task_id="hard", seed=1))

    async def run() -> float:
        log = code.open_log(store, 10**6, 10**6, 3600)
        replayer = code.replayer(log, ServiceIncidentEnvironment, None)
        taken = 0

        async def player(i: int) -> None:
            nonlocal taken
            while taken < steps:
                episode = code.episode(recorded, f"{i}-{taken}", "bench", head)
                await replayer.save(episode)
                for action in actions:
                    episode.unsaved.append(action)
                    await replayer.save(episode)
                    await asyncio.sleep(0)
                    taken += 1
                await replayer.drop(episode)

        try:
            started = time.process_time()
            await asyncio.gather(*(player(i) for i in range(CONCURRENT)))
            return (time.process_time() - started) / taken * 1e6
        finally:
            await log.aclose()

    return asyncio.run(run())


def saves_table(stores: list[tuple[str, list[str]]], steps: int, against: Path | None) -> None:
    """(b)'s in-process part alone: each store's least CPU per saved step over SAVE_TRIES runs, in
    turns with another checkout's if given (each its own of the store URLs given), against a step alone."""
    codes = [THIS, *([checkout_stores(against)] if against else [])]
    alone = min(step_cpu(steps) for _ in range(3))
    print(f"\n## (b) the episode log's CPU per step in process: {CONCURRENT} episodes saving at once, {steps} steps")
    print(f"a step alone (hard, resets included): {alone:.0f} µs, least of 3 runs; a store, least of {SAVE_TRIES}")
    extra = " against µs | against, of a step alone | this / against |" if against else ""
    print(f"| store | µs per step | of a step alone |{extra}\n|---|---|---|{'---|' * extra.count('|')}")
    for name, urls in stores:
        tries: list[list[float]] = [[] for _ in codes]
        for _ in range(SAVE_TRIES):
            for i, code in enumerate(codes):
                tries[i].append(save_cpu(steps, urls[i], code))
        least = [min(each) for each in tries]
        cells = [f"{cost:.1f} | {cost / alone:.1%}" for cost in least]
        if against:
            cells.append(f"{least[0] / least[1]:.2f}x")
        print(f"| {name} | {' | '.join(cells)} |")


# --- (c) resume latency ---------------------------------------------------------------------------------


async def resume_latency(url: str, repeats: int) -> dict[str, list[float]]:
    """Connect, resume, reply: at step 5 and at the last step of a gen_expert episode (the expert)."""
    times: dict[str, list[float]] = {"step 5": [], "last step": []}
    for seed in range(repeats):
        for point, stop in (("step 5", 5), ("last step", None)):
            episode_id, steps = await _played(url, seed, stop)
            times[point].append(await _resume(url, episode_id, steps))
    return times


async def _played(url: str, seed: int, stop: int | None) -> tuple[str, int]:
    """Play gen_expert (seed) to step `stop` or the end, then drop the socket as a dying server would
    (no `close` message, which would end the episode); the episode's id and the steps taken."""
    decode = ServiceIncidentEnv._decoder.decode
    agent = REFERENCE_AGENTS["expert"](seed)
    async with connect(url.replace("http", "ws", 1) + "/ws") as ws:
        await ws.send(json.dumps({"type": "reset", "data": {"task_id": "gen_expert", "seed": seed}}))
        frame = decode(await ws.recv(decode=False))
        episode_id, steps = frame.data.episode_id, 0
        while not frame.data.done and steps != stop:
            action = msgspec.json.encode(agent.act(frame.data.observation))
            await ws.send(b'{"type":"step","data":' + action + b"}", text=True)
            frame = decode(await ws.recv(decode=False))
            steps += 1
    return episode_id, steps


async def _resume(url: str, episode_id: str | None, steps: int) -> float:
    started = time.perf_counter()
    async with connect(url.replace("http", "ws", 1) + "/ws") as ws:
        await ws.send(json.dumps({"type": "resume", "data": {"episode_id": episode_id, "steps": steps}}))
        reply = json.loads(await ws.recv())
    assert reply["type"] == "resumed", reply
    return time.perf_counter() - started


# --- (d) the kill drill ---------------------------------------------------------------------------------


@contextmanager
def counting_resumes() -> Iterator[list[float]]:
    """How long each resume of the client took (from the lost connection to the reply)."""
    waits: list[float] = []
    original = ServiceIncidentEnv._resume

    async def timed(self: Any, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(self, *args)
        finally:
            waits.append(time.perf_counter() - started)

    ServiceIncidentEnv._resume = timed
    try:
        yield waits
    finally:
        ServiceIncidentEnv._resume = original


def kill_drill(redis_url: str, episodes: int) -> dict[str, Any]:
    specs = [EpisodeSpec(name=f"hard-{seed}", task_id="hard", incident_id=None, seed=seed) for seed in range(episodes)]
    done: list[EpisodeRecord] = []
    with servers(2, {"EPISODE_STORE": redis_url}) as pair, nginx(pair) as balancer, counting_resumes() as waits:
        victim = pair[0]
        went: dict[str, float] = {}

        def kill() -> None:
            while len(done) < episodes // 3:
                time.sleep(0.005)
            went["sessions"] = float(_health(victim.url)["active_sessions"])
            victim.signal(signal.SIGKILL)
            went["killed"] = time.perf_counter()
            victim.start()
            went["restarted_s"] = time.perf_counter() - went["killed"]

        killer = threading.Thread(target=kill, daemon=True)
        killer.start()
        started = time.perf_counter()
        records = asyncio.run(
            evaluate(reference_policy("expert"), specs, base_url=balancer, concurrency=48, on_episode=done.append)
        )
        wall = time.perf_counter() - started
        killer.join(timeout=300)
    return {
        "episodes": episodes,
        "completed": sum(r.graded and r.failure is None for r in records),
        "lost": sum(r.failure is not None for r in records),
        "in flight on the killed process": int(went.get("sessions", 0)),
        "resumed": len(waits),
        "resume wait p50 ms": statistics.median(waits) * 1e3 if waits else 0.0,
        "resume wait max ms": max(waits) * 1e3 if waits else 0.0,
        "restart of the killed process s": went.get("restarted_s", 0.0),
        "wall s": wall,
    }


# --- (e) HTTP episodes held in the process ------------------------------------------------------------


# Connections stepping their own HTTP episode at once, as a server's clients do (so saves may batch).
HTTP_CONNECTIONS = 8


def http_step_cost(server: ServerProcess, steps: int) -> dict[str, float]:
    """HTTP_CONNECTIONS keep-alive connections, each stepping an episode of its own that is over,
    where the environment answers at once: what a request costs the server besides the world (HTTP,
    finding the episode, saving its step). Server CPU per step, and the p50 round trip."""

    def client(seed: int) -> list[float]:
        connection = http.client.HTTPConnection(server.url[7:], timeout=60)
        connection.connect()
        # http.client writes headers and body apart: without this, Nagle meets the delayed ACK (~40 ms).
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def post(path: str, body: bytes, episode_id: str | None = None) -> Any:
            headers = {"Content-Type": "application/json", **({"Episode-Id": episode_id} if episode_id else {})}
            connection.request("POST", path, body, headers)
            response = connection.getresponse()
            reply = json.loads(response.read())
            assert response.status == 200, reply
            return reply

        reset = post("/reset", json.dumps({"task_id": "hard", "seed": seed}).encode())
        episode_id, look = reset["episode_id"], b'{"action": "inspect_logs", "target": "db"}'
        while not post("/step", look, episode_id)["done"]:
            pass
        ready.wait()
        round_trips = []
        for _ in range(steps // HTTP_CONNECTIONS):
            started = time.perf_counter()
            post("/step", look, episode_id)
            round_trips.append(time.perf_counter() - started)
        connection.close()
        return round_trips

    ready = threading.Event()
    with ThreadPoolExecutor(HTTP_CONNECTIONS) as pool:
        runs = [pool.submit(client, seed) for seed in range(HTTP_CONNECTIONS)]
        time.sleep(1.0)  # every episode reset and played out
        before = server_cpu([server])
        ready.set()
        round_trips = [t for run in runs for t in run.result()]
    spent = server_cpu([server]) - before
    return {"cpu_us": spent / len(round_trips) * 1e6, "p50_us": statistics.median(round_trips) * 1e6}


LOOK = InspectLogs(target="db")


def held_step_cpu(store: str, steps: int, checked: bool) -> float:
    """CPU µs of this process per step of CONCURRENT held HTTP episodes that are over (the world
    answers at once), stepped through the episode store: `checked` reads the log's length first (as
    a read request does, and as every step did before), else the step reads nothing."""

    async def run() -> float:
        log = open_log(store, 10**6, 10**6, 3600)
        episodes = EpisodeStore(Replayer(log, ServiceIncidentEnvironment, None), 10**4, 10**4, 3600, 3600)
        ids = [(await episodes.start(ResetRequest(task_id="hard", seed=i), "bench"))[0] for i in range(CONCURRENT)]
        for episode_id in ids:
            while not (await episodes.step(episode_id, await episodes.get(episode_id, "bench"), LOOK)).done:
                pass

        async def player(episode_id: str) -> None:
            for _ in range(steps // CONCURRENT):
                if checked:
                    episode = await episodes.get(episode_id, "bench")
                    episode.step(LOOK)
                    await episodes.save(episode_id, episode)
                else:
                    await episodes.step(episode_id, await episodes.get(episode_id, "bench", stepping=True), LOOK)

        try:
            started = time.process_time()
            await asyncio.gather(*(player(episode_id) for episode_id in ids))
            return (time.process_time() - started) / (steps // CONCURRENT * CONCURRENT) * 1e6
        finally:
            await log.aclose()

    return asyncio.run(run())


def http_steps_table(sqlite_url: str, redis_url: str, steps: int) -> None:
    stores = (("memory", "memory"), ("SQLite", sqlite_url), ("Redis", redis_url))
    print(f"\n## (e) HTTP episodes held in the process, stepped when over (the world answers at once), {steps} steps")
    print(f"in process: the episode store's CPU per step, {CONCURRENT} episodes at once, best of {ROUNDS} turns")
    print("| store | held copy checked first µs | not checked µs | saved |\n|---|---|---|---|")
    for name, store in stores:
        runs: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(ROUNDS):
            for checked in (True, False):
                runs[checked].append(held_step_cpu(store, steps, checked))
        first, held = min(runs[True]), min(runs[False])
        print(f"| {name} | {first:.1f} | {held:.1f} | {first - held:.1f} ({(first - held) / first * 100:.0f}%) |")
    print(f"in the server: POST /step from {HTTP_CONNECTIONS} keep-alive connections at once")
    print("| store | server CPU µs/step | round trip p50 µs |\n|---|---|---|")
    for name, store in stores:
        with servers(1, {"EPISODE_STORE": store}) as (server,):
            http_step_cost(server, steps // 10)  # warm up
            cost = http_step_cost(server, steps)
        print(f"| {name} | {cost['cpu_us']:.0f} | {cost['p50_us']:.0f} |")


# --- (f) making room in a full store -------------------------------------------------------------------

STORE_SIZES = (1_000, 10_000, 100_000)


def make_room_us(entries: int, opens: int = 2_000, store: type[BoundedStore[int]] = BoundedStore) -> float:
    """µs per open of a store full of `entries` idle ones, each open evicting the least recently used."""
    now = [0.0]
    full = store(capacity=entries, per_owner=entries, idle_timeout_s=3600, live_s=60, what="x", clock=lambda: now[0])
    for n in range(entries):
        full.add(str(n), n, str(n % 64))  # room enough: filling it evicts nothing
    now[0] = 120.0  # every one idle: each open evicts one
    started = time.perf_counter()
    for n in range(entries, entries + opens):
        full.make_room(str(n % 64))
        full.add(str(n), n, str(n % 64))
    return (time.perf_counter() - started) / opens * 1e6


def _health(url: str) -> dict[str, Any]:
    return dict(httpx.get(f"{url}/health", timeout=5).json())


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile of `values` (nearest rank); NaN for none."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: short and small")
    parser.add_argument("--http", action="store_true", help="only (e), the HTTP episodes")
    parser.add_argument("--saves", action="store_true", help="only (b) in process, the stores' CPU per step")
    parser.add_argument("--against", type=Path, help="with --saves: the root of another checkout to time beside")
    args = parser.parse_args()
    seconds, steps, repeats, episodes = (3.0, 500, 5, 60) if args.quick else (15.0, 5000, 40, 200)
    print(f"# bench_scale: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    with ExitStack() as stack:
        redis_url = stack.enter_context(redis_server())
        folder = stack.enter_context(tempfile.TemporaryDirectory())
        sqlite_url = f"sqlite://{folder}/episodes.sqlite3"
        if args.http:
            http_steps_table(sqlite_url, redis_url, steps)
            return
        if args.saves:
            sqlite_urls = [f"sqlite://{folder}/episodes-{i}.sqlite3" for i in range(2)]
            stores = [("memory", ["memory"] * 2), ("SQLite", sqlite_urls), ("Redis", [redis_url] * 2)]
            saves_table(stores, steps * 2, args.against)
            return

        print(f"\n## (a) steps/s, {SESSIONS} sessions of the full environment (hard), {seconds:g} s each")
        print(
            "| server | steps/s | vs 1 process | server CPU µs/step | load generators' CPU µs/step "
            f"| cores used of {os.cpu_count()} | busiest process's CPU | errors |"
        )
        print("|---|---|---|---|---|---|---|---|")
        rows = throughput(seconds, sqlite_url, redis_url)
        base = rows[ONE]
        for name, run in rows.items():
            cells = [f"{run['rate']:,.0f}", f"{run['rate'] / base['rate']:.2f}x", f"{run['cpu_us']:.0f}"]
            cells += [f"{run['client_cpu_us']:.0f}", f"{run['cores_used']:.2f}", f"{run['busiest']:.0%}"]
            print(f"| {name} | {' | '.join(cells)} | {run['errors']} |")
        print(f"\nnginx vs direct: {(rows[PROXIED]['rate'] / rows[DIRECT]['rate'] - 1) * 100:+.1f}%")
        # The most a second worker can give on this machine, were it all the benchmark's: one process
        # is bound by one core (1e6 / s1 steps/s); two workers and the load generators, which run on
        # the same cores, by all of them (cores * 1e6 / (s2 + c2)).
        s1, s2, c2 = base["cpu_us"], rows[WORKERS]["cpu_us"], rows[WORKERS]["client_cpu_us"]
        bound = (os.cpu_count() or 1) * s1 / (s2 + c2)
        print(
            f"--workers 2 vs 1 process: {rows[WORKERS]['rate'] / base['rate']:.2f}x measured; at most {bound:.2f}x "
            f"on {os.cpu_count()} cores that the load generators share (cores x {s1:.0f} / ({s2:.0f} + {c2:.0f}) µs)"
        )
        print(f"load average at the end of (a): {os.getloadavg()[0]:.1f}")

        print("\n## (b) what the episode log adds per step (resets included)")
        alone, served = step_cpu(steps), base["cpu_us"]
        print(
            f"in process: a step alone {alone:.0f} µs; saves of {CONCURRENT} episodes at once, {steps * 5} steps in all"
        )
        print(f"in the server: row (a)'s 1-process figures against its memory store's {served:.0f} µs")
        print("| store | in process µs | of a step alone | in the server µs | of a step with memory |")
        print("|---|---|---|---|---|")
        for name, store in (("memory", "memory"), ("SQLite", sqlite_url), ("Redis", redis_url)):
            cost = save_cpu(steps * 5, store)
            extra = rows[f"1 process ({name} store)"]["cpu_us"] - served if name != "memory" else None
            server_cells = "— | —" if extra is None else f"{extra:.0f} | {extra / served * 100:.1f}%"
            print(f"| {name} | {cost:.1f} | {cost / alone * 100:.1f}% | {server_cells} |")

        print(f"\n## (c) resume latency over a WebSocket, gen_expert, {repeats} episodes")
        print("| store | step 5 p50 ms | step 5 p99 ms | last step p50 ms | last step p99 ms |\n|---|---|---|---|---|")
        for name, store in (("memory", "memory"), ("SQLite", sqlite_url), ("Redis", redis_url)):
            with servers(1, {"EPISODE_STORE": store}) as (server,):
                times = asyncio.run(resume_latency(server.url, repeats))
            cells = [f"{percentile(times[k], q) * 1e3:.1f}" for k in ("step 5", "last step") for q in (0.5, 0.99)]
            print(f"| {name} | {' | '.join(cells)} |")

        print(f"\n## (d) kill drill: {episodes} episodes over 2 processes behind nginx, one killed -9 midway")
        drill = kill_drill(redis_url, episodes)
        print("| measure | value |\n|---|---|")
        for key, value in drill.items():
            print(f"| {key} | {value:.1f} |" if isinstance(value, float) else f"| {key} | {value} |")

        http_steps_table(sqlite_url, redis_url, steps)

        print("\n## (f) making room in a full store: µs per open, each evicting its least recently used entry")
        print(f"| entries | {' | '.join(f'{n:,}' for n in STORE_SIZES)} |\n|---|{'---|' * len(STORE_SIZES)}")
        print(f"| µs per open | {' | '.join(f'{make_room_us(n):.1f}' for n in STORE_SIZES)} |")


if __name__ == "__main__":
    main()
