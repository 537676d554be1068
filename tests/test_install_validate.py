"""`openenv validate` passes on the working tree itself, venvs, caches and results included."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_openenv_validate_passes_on_the_tree(openenv_python: Path) -> None:
    """Run during `make test`, so the tree holds everything a test run leaves (the venvs live in .venv/,
    which `openenv validate` skips, since their symlinks would make it refuse the tree)."""
    result = subprocess.run(
        [openenv_python.parent / "openenv", "validate", str(ROOT), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    statuses = {r["check_id"]: r["status"] for r in json.loads(result.stdout)["results"]}
    assert statuses["static.manifest"] == "pass"
    assert "fail" not in statuses.values() and "error" not in statuses.values()
