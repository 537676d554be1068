"""The core's compiled kernels (setup.py) are used where they were built, and the Python they stand
for computes where they were not. That each computes what its Python computes: test_core_keyed.py,
test_core_spans.py, test_core_minute.py, test_core_noise.py and test_core_decimals.py."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys

import pytest

# Each kernel: its module, the module that uses it, the name it is used by there, and the Python it
# stands for.
KERNELS = [
    ("service_incident.telemetry._keyed", "service_incident.telemetry.templates", "keyed", "keyed_in_python"),
    ("service_incident.telemetry._spans", "service_incident.telemetry.traces", "draw", "draw_in_python"),
    ("service_incident.world._minute", "service_incident.world.simulation", "minute_states", "_minute_states"),
    ("service_incident.world._noise", "service_incident.world.draws", "mix", "mix_in_python"),
    ("service_incident.world._noise", "service_incident.world.draws", "unit", "unit_in_python"),
    ("service_incident.world._noise", "service_incident.world.draws", "Draws", "DrawsInPython"),
    ("service_incident.world._decimals", "service_incident.world.decimals", "round_to", "round_in_python"),
    ("service_incident.world._decimals", "service_incident.world.decimals", "significant", "significant_in_python"),
]


@pytest.mark.parametrize(("kernel", "user", "used", "python"), KERNELS)
def test_an_install_with_a_c_compiler_computes_with_the_compiled_kernel(
    kernel: str, user: str, used: str, python: str
) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler here: the package installs without its kernels")
    # setup.py's extensions are optional: a build that failed would leave the Python computing, slower.
    module = importlib.import_module(user)
    assert module.compiled_kernel() is not None, kernel
    assert getattr(module, used) is not getattr(module, python)


@pytest.mark.parametrize(("kernel", "user", "used", "python"), KERNELS)
def test_without_the_kernel_the_python_computes(kernel: str, user: str, used: str, python: str) -> None:
    code = (
        f"import sys; sys.modules[{kernel!r}] = None\n"
        f"import {user} as module\n"
        f"print(module.compiled_kernel() is None and module.{used} is module.{python})"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "True"


@pytest.mark.parametrize("built", [("mix",), ("mix", "unit")])
def test_a_noise_kernel_built_before_its_last_draw_leaves_the_python_drawing_all(built: tuple[str, ...]) -> None:
    # A build of the kernel from before it drew keys, or before it drew under a prefix: the package
    # imports, and the Python computes every draw.
    code = (
        "import sys, types\n"
        "stale = types.ModuleType('service_incident.world._noise')\n"
        f"for name in {built!r}: setattr(stale, name, lambda *args: [])\n"
        "sys.modules['service_incident.world._noise'] = stale\n"
        "import service_incident.world.draws as draws\n"
        "print(draws.compiled_kernel() is None, draws.unit is draws.unit_in_python, draws.mix is draws.mix_in_python,"
        " draws.Draws is draws.DrawsInPython)"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.split() == ["True", "True", "True", "True"]
