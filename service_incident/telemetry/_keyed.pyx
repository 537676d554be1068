# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
"""`random.Random(key)` for a text key, in C: the same Mersenne Twister, seeded and drawn as CPython
seeds and draws it, for the views that seed an rng per look (`templates.rng_for`) and the trace
sample's span draws (`_spans.pyx`, which draws with it from C).

The key's bytes and their SHA-512, read as one big-endian integer, seed the state as CPython's
`init_by_array` does, from the state `init_genrand(19650218)` leaves, which is the same for every key
and worked out once here; words and floats follow CPython's `genrand_uint32`, `random` and
`getrandbits`, and `uniform` is random.py's. Seeding here costs a view a little over half what a
`Random` costs (whose `__init__` and `seed` run as Python, and which starts every seed from scratch).
tests/test_core_keyed.py holds it to `random.Random` on keys of many lengths and makes.
"""

from hashlib import sha512

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport uint32_t
from libc.string cimport memcpy

cdef enum:
    M = 397

cdef uint32_t MATRIX_A = 0x9908b0df
cdef uint32_t UPPER_MASK = 0x80000000
cdef uint32_t LOWER_MASK = 0x7fffffff
# The tempering masks, typed: as bare literals past a C int, Cython would take them as Python ints.
cdef uint32_t TEMPER_B = 0x9d2c5680
cdef uint32_t TEMPER_C = 0xefc60000
# Where CPython's `init_by_array` starts from, whatever the key (`init_genrand(19650218)`): worked out once.
cdef uint32_t _START[MT_N]


cdef void _init_genrand(uint32_t *mt, uint32_t seed) noexcept:
    cdef Py_ssize_t i
    mt[0] = seed
    for i in range(1, MT_N):
        mt[i] = 1812433253 * (mt[i - 1] ^ (mt[i - 1] >> 30)) + <uint32_t>i


_init_genrand(_START, 19650218)


cdef class KeyedRandom:
    """`random.Random(key)`: `random()`, `getrandbits(k)` and `uniform(a, b)` draw what its would."""

    def __init__(self, str key):
        self.seed(key)

    def random(self):
        return self.draw()

    def getrandbits(self, int k):
        if k < 0:
            raise ValueError("number of bits must be non-negative")
        return self.bits(k)

    def uniform(self, double a, double b):
        return a + (b - a) * self.draw()

    cdef int seed(self, str key) except -1:
        """The key's bytes and their SHA-512 read as one big-endian integer, whose 32-bit words, least
        significant first, seed the state as CPython's `init_by_array` does."""
        cdef bytes text = key.encode()
        cdef bytes whole = (text + sha512(text).digest()).lstrip(b"\0")
        cdef const unsigned char *data = whole
        cdef Py_ssize_t length = len(whole)
        cdef Py_ssize_t used = max((length + 3) // 4, 1)
        cdef Py_ssize_t i, j, k
        # The key's words, read once: the loop below takes each of them about 624 / used times.
        cdef uint32_t *words = <uint32_t *>PyMem_Malloc(used * sizeof(uint32_t))
        if words == NULL:
            raise MemoryError()
        for j in range(used):
            words[j] = _key_word(data, length, j)
        memcpy(self.mt, _START, sizeof(_START))
        i, j = 1, 0
        for k in range(max(MT_N, used), 0, -1):
            self.mt[i] = (self.mt[i] ^ ((self.mt[i - 1] ^ (self.mt[i - 1] >> 30)) * 1664525)) + words[j] + <uint32_t>j
            i += 1
            j += 1
            if i >= MT_N:
                self.mt[0] = self.mt[MT_N - 1]
                i = 1
            if j >= used:
                j = 0
        PyMem_Free(words)
        for k in range(MT_N - 1, 0, -1):
            self.mt[i] = (self.mt[i] ^ ((self.mt[i - 1] ^ (self.mt[i - 1] >> 30)) * 1566083941)) - <uint32_t>i
            i += 1
            if i >= MT_N:
                self.mt[0] = self.mt[MT_N - 1]
                i = 1
        self.mt[0] = UPPER_MASK  # CPython's: a state never all zero
        self.index = MT_N
        return 0

    cdef uint32_t word(self) noexcept:
        cdef uint32_t y
        cdef int kk
        if self.index >= MT_N:
            for kk in range(MT_N - M):
                y = (self.mt[kk] & UPPER_MASK) | (self.mt[kk + 1] & LOWER_MASK)
                self.mt[kk] = self.mt[kk + M] ^ (y >> 1) ^ (MATRIX_A if y & 1 else 0)
            for kk in range(MT_N - M, MT_N - 1):
                y = (self.mt[kk] & UPPER_MASK) | (self.mt[kk + 1] & LOWER_MASK)
                self.mt[kk] = self.mt[kk + M - MT_N] ^ (y >> 1) ^ (MATRIX_A if y & 1 else 0)
            y = (self.mt[MT_N - 1] & UPPER_MASK) | (self.mt[0] & LOWER_MASK)
            self.mt[MT_N - 1] = self.mt[M - 1] ^ (y >> 1) ^ (MATRIX_A if y & 1 else 0)
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= y >> 11
        y ^= (y << 7) & TEMPER_B
        y ^= (y << 15) & TEMPER_C
        y ^= y >> 18
        return y

    cdef double draw(self) noexcept:
        """`random()`."""
        cdef uint32_t a = self.word() >> 5
        cdef uint32_t b = self.word() >> 6
        return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)

    cdef object bits(self, int k):
        """`getrandbits(k)`: 32-bit words from the least significant up, the last cut to what is left."""
        cdef uint32_t r
        cdef int shift = 0
        if k <= 32:
            return self.word() >> (32 - k) if k else 0
        value = 0
        while k > 0:
            r = self.word()
            if k < 32:
                r >>= 32 - k
            value |= (<object>r) << shift
            shift += 32
            k -= 32
        return value


cdef inline uint32_t _key_word(const unsigned char *data, Py_ssize_t length, Py_ssize_t j) noexcept:
    """Word `j` of a big-endian integer's bytes, counted from the least significant: 0 past its top."""
    cdef Py_ssize_t end = length - 4 * j
    cdef Py_ssize_t k
    cdef uint32_t value = 0
    for k in range(max(end - 4, 0), end):
        value = (value << 8) | data[k]
    return value
