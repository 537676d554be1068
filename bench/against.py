"""Another checkout's core timed beside this one's, for the in-process benchmarks' `--against DIR`.

A compiled core cannot be imported twice in one process: its extension modules know their package's
name, so a copy under another name does not import. Each core is timed in processes of its own
instead: the benchmark runs again as a child, once per core in each round, with `--json` to print
its samples, the child of the other checkout with that checkout's root first on its path. The order
alternates round by round (this, other; other, this; ...), so drift on a shared machine falls on
both alike; each core's samples are pooled over its rounds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The flag a child is run with, and the one that names the other checkout, which a child is not given.
JSON_FLAG = "--json"
AGAINST_FLAG = "--against"


def checkout(root: Path) -> Path:
    """The root of a checkout whose core can be timed: it holds the package."""
    root = root.resolve()
    if not (root / "service_incident" / "__init__.py").is_file():
        raise SystemExit(f"{root} holds no service_incident package: give the root of a checkout")
    return root


def child_argv(argv: list[str]) -> list[str]:
    """The benchmark's own arguments, without `--against DIR` (either spelling) or `--rounds N`."""
    kept: list[str] = []
    skip = False
    for argument in argv:
        if skip:
            skip = False
        elif argument in (AGAINST_FLAG, "--rounds"):
            skip = True
        elif not argument.startswith((f"{AGAINST_FLAG}=", "--rounds=")):
            kept.append(argument)
    return kept


def run_child(script: Path, argv: list[str], root: Path) -> Any:
    """What one run of the benchmark, with the core of the checkout at `root`, printed as JSON."""
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, str(script), *argv, JSON_FLAG], env=environ, stdout=subprocess.PIPE, text=True, check=True
    )
    return json.loads(done.stdout)


def rounds(script: Path, argv: list[str], other: Path, count: int) -> tuple[list[Any], list[Any]]:
    """Each round's JSON from this checkout's core and from the other's, the order alternating."""
    roots = (ROOT, checkout(other))
    found: tuple[list[Any], list[Any]] = ([], [])
    for index in range(count):
        order = (0, 1) if index % 2 == 0 else (1, 0)
        for core in order:
            found[core].append(run_child(script, child_argv(argv), roots[core]))
    return found
