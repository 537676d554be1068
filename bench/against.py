"""Another checkout's core timed beside this one's: the in-process benchmarks' `--against DIR`.

A compiled core cannot be imported twice in one process: its extension modules know their package's
name, so a copy under another name does not import. Each core is timed in processes of its own
instead: the benchmark runs again as a child, once per core in each round, with `--json` to print
its samples (`print_json`), the child of the other checkout with that checkout's root first on its
path. Each child says where it found the package and whether its core runs compiled: one that found
another checkout's is refused, and one core interpreted beside a compiled one is said. The order
alternates round by round (this, other; other, this; ...), so drift on a shared machine falls on
both alike; each core's samples are pooled over its rounds (`pooled`). A benchmark asks for both
through `measured`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The flag a child is run with; the ones that name the other checkout and the rounds, which it is not.
JSON_FLAG = "--json"
AGAINST_FLAG = "--against"
ROUNDS_FLAG = "--rounds"
# A benchmark's samples as a child prints them: each row's label, and its seconds (a list of them, or
# a list of such lists: resets and steps).
Rows = dict[str, Any]


def checkout(value: str) -> Path:
    """A checkout's root, as `--against` names it: one with the package in it."""
    root = Path(value).resolve()
    if not (root / "service_incident" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"{root} holds no service_incident package")
    return root


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"at least 1, got {number}")
    return number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every benchmark that times another core beside this one takes."""
    parser.add_argument(AGAINST_FLAG, type=checkout, help="the root of another checkout to time beside this one")
    parser.add_argument(ROUNDS_FLAG, type=positive, default=2, help="with --against: runs of each core")
    parser.add_argument(JSON_FLAG, action="store_true", help=argparse.SUPPRESS)  # a child's: its samples as JSON


def runs_compiled() -> bool:
    """Whether this process's core runs its compiled modules (not its sources: `service_incident.compiled`)."""
    environment = importlib.import_module("service_incident.environment")
    return str(environment.__file__).endswith(tuple(EXTENSION_SUFFIXES))


def print_json(rows: Rows) -> None:
    """A child's output: its samples, where it found the package, and whether its core runs compiled."""
    package = importlib.import_module("service_incident")
    print(json.dumps({"package": str(Path(str(package.__file__)).parent), "compiled": runs_compiled(), "rows": rows}))


def child_argv(argv: list[str]) -> list[str]:
    """The benchmark's own arguments, without `--against DIR` or `--rounds N` (either spelling)."""
    kept: list[str] = []
    skip = False
    for argument in argv:
        if skip:
            skip = False
        elif argument in (AGAINST_FLAG, ROUNDS_FLAG):
            skip = True
        elif not argument.startswith((f"{AGAINST_FLAG}=", f"{ROUNDS_FLAG}=")):
            kept.append(argument)
    return kept


def checked(found: dict[str, Any], root: Path) -> Rows:
    """A child's samples, if it timed the core at `root`; else the run stops."""
    if not Path(found["package"]).resolve().is_relative_to(root):
        raise SystemExit(f"the child imported the package from {found['package']}, not the core at {root}")
    return found["rows"]


def run_child(script: Path, argv: list[str], root: Path) -> dict[str, Any]:
    """What one run of the benchmark, with the core of the checkout at `root`, printed as JSON."""
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, str(script), *argv, JSON_FLAG], env=environ, stdout=subprocess.PIPE, text=True, check=True
    )
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def rounds(script: Path, argv: list[str], other: Path, count: int) -> tuple[list[Rows], list[Rows]]:
    """Each round's samples from this checkout's core and from the other's, the order alternating."""
    roots, own = (ROOT, other), child_argv(argv)
    found: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    for index in range(count):
        for core in (0, 1) if index % 2 == 0 else (1, 0):
            found[core].append(run_child(script, own, roots[core]))
    if found[0][0]["compiled"] != found[1][0]["compiled"]:
        interpreted = roots[1] if found[0][0]["compiled"] else ROOT
        print(
            f"the core at {interpreted} runs interpreted (`make compile` there): its times are not comparable",
            file=sys.stderr,
        )
    return [checked(run, ROOT) for run in found[0]], [checked(run, other) for run in found[1]]


def pooled(runs: list[Rows]) -> Rows:
    """Each row's samples over every run: its seconds joined, or each of its lists of seconds joined.
    A row only some runs have is left out."""
    labels = [label for label in runs[0] if all(label in run for run in runs)]
    found: Rows = {}
    for label in labels:
        first = runs[0][label]
        if first and isinstance(first[0], list):
            found[label] = [[t for run in runs for t in run[label][part]] for part in range(len(first))]
        else:
            found[label] = [t for run in runs for t in run[label]]
    return found


def measured(
    script: Path, args: argparse.Namespace, timings: Callable[[argparse.Namespace], Rows]
) -> tuple[Rows, Rows | None]:
    """A benchmark's samples with this checkout's core, and with the other's under `--against` (else
    None). In a child, its samples are printed instead and the process ends there."""
    if args.json:
        print_json(timings(args))
        raise SystemExit(0)
    if args.against is None:
        return timings(args), None
    runs = rounds(script, sys.argv[1:], args.against, args.rounds)
    return pooled(runs[0]), pooled(runs[1])
