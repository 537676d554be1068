"""The compiled kernels of the core: everything else about the package is in pyproject.toml.

Each kernel is a `.pyx` beside the Python it stands for, which draws and computes the same, operation
for operation: `telemetry/_spans.pyx` a trace sample's span draws (`traces.draw_in_python`),
`world/_minute.pyx` every service's state in a simulated minute (`simulation._minute_states`).
tests/test_core_spans.py and tests/test_core_minute.py hold each to its Python. The extensions are
optional: where no C compiler is at hand the package installs without them, and the Python computes
the same, only slower.
"""

from __future__ import annotations

import os
import subprocess

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import BaseError, CCompilerError

# No fused multiply-adds: every operation rounds as Python's float arithmetic rounds it. No debug
# symbols: they are not shipped, and double the compile time.
COMPILE_ARGS = ["-O2", "-g0", "-ffp-contract=off"]
KERNELS = [
    Extension(name, [name.replace(".", "/") + ".pyx"], optional=True, extra_compile_args=COMPILE_ARGS)
    for name in ("service_incident.telemetry._spans", "service_incident.world._minute")
]


class OptionalKernels(build_ext):
    """Builds each kernel where it can. setuptools lets an optional extension fail quietly only on its
    own errors: a compiler that is not there (OSError) or that fails (CalledProcessError) would stop
    the install, where the Python the kernel stands for computes the same."""

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except (OSError, subprocess.CalledProcessError, BaseError, CCompilerError) as error:
            self.warn(f"{ext.name} not compiled ({error}): the Python it stands for computes instead")


setup(
    # The generated C goes under build/, not beside the source.
    ext_modules=cythonize(KERNELS, build_dir="build/cython", quiet=True),
    cmdclass={"build_ext": OptionalKernels},
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
