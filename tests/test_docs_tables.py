"""Every generated table in README.md and docs/ is current, and the one mechanism that writes them works."""

from __future__ import annotations

from pathlib import Path

import pytest

from service_incident.harness import docs, tables

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", docs.documents(ROOT), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_block_is_current(path: Path) -> None:
    text = path.read_text()
    assert docs.render_into(text) == text, "run `python -m service_incident.harness.docs`"


def test_every_table_is_shown_somewhere() -> None:
    shown = {name for path in docs.documents(ROOT) for name in docs.table_names(path.read_text())}
    assert shown == set(tables.TABLES)


def test_a_stale_block_is_rewritten_and_the_rest_kept() -> None:
    renderers = {"a": lambda: "| a |", "b": lambda: "| b |"}
    text = "intro\n<!-- table:a -->\nold\n<!-- /table -->\nbetween\n<!-- table:b -->\n<!-- /table -->\nend\n"
    fresh = docs.render_into(text, renderers)
    assert fresh == (
        "intro\n<!-- table:a -->\n| a |\n<!-- /table -->\nbetween\n<!-- table:b -->\n| b |\n<!-- /table -->\nend\n"
    )
    assert docs.render_into(fresh, renderers) == fresh


def test_the_command_rewrites_stale_files_and_check_reports_them(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    stale = tmp_path / "docs" / "stale.md"
    stale.write_text("<!-- table:weights -->\n| outdated |\n<!-- /table -->\n")
    (tmp_path / "README.md").write_text("nothing generated\n")
    assert docs.main(["--root", str(tmp_path), "--check"]) == 1
    assert "outdated" in stale.read_text()
    assert docs.main(["--root", str(tmp_path)]) == 0
    assert stale.read_text() == f"<!-- table:weights -->\n{tables.weight_table()}\n<!-- /table -->\n"
    assert docs.main(["--root", str(tmp_path), "--check"]) == 0


def test_an_unknown_table_is_named() -> None:
    with pytest.raises(docs.UnknownTable, match="'nope'"):
        docs.render_into("<!-- table:nope -->\n<!-- /table -->\n")
