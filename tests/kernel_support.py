"""Helpers for the kernels' tests: a module's compiled kernel, or the test skipped where the install has none."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest


def compiled_or_skip(module: ModuleType) -> Any:
    """What `module.compiled_kernel()` gives; the test is skipped where this install compiled no kernels
    (the Python computes then: tests/test_core_kernels.py)."""
    found = module.compiled_kernel()
    if found is None:
        pytest.skip(f"no compiled kernels in this install: {module.__name__} computes in Python")
    return found
