"""The generated incident dataset: build the frozen evaluation set, validate it, export it.

    service-incident-dataset build       # regenerate service_incident/incidents/generated_eval.jsonl
    service-incident-dataset validate    # check the file against the generator; print the solvability table
                                         # (thousands of episodes: most of a minute; progress on stderr)
    service-incident-dataset export DIR  # copy the evaluation set as JSON Lines for a dataset loader

`python data.py ...` in a checkout is the same command.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from .. import dataset
from .solvability import solvability_table

# Where the package keeps it: the checkout's folder, or the installed package's.
EVAL_PATH = Path(dataset.__file__).resolve().with_name("incidents") / dataset.EVAL_FILE


def build() -> int:
    records = dataset.build()
    EVAL_PATH.write_bytes(dataset.encode(records))
    print(f"wrote {EVAL_PATH} ({len(records)} incidents)")
    return 0


def validate(seeds: int) -> int:
    # Progress goes to stderr, so stdout stays the report alone.
    note(f"building the evaluation set afresh to compare with {EVAL_PATH.name}")
    fresh = dataset.encode(dataset.build())
    if EVAL_PATH.read_bytes() != fresh:
        print(f"{EVAL_PATH} differs from what the generator builds: run `python data.py build`", file=sys.stderr)
        return 1
    print(f"{EVAL_PATH.name}: {len(dataset.decode(fresh))} incidents, identical to a fresh build", flush=True)
    print(solvability_table(seeds, note))
    return 0


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def export(folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / dataset.EVAL_FILE
    shutil.copyfile(EVAL_PATH, target)
    print(f"exported {target}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="regenerate the frozen evaluation set")
    check = commands.add_parser("validate", help="check the evaluation set and measure solvability")
    check.add_argument("--seeds", type=int, default=1000, help="training seeds per difficulty to play")
    out = commands.add_parser("export", help="copy the evaluation set to a folder")
    out.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    if args.command == "build":
        return build()
    if args.command == "validate":
        return validate(args.seeds)
    return export(args.folder)
