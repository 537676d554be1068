"""The packaging configuration covers the tree: every package folder listed, the manifest packaged."""

from __future__ import annotations

import importlib
import tomllib
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from service_incident import compiled

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = CONFIG["tool"]["setuptools"]


def installed_name(folder: Path) -> str:
    """The package a source folder installs as, by the package-dir mapping."""
    relative = folder.relative_to(ROOT).as_posix()
    for package, source in SETUPTOOLS["package-dir"].items():
        if relative == source or relative.startswith(source + "/"):
            return package + relative[len(source) :].replace("/", ".")
    return relative.replace("/", ".")


def package_folders() -> set[Path]:
    """Folders of Python modules or data files under the installed trees, caches aside."""
    roots = [ROOT / "service_incident", *(ROOT / source for source in SETUPTOOLS["package-dir"].values())]
    return {
        folder
        for root in roots
        for folder in [root, *root.rglob("*")]
        if folder.is_dir() and folder.name != "__pycache__" and any(p.is_file() for p in folder.iterdir())
    }


def test_every_package_folder_is_listed_so_setuptools_installs_it_without_a_warning() -> None:
    assert {installed_name(folder) for folder in package_folders()} == set(SETUPTOOLS["packages"])


def test_every_data_file_is_covered_by_package_data() -> None:
    for folder in package_folders():
        patterns = SETUPTOOLS["package-data"].get(installed_name(folder), [])
        for path in folder.iterdir():
            # A compiled module built in place, and the build's record of them, are setup.py's, not data.
            built = path.name.endswith(tuple(EXTENSION_SUFFIXES)) or path == compiled.MANIFEST
            if path.is_file() and path.suffix not in {".py", ".pyc"} and not built:
                assert any(path.match(pattern) for pattern in patterns), path


def test_the_packaged_manifest_is_the_repository_one() -> None:
    """OpenEnv's AutoEnv reads openenv.yaml from the installed package; `openenv validate` from the root."""
    packaged = ROOT / "service_incident" / "openenv.yaml"
    assert packaged.read_text() == (ROOT / "openenv.yaml").read_text(), (
        "run `cp openenv.yaml service_incident/openenv.yaml`"
    )


def test_every_console_script_names_a_callable() -> None:
    scripts = CONFIG["project"]["scripts"]
    assert scripts["server"] == "service_incident.server.app:main"  # the name OpenEnv's tooling looks for
    for target in scripts.values():
        module, _, attribute = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attribute)), target
