"""Tables the documentation shows, written in from the definitions themselves; a test keeps every file current.

    python -m service_incident.harness.docs            # rewrite every table block of README.md and docs/*.md
    python -m service_incident.harness.docs --check    # exit 1 naming the files whose tables are stale

A block is `<!-- table:NAME -->`, the table, `<!-- /table -->`; NAME is a key of `tables.TABLES`.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from .tables import TABLES

# A block's body never holds another comment, so one block cannot swallow the next.
_BLOCK = re.compile(r"(<!-- table:([\w-]+) -->\n)(?:(?!<!--).)*(<!-- /table -->)", re.DOTALL)


class UnknownTable(KeyError):
    """A block names a table no renderer provides."""


def documents(root: Path) -> list[Path]:
    """The files that may hold table blocks: the front page and the manual."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def table_names(text: str) -> list[str]:
    return [match.group(2) for match in _BLOCK.finditer(text)]


def render_into(text: str, tables: Mapping[str, Callable[[], str]] = TABLES) -> str:
    """The text with every table block replaced by its current rendering."""

    def render(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in tables:
            raise UnknownTable(f"no table named {name!r}; known: {', '.join(sorted(tables))}")
        return f"{match.group(1)}{tables[name]()}\n{match.group(3)}"

    return _BLOCK.sub(render, text)


def stale(root: Path) -> list[Path]:
    """The documents whose table blocks differ from a fresh rendering."""
    return [path for path in documents(root) if render_into(path.read_text()) != path.read_text()]


def sync(root: Path) -> list[Path]:
    """Rewrite the stale documents in place; returns them."""
    changed = stale(root)
    for path in changed:
        path.write_text(render_into(path.read_text()))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository (the current directory)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table is stale")
    args = parser.parse_args(argv)
    if not (args.root / "README.md").is_file():
        parser.error(f"no README.md in {args.root}: run from the repository or pass --root")
    changed = stale(args.root) if args.check else sync(args.root)
    for path in changed:
        print(f"{'stale' if args.check else 'rewrote'}: {path.relative_to(args.root)}", file=sys.stderr)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
