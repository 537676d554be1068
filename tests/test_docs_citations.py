"""The benchmark scripts and the stock fixtures cite documents of this repository only: a reader
who follows a citation finds the file it names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CITING = sorted([*(ROOT / "bench").glob("*.py"), *(ROOT / "tests" / "stock").glob("*.py")])
_DOCUMENT = re.compile(r"[\w./-]+\.md\b")


@pytest.mark.parametrize("path", CITING, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_document_is_in_the_repository(path: Path) -> None:
    for name in _DOCUMENT.findall(path.read_text()):
        assert any((folder / name).is_file() for folder in (ROOT, ROOT / "docs")), f"{path.name} cites {name}"
