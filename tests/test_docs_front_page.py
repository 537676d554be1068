"""The front page's hand-written tables agree with the code: the layout, the settings, the commands."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from service_incident.harness import report
from service_incident.harness.agents import REFERENCE_AGENTS
from service_incident.harness.records import EpisodeRecord
from service_incident.server.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
INSTALL = (ROOT / "docs" / "install.md").read_text()
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
FRONT_PAGE_LINES = 250


def rows(text: str, header: str) -> list[list[str]]:
    """The cells of the table whose header row is `header`."""
    lines = text.split(header + "\n", 1)[1].splitlines()[1:]  # past the |---| row
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[: lines.index("")]]


def test_the_front_page_is_short_and_starts_with_the_quickstart() -> None:
    assert len(README.splitlines()) <= FRONT_PAGE_LINES
    body = README.split("\n---\n", 1)[1]  # past the Space's front matter
    first_section = body.split("\n## ", 2)[1]
    assert first_section.startswith("Quickstart\n")
    commands = first_section.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split("#")[0].strip() for line in commands] == ["make run", "make test"]


def test_the_ci_script_runs_the_quickstarts_test_command_and_the_install_paths() -> None:
    assert "\nmake test\nmake test-install\n" in (ROOT / ".ci" / "run").read_text()


def test_every_path_in_the_layout_table_exists() -> None:
    for path_cell, what in rows(README, "| path | what |"):
        for path in re.findall(r"`([^`]+)`", path_cell):
            assert (ROOT / path).exists(), path
        if path_cell == "`service_incident/`":  # the core's modules and packages, each named
            named = set(re.findall(r"`(\w+)`", what))
            core = ROOT / "service_incident"
            modules = {p.stem for p in core.glob("*.py")} | {p.parent.name for p in core.glob("*/__init__.py")}
            # The harness and the integrations run on the core: they have rows of their own.
            assert named == modules - {"__init__", "harness", "integrations"}


def format_default(value: object) -> str:
    if value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def test_the_settings_table_lists_every_setting_with_its_default() -> None:
    table = {name.strip("`"): default for name, default, _ in rows(README, "| variable | default | what |")}
    defaults = Settings()
    assert list(table) == [name.upper() for name in Settings.__struct_fields__]
    for name in Settings.__struct_fields__:
        assert table[name.upper()] == format_default(getattr(defaults, name)), name


@pytest.mark.parametrize("command", [row[0] for row in rows(INSTALL, "| command | what |")])
def test_every_command_in_the_install_guide_exists(command: str) -> None:
    name = command.strip("`").split()[0]
    assert name in SCRIPTS or command in {"`python -m service_incident.server`", "`uvicorn server.app:app`"}


@pytest.mark.parametrize("row", rows(INSTALL, "| target | what |"), ids=lambda row: row[0])
def test_every_make_target_in_the_install_guide_exists(row: list[str]) -> None:
    target = row[0].strip("`").removeprefix("make ")
    dry_run = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=False)
    assert dry_run.returncode == 0, dry_run.stderr


def test_the_ladders_gap_figures_are_current(reference_ladder: dict[str, list[EpisodeRecord]]) -> None:
    """The agents' rows themselves are checked on the same ladder by the inference tests."""
    summaries = {name: report.summarize(records) for name, records in reference_ladder.items()}
    figures = ", ".join(f"{gap.gap:.3f} vs {gap.margin:.3f}" for gap in report.gaps(summaries))
    assert f"the two half-widths added ({figures})" in README, (
        "README's ladder is stale: copy it from results/report.md of `python inference.py --agent "
        + ",".join(REFERENCE_AGENTS)
        + "`"
    )
