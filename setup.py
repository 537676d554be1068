"""The compiled kernel of the core: everything else about the package is in pyproject.toml.

`service_incident/telemetry/_spans.pyx` draws a trace sample's spans in C, draw for draw as the Python
loop in `traces.py` does (tests/test_core_spans.py holds the two to the same requests). The extension
is optional: where no C compiler is at hand the package installs without it, and the Python loop
draws the same spans, only slower.
"""

from __future__ import annotations

import os

from Cython.Build import cythonize
from setuptools import Extension, setup

KERNELS = [
    # No fused multiply-adds: every operation rounds as Python's float arithmetic rounds it. No debug
    # symbols: they are not shipped, and double the compile time.
    Extension(
        "service_incident.telemetry._spans",
        ["service_incident/telemetry/_spans.pyx"],
        optional=True,
        extra_compile_args=["-O2", "-g0", "-ffp-contract=off"],
    ),
]

setup(
    # The generated C goes under build/, not beside the source.
    ext_modules=cythonize(KERNELS, build_dir="build/cython", quiet=True),
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
