"""The compiled rounding (`world/_decimals.pyx`) gives the floats the Python it stands for gives
(`decimals.round_in_python`, `decimals.significant_in_python`), bit for bit: on values of every size
and sign, on decimal ties and the floats either side of them, where the kernel must ask Python, and on
what is no number."""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Iterator

import pytest
from kernel_support import compiled_or_skip

from service_incident.world import decimals

# The places the views round to, and the edges of the range where 10**digits is exact.
DIGITS = (0, 1, 2, 3, 4, 22, 23)


@pytest.fixture
def kernel() -> tuple[decimals.RoundTo, decimals.Significant]:
    return compiled_or_skip(decimals)


def bits(value: float) -> bytes:
    """A float's bytes: -0.0 and 0.0 differ, and a NaN equals a NaN."""
    return struct.pack("<d", value)


def neighbours(value: float) -> Iterator[float]:
    yield from (math.nextafter(value, -math.inf), value, math.nextafter(value, math.inf))


def spread_values(seed: int, count: int) -> Iterator[float]:
    """Values from 1e-12 to 1e8 of either sign, and the ratios and percentages views round."""
    rng = random.Random(seed)
    for _ in range(count):
        yield rng.choice((1.0, -1.0)) * 10.0 ** rng.uniform(-12.0, 8.0)
        yield rng.random()
        yield rng.uniform(0.0, 100.0)


def ties() -> Iterator[float]:
    """Decimal halves at none to three places and at four significant digits, and their neighbours:
    where scaling may round a value onto a half, and the kernel hands it to Python."""
    for n in range(10_000):
        for places in range(4):
            yield from neighbours((n + 0.5) / 10.0**places)
        yield from neighbours((1000 + n % 9000 + 0.5) * 10.0 ** -(n % 14))


SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1e-320, 1e300, 2.0**51 + 0.5, 2.0**52 - 0.5, 2.0**53]
SPECIAL += [9999.5, 0.99995, 0.099995, 1e22, 1e23, -0.3, -0.04, -0.05, 0.05, 0.15, 0.25, 2.675, 1.0005, 100.0]
# How many values each set holds.
COUNTS = {"spread": 90_000, "ties": 150_000, "special": len(SPECIAL)}


@pytest.mark.parametrize("values", ["spread", "ties", "special"])
def test_the_kernel_rounds_as_python_does(kernel: tuple[decimals.RoundTo, decimals.Significant], values: str) -> None:
    round_to, significant = kernel
    found = {"spread": lambda: spread_values(7, 30_000), "ties": ties, "special": lambda: iter(SPECIAL)}[values]()
    checked = 0
    for value in found:
        for digits in DIGITS:
            assert bits(round_to(value, digits)) == bits(decimals.round_in_python(value, digits)), (value, digits)
        assert bits(significant(value)) == bits(decimals.significant_in_python(value)), value
        checked += 1
    assert checked == COUNTS[values]


def test_both_give_a_float_for_an_integer(kernel: tuple[decimals.RoundTo, decimals.Significant]) -> None:
    """A count rounded prints as a float either way: "12.0", never "12" from one and "12.0" from the other."""
    round_to, _ = kernel
    assert repr(round_to(12, 1)) == repr(decimals.round_in_python(12, 1)) == "12.0"
