"""Every link of README.md and docs/*.md to another file lands on a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from service_incident.harness import docs

ROOT = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
# Code (fenced blocks, inline spans) is not prose: a `](...)` there is Python, not a link.
_CODE = re.compile(r"^```.*?^```$|`[^`\n]*`", re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("path", docs.documents(ROOT), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(path: Path) -> None:
    for target in _LINK.findall(_CODE.sub("", path.read_text())):
        if re.match(r"[a-z]+://|mailto:|#", target):
            continue
        resolved = (path.parent / target.split("#")[0]).resolve()
        assert resolved.is_relative_to(ROOT) and resolved.exists(), f"{path.name}: {target}"
