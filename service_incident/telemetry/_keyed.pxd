# The keyed Mersenne Twister's C interface (_keyed.pyx), for the kernels that draw with it (_spans.pyx).
from libc.stdint cimport uint32_t

cdef enum:
    MT_N = 624


cdef class KeyedRandom:
    cdef uint32_t mt[MT_N]
    cdef int index
    cdef int seed(self, str key) except -1
    cdef uint32_t word(self) noexcept
    cdef double draw(self) noexcept
    cdef object bits(self, int k)
