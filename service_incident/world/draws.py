"""Keyed draws: deterministic numbers from a key, so the same incident draws the same world on every run.

`unit` and `spread` draw once from a key (CRC-32 of its parts); `Draws` hashes a shared prefix once
for the many draws of one service; `mix` gives per-minute noise in [-1, 1) from an integer hash.
All three are compiled (`_noise.pyx`), or in Python: a keyed draw cached, the noise on many lanes of
one integer at once (`mix_lanes`).
"""

from __future__ import annotations

import sys
import zlib
from array import array
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Protocol


# Kept: views draw the same keys on every look (pods, versions, phrasings). Typed, so that 1 and 1.0,
# which print differently, are different keys.
@lru_cache(maxsize=1 << 15, typed=True)
def unit_in_python(*key: object) -> float:
    """A deterministic draw in [0, 1) from a key: the CRC-32 of its parts as text, joined by colons.
    What the compiled kernel (`_noise.pyx`) stands for, which draws any key for what this cache takes
    to find one it holds: a quarter of what one it does not hold costs."""
    return zlib.crc32(":".join(map(str, key)).encode()) / 4294967296.0


def spread(low: float, high: float, *key: object) -> float:
    return low + (high - low) * unit(*key)


class PrefixedDraws(Protocol):
    """Keyed draws that share the first parts of their keys (`Draws`)."""

    def unit(self, label: str) -> float: ...

    def spread(self, low: float, high: float, label: str) -> float: ...


class DrawsInPython:
    """`unit(*prefix, label)` and `spread(low, high, *prefix, label)` with the prefix hashed once:
    CRC-32 runs on from the prefix's. A plan makes some two hundred draws per incident. What the
    compiled kernel's `Draws` stands for."""

    __slots__ = ("_start",)

    def __init__(self, *prefix: object) -> None:
        self._start = zlib.crc32(":".join(map(str, (*prefix, ""))).encode())

    def unit(self, label: str) -> float:
        return zlib.crc32(label.encode(), self._start) / 4294967296.0

    def spread(self, low: float, high: float, label: str) -> float:
        return low + (high - low) * self.unit(label)


WOBBLE_KEY, _WOBBLE_STEP, WOBBLE_CHANNEL = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D


def wobble_minute(step: int) -> int:
    return (step + 1000) * _WOBBLE_STEP


_MASK32 = 0xFFFFFFFF


def mix_lanes(packed: int, count: int, add: int) -> list[float]:
    """The hash, in [-1, 1), of each of `count` values plus `add`, the values held modulo 2**32 in 64-bit
    lanes of one integer (`pack`). Each step of the hash is then one operation on every lane at once: a
    lane times a 30-bit constant stays within its 64 bits, and each shift is masked back into its lane.
    A plan's services' noise costs about a fifth of hashing the values one by one."""
    mask, ones = _lanes(count)
    x = (packed + (add & _MASK32) * ones) & mask
    x ^= (x >> 15) & mask
    x = (x * 0x2C1B3C6D) & mask
    x ^= (x >> 12) & mask
    x = (x * 0x297A2D39) & mask
    x ^= (x >> 15) & mask
    return [lane / 2147483648.0 - 1.0 for lane in array("Q", x.to_bytes(8 * count, sys.byteorder))]


@lru_cache(maxsize=256)
def _lanes(count: int) -> tuple[int, int]:
    """The mask of `count` 32-bit values in 64-bit lanes, and the integer with a 1 in each lane."""
    ones = sum(1 << (64 * lane) for lane in range(count))
    return ones * _MASK32, ones


def pack(values: Sequence[int]) -> int:
    """The values' low 32 bits, one to a 64-bit lane, lane 0 lowest: laid out as native 64-bit words
    and read as one integer, where summing shifted integers would cost time quadratic in the lanes."""
    return int.from_bytes(array("Q", [value & _MASK32 for value in values]).tobytes(), sys.byteorder)


# The noise hash: each value plus an offset, held modulo 2**32, hashed to a float in [-1, 1).
MixNoise = Callable[[Sequence[int], int], list[float]]
# A keyed draw: a key's parts to a float in [0, 1).
KeyedDraw = Callable[..., float]
# Keyed draws sharing a prefix: the prefix's parts to what draws the rest of each key.
MakeDraws = Callable[..., PrefixedDraws]


def mix_in_python(values: Sequence[int], add: int) -> list[float]:
    """The hash, in [-1, 1), of each value plus `add`, each held modulo 2**32: every value at once on the
    lanes of one integer. What the compiled kernel (`_noise.pyx`) stands for."""
    return mix_lanes(pack(values), len(values), add)


def compiled_kernel() -> tuple[MixNoise, KeyedDraw, MakeDraws] | None:
    """The same hashes compiled (setup.py), in C, if this install has them: the noise value by value,
    a keyed draw on the key's parts as they stand, and draws sharing a prefix."""
    try:
        from ._noise import Draws as CompiledDraws
        from ._noise import mix as compiled_mix
        from ._noise import unit as compiled_unit
    except ImportError:  # no C compiler, or a build from before the last of them: the Python hashes all
        return None
    return compiled_mix, compiled_unit, CompiledDraws


mix, unit, Draws = compiled_kernel() or (mix_in_python, unit_in_python, DrawsInPython)
