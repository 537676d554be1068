"""bench/bench_served.py times the environment's steps inside a real server: every step a session
played is one the server timed, and each way of running the step gets a row of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "bench_served.py"


def test_the_server_times_every_step_one_session_played() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--seconds", "0.3", "--rounds", "1", "--warm-up", "0.2", "--idle-us", "50"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # The script stops with an error where the server's count of timed steps is not the session's.
    assert done.returncode == 0, done.stderr
    rows = {
        line.split("|")[1].strip(): line.split("|")[2:-1] for line in done.stdout.splitlines() if line[:4] == "| in"
    }
    assert list(rows) == ["in process, back to back", "in process, after 50 µs idle", "inside our server, one session"]
    for cells in rows.values():
        steps, mean = int(cells[0].replace(",", "")), float(cells[1])
        assert steps > 0 and mean > 0.0
