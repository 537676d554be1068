"""Fairness benchmark on loopback: how long a neighbour waits while other clients pipeline frames.

    .venv/bin/python bench/bench_fairness.py            # about half a minute
    .venv/bin/python bench/bench_fairness.py --quick    # a smoke run

The server runs in its own process. A load process opens `--clients` sessions (50) that each send
`--burst` (40) `gen_expert` resets at once, read the replies, and repeat until the deadline, so the
server always has thousands of frames queued. Meanwhile this process is the neighbour: one session
asking for its state, and `/health` over HTTP, one request at a time, timing every round trip; and
once a second a new client that connects and resets. The same probes run first on an idle server.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time
from typing import Any

from websockets.asyncio.client import connect

from service_incident.client import LocalServer

RESET = json.dumps({"type": "reset", "data": {"task_id": "gen_expert", "seed": 1}})

# The pipelining clients, in a process of their own so that their own work does not slow the probes.
LOAD = """
import asyncio, json, sys, time
from websockets.asyncio.client import connect
url, clients, burst, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
reset = json.dumps({"type": "reset", "data": {"task_id": "gen_expert", "seed": 1}})
async def pipeline(deadline):
    frames = 0
    async with connect(url, max_size=None, compression=None, open_timeout=60, ping_interval=None) as ws:
        while time.monotonic() < deadline:
            for _ in range(burst):
                await ws.send(reset)
            for _ in range(burst):
                await ws.recv()
            frames += burst
    return frames
async def main():
    deadline = time.monotonic() + seconds
    print(json.dumps({"frames": sum(await asyncio.gather(*(pipeline(deadline) for _ in range(clients))))}), flush=True)
asyncio.run(main())
"""


def percentiles(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "n": len(ordered),
        "p50": statistics.median(ordered) * 1e3,
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3,
        "max": ordered[-1] * 1e3,
    }


async def probe(url: str, seconds: float) -> dict[str, Any]:
    """Round trips of a neighbour session and of /health, and the time a new client takes to its first reply."""
    ws_url = url.replace("http", "ws") + "/ws"
    host = url.removeprefix("http://")
    session: list[float] = []
    health: list[float] = []
    newcomer: list[float] = []
    deadline = time.monotonic() + seconds

    async def neighbour() -> None:
        async with connect(ws_url, compression=None, ping_interval=None) as ws:
            await ws.send('{"type": "reset", "data": {"task_id": "hard", "seed": 1}}')
            await ws.recv()
            while time.monotonic() < deadline:
                t = time.perf_counter()
                await ws.send('{"type": "state"}')
                await ws.recv()
                session.append(time.perf_counter() - t)

    def health_loop() -> None:
        connection = http.client.HTTPConnection(host, timeout=120)
        while time.monotonic() < deadline:
            t = time.perf_counter()
            connection.request("GET", "/health")
            connection.getresponse().read()
            health.append(time.perf_counter() - t)
        connection.close()

    async def newcomers() -> None:
        while time.monotonic() < deadline:
            t = time.perf_counter()
            async with connect(ws_url, compression=None, ping_interval=None, open_timeout=120) as ws:
                await ws.send(RESET)
                await ws.recv()
            newcomer.append(time.perf_counter() - t)
            await asyncio.sleep(1.0)

    await asyncio.gather(neighbour(), asyncio.to_thread(health_loop), newcomers())
    return {"session": percentiles(session), "health": percentiles(health), "newcomer": percentiles(newcomer)}


def row(name: str, figures: dict[str, float]) -> str:
    return f"| {name} | {figures['p50']:.1f} | {figures['p99']:.1f} | {figures['max']:.1f} | {figures['n']:,} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50, help="pipelining clients (50)")
    parser.add_argument("--burst", type=int, default=40, help="frames each sends before reading (40)")
    parser.add_argument("--quick", action="store_true", help="short runs: a smoke test, not a measurement")
    args = parser.parse_args()
    seconds = 3.0 if args.quick else 15.0

    with LocalServer({"max_concurrent_envs": args.clients + 16}) as server:
        idle = asyncio.run(probe(server.base_url, seconds / 3))
        load = subprocess.Popen(
            [
                sys.executable,
                "-c",
                LOAD,
                server.base_url.replace("http", "ws") + "/ws",
                str(args.clients),
                str(args.burst),
                str(seconds + 2),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            time.sleep(2.0)  # every pipelining session open and busy before the probes start
            loaded = asyncio.run(probe(server.base_url, seconds))
            assert load.stdout is not None
            frames = json.loads(load.stdout.readline())["frames"]
        finally:
            load.wait(timeout=120)

    print(
        f"\nFairness benchmark, Python {platform.python_version()}, {os.cpu_count()} cores, loopback"
        f"{' (QUICK: a smoke run, not a measurement)' if args.quick else ''}\n"
    )
    print("| neighbour's round trip | p50 ms | p99 ms | max ms | samples |\n|---|---|---|---|---|")
    for label, figures in (("idle server", idle), (f"{args.clients} clients pipelining", loaded)):
        print(row(f"WebSocket `state`, {label}", figures["session"]))
        print(row(f"HTTP `/health`, {label}", figures["health"]))
        print(row(f"new client, connect to first reset reply, {label}", figures["newcomer"]))
    print(
        textwrap.dedent(f"""
        Load: {args.clients} sessions each sending {args.burst} `gen_expert` resets back to back, then
        reading the replies, for {seconds + 2:g} s: {frames:,} frames, {frames / (seconds + 2):,.0f} per second.
        Probes run in the benchmark process, one request at a time each; a new client every second.
    """).strip()
    )


if __name__ == "__main__":
    main()
