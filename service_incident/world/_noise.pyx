# cython: language_level=3, boundscheck=False, wraparound=False
"""The per-minute noise hash in C: `draws.mix_in_python`'s, value for value.

`draws.py` holds the reference in Python, which hashes every value at once on the 64-bit lanes of one
integer (`mix_lanes`), and uses this one where it was compiled (setup.py); tests/test_core_noise.py
holds the two to the same values. Each step of the hash is an operation on 32 bits that wraps as the
Python's masks do, and the last, a division by a power of two, is exact in either.
"""

from cpython.long cimport PyLong_AsUnsignedLongLongMask
from libc.stdint cimport uint32_t

# The hash's multipliers as unsigned 32-bit words: each product wraps modulo 2**32, as the Python's mask does.
cdef uint32_t FIRST = 0x2C1B3C6D
cdef uint32_t SECOND = 0x297A2D39


def mix(values, add):
    """The hash, in [-1, 1), of each of `values` plus `add`, each held modulo 2**32."""
    cdef uint32_t offset = <uint32_t>PyLong_AsUnsignedLongLongMask(add)
    cdef uint32_t x
    cdef list found = []
    for value in values:
        x = <uint32_t>PyLong_AsUnsignedLongLongMask(value) + offset
        x ^= x >> 15
        x *= FIRST
        x ^= x >> 12
        x *= SECOND
        x ^= x >> 15
        found.append(x / 2147483648.0 - 1.0)
    return found
