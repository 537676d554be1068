"""The compiled kernels of the core: everything else about the package is in pyproject.toml.

Each kernel is a `.pyx` beside the Python it stands for, which draws and computes the same:
`telemetry/_keyed.pyx` a keyed rng (`random.Random(key)`, which `templates.rng_for` makes where it was
not built), `telemetry/_spans.pyx` a trace sample's span draws (`traces.draw_in_python`) and
`world/_minute.pyx` every service's state in a simulated minute (`simulation._minute_states`),
operation for operation; `world/_noise.pyx` the per-minute noise hash (`draws.mix_in_python`) and a
keyed draw's CRC-32, whole (`draws.unit_in_python`) or run on from a prefix's (`draws.DrawsInPython`),
value for value; `world/_decimals.pyx` rounding to decimals (`decimals.round_in_python`,
`decimals.significant_in_python`), float for float. tests/test_core_keyed.py, tests/test_core_spans.py,
tests/test_core_minute.py, tests/test_core_noise.py and tests/test_core_decimals.py hold each to its
Python. The extensions are optional: where no C compiler is at hand the package installs without them,
and the Python computes the same, only slower.

The core's hot modules (`compiled.MODULES`) are compiled too, as they stand: the same Python, run by C rather
than by the interpreter. The build records the hash of each source it compiled
(`service_incident/compiled.json`), and `service_incident.compiled` runs a module's source instead
wherever it changed since: an edit takes effect before `make compile` builds it again.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import BaseError, CCompilerError

ROOT = Path(__file__).resolve().parent
# The package's own account of its compiled modules, read without importing the package.
_spec = importlib.util.spec_from_file_location("compiled", ROOT / "service_incident" / "compiled.py")
assert _spec is not None and _spec.loader is not None
COMPILED = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(COMPILED)
# No fused multiply-adds: every operation rounds as Python's float arithmetic rounds it. No debug
# symbols: they are not shipped, and double the compile time. GCC's array-bounds warnings on Cython's
# reads of Python's None (a false positive of its inlining) are not the project's to fix.
COMPILE_ARGS = ["-O2", "-g0", "-ffp-contract=off", "-Wno-array-bounds"]


def source_of(module: str, suffix: str) -> str:
    """A module's source file, relative to the root: `service_incident.world._minute` with ".pyx" is
    service_incident/world/_minute.pyx. (cythonize swaps an extension's sources for the C it writes.)"""
    return module.replace(".", "/") + suffix


def optional_extension(module: str, suffix: str) -> Extension:
    return Extension(module, [source_of(module, suffix)], optional=True, extra_compile_args=COMPILE_ARGS)


KERNELS = [
    optional_extension(name, ".pyx")
    for name in (
        "service_incident.telemetry._keyed",
        "service_incident.telemetry._spans",
        "service_incident.world._minute",
        "service_incident.world._noise",
        "service_incident.world._decimals",
    )
]
MODULES = [optional_extension(name, ".py") for name in COMPILED.MODULES]
# Python's semantics where Cython's defaults differ: an integer power of integers stays an integer,
# functions are Python functions (introspected, bound as methods), and annotations check nothing at a
# call (a reset's seed of the wrong type meets the core's own typed error, not a TypeError).
MODULE_DIRECTIVES = {"language_level": 3, "binding": True, "cpow": True, "annotation_typing": False}


class OptionalKernels(build_ext):
    """Builds each extension where it can. setuptools lets an optional extension fail quietly only on
    its own errors: a compiler that is not there (OSError) or that fails (CalledProcessError) would stop
    the install, where the Python the extension stands for computes the same."""

    def run(self) -> None:
        self.failed: set[str] = set()
        super().run()
        self.write_manifest()

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except (OSError, subprocess.CalledProcessError, BaseError, CCompilerError) as error:
            self.failed.add(ext.name)
            self.warn(f"{ext.name} not compiled ({error}): the Python it stands for computes instead")

    def write_manifest(self) -> None:
        """Beside the package's modules, the hash of each module's source that was compiled: what
        `service_incident.compiled` holds a source to before it lets the compiled module stand for it.
        One that failed to build is left out, even where an earlier build's is still there."""
        package = Path(self.get_ext_fullpath("service_incident.compiled")).parent
        built = {
            ext.name: COMPILED.source_digest(ROOT / source_of(ext.name, ".py"))
            for ext in self.extensions
            if ext.name in COMPILED.MODULES
            and ext.name not in self.failed
            and Path(self.get_ext_fullpath(ext.name)).exists()
        }
        package.mkdir(parents=True, exist_ok=True)
        (package / COMPILED.MANIFEST.name).write_text(json.dumps(built, indent=1, sort_keys=True) + "\n")


setup(
    # The generated C goes under build/, not beside the source.
    ext_modules=[
        *cythonize(KERNELS, build_dir="build/cython", quiet=True),
        *cythonize(MODULES, build_dir="build/cython", quiet=True, compiler_directives=MODULE_DIRECTIVES),
    ],
    cmdclass={"build_ext": OptionalKernels},
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
