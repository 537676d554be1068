"""Rounding to decimals as the views print values: `round(value, digits)`, and four significant digits
as a `.4g` format writes them, read back as a float.

Both are correctly rounded through decimal text in Python (a format and a parse), which a metric point
pays five times over; the compiled kernel (`_decimals.pyx`) gives the same floats with a multiply, a
rounding and a divide wherever that is exact, and asks Python where it might not be.
tests/test_core_decimals.py holds the two to the same floats.
"""

from __future__ import annotations

from collections.abc import Callable

# Rounds a float to decimal places, as `round(value, digits)` does.
RoundTo = Callable[[float, int], float]
# Rounds a float to four significant digits.
Significant = Callable[[float], float]


def round_in_python(value: float, digits: int) -> float:
    """`round(value, digits)`, a float whatever the value (as the kernel, which takes a float)."""
    return round(float(value), digits)


def significant_in_python(value: float) -> float:
    """A ratio as dashboards print it: four significant digits."""
    return float(f"{value:.4g}")


def compiled_kernel() -> tuple[RoundTo, Significant] | None:
    """The same roundings compiled (setup.py), if this install has them."""
    try:
        from . import _decimals
    except ImportError:  # an install without a C compiler: Python's own rounding
        return None
    return _decimals.round_to, _decimals.significant


round_to, significant = compiled_kernel() or (round_in_python, significant_in_python)
