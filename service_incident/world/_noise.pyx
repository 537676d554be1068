# cython: language_level=3, boundscheck=False, wraparound=False
"""The draws' two hashes in C: the per-minute noise hash, `draws.mix_in_python`'s value for value, and
a keyed draw's CRC-32, `draws.unit_in_python`'s (and `draws.DrawsInPython`'s, a prefix hashed once).

`draws.py` holds the references in Python and uses these where they were compiled (setup.py);
tests/test_core_noise.py holds each pair to the same values. Each step of the noise hash is an
operation on 32 bits that wraps as the Python's masks do, and the last, a division by a power of two,
is exact in either. A keyed draw hashes the bytes Python's join and encode would make of its key,
without making them: a view draws dozens, most of them for the first time.
"""

from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLongMask
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport uint32_t
from libc.stdio cimport snprintf

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


# CRC-32 as zlib computes it (the reflected IEEE polynomial), a byte at a time from a table.
cdef uint32_t CRC_TABLE[256]
cdef uint32_t _entry, _bit
for _entry in range(256):
    _bit = _entry
    for _ in range(8):
        _bit = (_bit >> 1) ^ 0xEDB88320 if _bit & 1 else _bit >> 1
    CRC_TABLE[_entry] = _bit


cdef inline uint32_t _crc(uint32_t crc, const unsigned char* data, Py_ssize_t size) noexcept:
    cdef Py_ssize_t index
    for index in range(size):
        crc = CRC_TABLE[(crc ^ data[index]) & 0xFF] ^ (crc >> 8)
    return crc


cdef inline uint32_t _hash_parts(uint32_t crc, tuple parts, bint colon_after_last) except? 0:
    """`crc` run on over the parts as text, joined by colons (and one after the last, if asked).

    A str part is its UTF-8 bytes and an int one its decimal digits, written here; any other part is
    what `str` makes of it, encoded as Python encodes it."""
    cdef const char* text
    cdef Py_ssize_t size
    cdef char digits[24]
    cdef long long number
    cdef int overflow
    cdef bint first = True, written
    cdef bytes spelled
    for part in parts:
        if not first:
            crc = _crc(crc, <const unsigned char*>b":", 1)
        first = False
        written = False  # whether the part's text is written here; else `str` spells it
        if type(part) is str:
            text = PyUnicode_AsUTF8AndSize(part, &size)
            written = True
        elif type(part) is int:
            number = PyLong_AsLongLongAndOverflow(part, &overflow)
            if not overflow:
                size = snprintf(digits, sizeof(digits), "%lld", number)
                text = digits
                written = True
        if not written:
            spelled = str(part).encode()
            text = spelled
            size = len(spelled)
        crc = _crc(crc, <const unsigned char*>text, size)
    if colon_after_last and not first:
        crc = _crc(crc, <const unsigned char*>b":", 1)
    return crc


def unit(*key):
    """A keyed draw in [0, 1): the CRC-32 of the key's parts as text, joined by colons, over 2**32."""
    return (_hash_parts(0xFFFFFFFF, key, False) ^ 0xFFFFFFFF) / 4294967296.0


cdef class Draws:
    """`draws.DrawsInPython` in C: `unit(*prefix, label)` and `spread(low, high, *prefix, label)`, the
    prefix hashed once and each label's CRC-32 run on from it, without a Python call's layers: a
    candidate world's plan draws some two hundred, and every pod of a view a few."""

    # The CRC-32 register after the prefix and the colon that follows it (before the final inversion).
    cdef uint32_t start

    def __init__(self, *prefix):
        self.start = _hash_parts(0xFFFFFFFF, prefix, True)

    cpdef double unit(self, label) except? -1.0:
        # Any str, a subclass's as its value: as the Python's `label.encode()` spells it.
        cdef Py_ssize_t size
        cdef const char* text = PyUnicode_AsUTF8AndSize(label, &size)
        return (_crc(self.start, <const unsigned char*>text, size) ^ 0xFFFFFFFF) / 4294967296.0

    cpdef double spread(self, double low, double high, label) except? -1.0:
        # As Python computes `low + (high - low) * unit`: the bounds are floats, or ints a double holds exactly.
        return low + (high - low) * self.unit(label)
