# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Rounding to decimals in C: `decimals.round_in_python`'s and `decimals.significant_in_python`'s floats.

Python rounds through decimal text, correctly: the decimal nearest the value (of equal ones, the even),
then the float nearest that decimal. Here the value is scaled by a power of ten (exact up to 10**22),
rounded to an integer, and scaled back by one correctly rounded division or product, which is the float
nearest that decimal. Scaling rounds too, but never across a half: below 2**52 every n + 1/2 is a
float, and rounding to nearest keeps order, so a scaled value off a half lies on the side of it its
exact value does, and has its nearest integer. A scaled value exactly on a half may be a tie or may
have been rounded onto it, and goes to Python, as does any value out of the range where this holds.
"""

from libc.math cimport fabs, floor, isfinite, log10, rint

# 10**k for k up to 22: each exact as a double.
cdef double POWERS[23]
cdef int _k
POWERS[0] = 1.0
for _k in range(1, 23):
    POWERS[_k] = POWERS[_k - 1] * 10.0
# Below this size every n + 1/2 is a float, so scaling cannot round a value across one.
cdef double HALVES_EXACT = 4503599627370496.0  # 2**52
cdef int SIGNIFICANT_DIGITS = 4


cdef inline bint _off_halfway(double scaled, double nearest) noexcept:
    """Whether a scaled value (below 2**52) lies off the half between two integers: its distance to the
    nearest is then exact, and not a half."""
    return fabs(scaled - nearest) != 0.5


def round_to(double value, int digits):
    """`round(value, digits)` for a float."""
    cdef double scale, scaled, nearest
    if 0 <= digits <= 22 and isfinite(value):
        scale = POWERS[digits]
        scaled = value * scale
        if fabs(scaled) < HALVES_EXACT:
            nearest = rint(scaled)
            if _off_halfway(scaled, nearest):
                return nearest / scale
    return round(value, digits)


def significant(double value):
    """`float(f"{value:.4g}")`: the value to four significant digits."""
    cdef int exponent, shift
    cdef double scaled, nearest
    if value > 0.0 and isfinite(value):
        exponent = <int>floor(log10(value))
        shift = SIGNIFICANT_DIGITS - 1 - exponent  # scaled by 10**shift, the value has four digits before the point
        scaled = _scaled(value, shift)
        # log10 may be a unit off about a power of ten: the scaled value then shows it.
        if scaled < 1000.0:
            shift += 1
            scaled = _scaled(value, shift)
        elif scaled >= 10000.0:
            shift -= 1
            scaled = _scaled(value, shift)
        if -22 <= shift <= 22 and 1000.0 <= scaled <= 10000.0:
            nearest = rint(scaled)
            if _off_halfway(scaled, nearest):
                return nearest / POWERS[shift] if shift >= 0 else nearest * POWERS[-shift]
    return float(f"{value:.4g}")


cdef inline double _scaled(double value, int shift) noexcept:
    """value * 10**shift, rounded once; 0 where 10**shift is not exact (the caller then asks Python)."""
    if 0 <= shift <= 22:
        return value * POWERS[shift]
    if -22 <= shift < 0:
        return value / POWERS[-shift]
    return 0.0
