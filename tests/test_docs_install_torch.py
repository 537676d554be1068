"""docs/install.md's way to the `trl` extra with PyTorch's CPU build: the torch it installs from the CPU
index is the one the extra declares, and the extra is then installed from PyPI."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def trl_extra() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["trl"]


def install_commands() -> list[str]:
    section = (ROOT / "docs" / "install.md").read_text().split("### TRL without a GPU", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block, "the section gives the commands in a bash block"
    return block.group(1).strip().splitlines()


def test_the_trl_extra_names_torch() -> None:
    assert [r for r in trl_extra() if re.match(r"torch\b", r)], "the heavy dependency is declared, not implied"


def test_the_cpu_route_installs_torch_from_the_cpu_index_then_the_extra() -> None:
    first, second = install_commands()
    assert first == f"pip install torch --index-url {CPU_INDEX}"
    assert second == "pip install '.[trl]'"
    text = (ROOT / "docs" / "install.md").read_text()
    assert f"--extra-index-url {CPU_INDEX} '.[trl]'" in text
