"""Every code block of docs/integrations.md does what the page says.

Python blocks run in a fresh interpreter and print what their comments say. The two blocks that
cannot run as they stand are fenced without a language (as the docs' snippet test expects) and
say why on their first line: the GRPO script (TRL, torch and a GPU) is compiled and its imports of
this package resolved; the AutoEnv block runs where the stock `openenv` package is installed,
against a running server.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from service_incident.tasks import GENERATED_BUDGETS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "integrations.md"
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```$", PAGE.read_text(), flags=re.M | re.S)
NOT_RUN = "# Not run here"
NEEDS_OPENENV = "# Runs where `openenv` is installed"
DEFAULT_URL = "http://127.0.0.1:8000"


def _blocks(language: str) -> list[str]:
    return [code for lang, code in BLOCKS if lang == language]


def _run(python: str | Path, code: str, cwd: Path) -> str:
    # absolute(), not resolve(): a venv's interpreter is a link that must stay the venv's.
    done = subprocess.run(
        [str(Path(python).absolute()), "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_page_has_the_blocks_this_test_knows() -> None:
    assert len(_blocks("python")) == 3
    unfenced = _blocks("")
    assert len(unfenced) == 2 and unfenced[0].startswith(NOT_RUN) and unfenced[1].startswith(NEEDS_OPENENV)


def _claim(line: str) -> re.Pattern[str]:
    """The output a `print(...)  # comment` line says it gives: `...` and `<name>` stand for anything."""
    comment = line.split("  # ", 1)[1]
    return re.compile(".*".join(map(re.escape, re.split(r"\.\.\.|<\w+>", comment))))


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_python_blocks_run_and_print_what_their_comments_say(
    index: int, run_snippet: Callable[[str], subprocess.CompletedProcess[str]]
) -> None:
    code = _blocks("python")[index]
    done = run_snippet(code)  # the run the docs' snippet test checks too
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    prints = [line for line in code.splitlines() if line.lstrip().startswith("print(")]
    assert len(printed) == len(prints)
    for line, output in zip(prints, printed, strict=True):
        if "  # " in line and not line.endswith("reward"):
            assert _claim(line).fullmatch(output), (line, output)
    assert printed[-1].startswith("True ") or 0 < float(printed[-1]) < 1


def test_the_training_script_compiles_and_names_what_exists() -> None:
    (script,) = [code for code in _blocks("") if code.startswith(NOT_RUN)]
    tree = ast.parse(script)
    ours = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module.startswith("service_")]
    assert ours
    for node in ours:
        module = importlib.import_module(node.module)
        assert all(hasattr(module, alias.name) for alias in node.names)
    keywords = [node for node in ast.walk(tree) if isinstance(node, ast.keyword)]
    budgets = [kw.value.value for kw in keywords if kw.arg == "max_tool_calling_iterations"]
    assert budgets == [max(GENERATED_BUDGETS.values())]


def test_the_autoenv_block_runs_with_stock_openenv(openenv_python: Path, server_url: str, tmp_path: Path) -> None:
    (code,) = [code for code in _blocks("") if code.startswith(NEEDS_OPENENV)]
    assert DEFAULT_URL in code
    out = _run(openenv_python, code.replace(DEFAULT_URL, server_url), tmp_path)
    assert out.startswith("True ")


def test_the_dataset_command_writes_what_the_page_says(tmp_path: Path) -> None:
    (block,) = _blocks("bash")
    command, *expected = block.strip().splitlines()
    arguments = command.split()
    assert arguments[:3] == ["python", "-m", "service_incident.integrations.prompts"]
    done = subprocess.run([sys.executable, *arguments[1:]], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [line.removeprefix("# ") for line in expected]


def test_the_json_block_is_json() -> None:
    for code in _blocks("json"):
        assert json.loads(code)["mcpServers"]
