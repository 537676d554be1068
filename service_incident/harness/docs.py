"""Tables README shows, rendered from the definitions themselves; a test keeps README equal to them.

    python -m service_incident.harness.docs README.md    # rewrite every <!-- table:NAME --> block in place
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from .tables import TABLES

# A block's body never holds another comment, so one block cannot swallow the next.
_BLOCK = re.compile(r"(<!-- table:(\w+) -->\n)(?:(?!<!--).)*(<!-- /table -->)", re.DOTALL)


def render_into(text: str) -> str:
    """The text with every table block replaced by its current rendering."""
    return _BLOCK.sub(lambda m: f"{m.group(1)}{TABLES[m.group(2)]()}\n{m.group(3)}", text)


if __name__ == "__main__":
    path = Path(sys.argv[1])
    path.write_text(render_into(path.read_text()))
