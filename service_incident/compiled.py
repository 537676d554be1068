"""Which of the package's modules run compiled: those whose source is the one the build compiled.

setup.py compiles the core's hot modules where a C compiler is at hand, each beside its source, and
Python's import system prefers a compiled module to its source. After an edit, a module compiled
before would run what its source said then; so a finder ahead of Python's own hands the import the
source instead wherever its hash is not the one the build recorded (`MANIFEST`), and warns that the
module runs slower until `make compile` builds it again. `SERVICE_INCIDENT_COMPILED=0` in the
environment runs every module's source: the same observations, which tests/test_core_compiled.py
checks against the compiled modules.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType

# The modules a reset and a step run (py-spy by file, and cProfile for those left interpreted:
# docs/measurement.md), which setup.py compiles.
PACKAGE = "service_incident"
MODULES = tuple(
    f"{PACKAGE}.{name}"
    for name in (
        "environment",
        "faults",
        "generator",
        "herrings",
        "incidents",
        "scoring.ledger",
        "scoring.postmortem",
        "scoring.remedies",
        "scoring.rewards",
        "scoring.score",
        "telemetry.clock",
        "telemetry.datastore",
        "telemetry.deploys",
        "telemetry.endpoints",
        "telemetry.escalation",
        "telemetry.health",
        "telemetry.jobs",
        "telemetry.logs",
        "telemetry.look",
        "telemetry.metrics",
        "telemetry.pages",
        "telemetry.phrases",
        "telemetry.pods",
        "telemetry.schemas",
        "telemetry.state",
        "telemetry.templates",
        "telemetry.traces",
        "topology",
        "world.course",
        "world.draws",
        "world.episode",
        "world.plan",
        "world.rubric",
        "world.simulation",
        "world.standout",
        "world.steps",
        "world.traffic",
    )
)
# Written by setup.py's build: each compiled module's name and the SHA-256 of the source it was built from.
MANIFEST = Path(__file__).with_name("compiled.json")
SWITCH = "SERVICE_INCIDENT_COMPILED"


def source_digest(source: Path) -> str:
    return hashlib.sha256(source.read_bytes()).hexdigest()


class SourceWhereStale(MetaPathFinder):
    """Finds the source of a package module compiled from another source (or when compiled modules are
    switched off); leaves every other import to the finders after it."""

    def __init__(self, built: dict[str, str], compiled: bool) -> None:
        self.built = built
        self.compiled = compiled

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not fullname.startswith(PACKAGE + ".") or path is None:
            return None
        name = fullname.rpartition(".")[2]
        for folder in map(Path, path):
            source = folder / f"{name}.py"
            if not source.is_file():
                continue
            if not any((folder / f"{name}{suffix}").is_file() for suffix in EXTENSION_SUFFIXES):
                return None
            if self.compiled and self.built.get(fullname) == source_digest(source):
                return None
            if self.compiled:
                warnings.warn(
                    f"{fullname} runs its source, which changed since it was compiled: `make compile` builds it again",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return spec_from_file_location(fullname, source)
        return None


def install() -> None:
    """Puts the finder ahead of Python's own, once per process."""
    if any(isinstance(finder, SourceWhereStale) for finder in sys.meta_path):
        return
    built = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else {}
    sys.meta_path.insert(0, SourceWhereStale(built, os.environ.get(SWITCH, "1") != "0"))
