"""Every ```python block of README.md and docs/*.md runs as written, offline, each in a fresh interpreter.

A block that cannot run as it stands (it needs a GPU, a model endpoint, a key) is fenced as ```bash
or without a language instead, so what is shown as Python is code that works.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from service_incident.harness import docs

ROOT = Path(__file__).resolve().parents[1]
_PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def snippets() -> list[pytest.param]:
    found = []
    for path in docs.documents(ROOT):
        text = path.read_text()
        for match in _PYTHON_BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(pytest.param(match.group(1), id=f"{path.relative_to(ROOT)}:{line}"))
    return found


def test_the_front_page_shows_python() -> None:
    """Playing in-process and the client, both as Python."""
    assert sum(param.id.startswith("README.md:") for param in snippets()) >= 2


@pytest.mark.parametrize("code", snippets())
def test_snippet_runs(code: str, run_snippet: Callable[[str], subprocess.CompletedProcess[str]]) -> None:
    result = run_snippet(code)
    assert result.returncode == 0, result.stderr
