# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
"""The span draws of a trace sample in C: `traces.draw_in_python`'s loop, draw for draw.

`traces.py` holds the reference loop in Python and uses this one where it was compiled (setup.py);
tests/test_core_spans.py holds the two to the same requests. The sample's rng is its own, so its
Mersenne Twister runs here, seeded from the sample's key as `random.Random(key)` seeds one (`seed`),
with CPython's own word and float recipes (`genrand_uint32`, `random`, `getrandbits`), and every float
operation is Python's, in its order. (Seeding here spares a view a `Random` and the 625 integers of its
`getstate`, which cost more than the draws of a small service's sample.)
"""

from hashlib import sha512

from libc.math cimport cos, exp, log, sin, sqrt
from libc.stdint cimport uint32_t
from libc.string cimport memcpy

cdef enum:
    N = 624
    M = 397

cdef uint32_t MATRIX_A = 0x9908b0df
cdef uint32_t UPPER_MASK = 0x80000000
cdef uint32_t LOWER_MASK = 0x7fffffff
# The tempering masks, typed: as bare literals past a C int, Cython would take them as Python ints.
cdef uint32_t TEMPER_B = 0x9d2c5680
cdef uint32_t TEMPER_C = 0xefc60000
cdef double TWO_PI = 2.0 * 3.141592653589793  # math.pi, as random.gauss has it
# Where CPython's `init_by_array` starts from, whatever the key (`init_genrand(19650218)`): worked out once.
cdef uint32_t _START[N]


cdef void _init_genrand(uint32_t *mt, uint32_t seed) noexcept:
    cdef Py_ssize_t i
    mt[0] = seed
    for i in range(1, N):
        mt[i] = 1812433253 * (mt[i - 1] ^ (mt[i - 1] >> 30)) + <uint32_t>i


_init_genrand(_START, 19650218)


cdef class _Call:
    """An `Edge` as the draws read it."""

    cdef str dep
    cdef double share, weight, deadline_ms


cdef class _Source:
    """A service's `_SpanSource`, read once per sample."""

    cdef tuple calls, operations, routes, own_errors, bits
    cdef Py_ssize_t count
    cdef double p50_ms, sigma, minor_error, call_error
    cdef object failure, minor_failure, minor_job, partner_op, partner_failure


cdef class _Sampler:
    cdef uint32_t mt[N]
    cdef int index
    cdef dict sources
    cdef object source_of
    cdef double spare
    cdef bint has_spare
    cdef int max_depth
    cdef double partner_share
    cdef object pending
    # The status and route of the span `span` drew last, beside the duration it returns.
    cdef object status, route

    cdef void seed(self, str key):
        """`random.Random(key)`: the key's bytes and their SHA-512 read as one big-endian integer, whose
        32-bit words, least significant first, seed the state as CPython's `init_by_array` does."""
        cdef bytes text = key.encode()
        cdef bytes whole = (text + sha512(text).digest()).lstrip(b"\0")
        cdef const unsigned char *data = whole
        cdef Py_ssize_t length = len(whole)
        cdef Py_ssize_t used = max((length + 3) // 4, 1)
        cdef Py_ssize_t i, j, k
        memcpy(self.mt, _START, sizeof(_START))
        i, j = 1, 0
        for k in range(max(N, used), 0, -1):
            self.mt[i] = (
                (self.mt[i] ^ ((self.mt[i - 1] ^ (self.mt[i - 1] >> 30)) * 1664525))
                + _key_word(data, length, j)
                + <uint32_t>j
            )
            i += 1
            j += 1
            if i >= N:
                self.mt[0] = self.mt[N - 1]
                i = 1
            if j >= used:
                j = 0
        for k in range(N - 1, 0, -1):
            self.mt[i] = (self.mt[i] ^ ((self.mt[i - 1] ^ (self.mt[i - 1] >> 30)) * 1566083941)) - <uint32_t>i
            i += 1
            if i >= N:
                self.mt[0] = self.mt[N - 1]
                i = 1
        self.mt[0] = UPPER_MASK  # CPython's: a state never all zero
        self.index = N

    cdef uint32_t word(self) noexcept:
        cdef uint32_t y
        cdef int kk
        if self.index >= N:
            for kk in range(N - M):
                y = (self.mt[kk] & UPPER_MASK) | (self.mt[kk + 1] & LOWER_MASK)
                self.mt[kk] = self.mt[kk + M] ^ (y >> 1) ^ (MATRIX_A if y & 1 else 0)
            for kk in range(N - M, N - 1):
                y = (self.mt[kk] & UPPER_MASK) | (self.mt[kk + 1] & LOWER_MASK)
                self.mt[kk] = self.mt[kk + M - N] ^ (y >> 1) ^ (MATRIX_A if y & 1 else 0)
            y = (self.mt[N - 1] & UPPER_MASK) | (self.mt[0] & LOWER_MASK)
            self.mt[N - 1] = self.mt[M - 1] ^ (y >> 1) ^ (MATRIX_A if y & 1 else 0)
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= y >> 11
        y ^= (y << 7) & TEMPER_B
        y ^= (y << 15) & TEMPER_C
        y ^= y >> 18
        return y

    cdef double random(self) noexcept:
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

    cdef _Source source(self, str service):
        cdef _Source found = self.sources.get(service)
        if found is None:
            spec = self.source_of(service)
            found = _Source.__new__(_Source)
            found.calls = tuple([_call(edge) for edge in spec.edges])
            found.operations = spec.operations
            found.routes = spec.routes
            found.own_errors = spec.own_errors
            found.count = len(spec.operations)
            found.bits = spec.bits
            found.p50_ms = spec.p50_ms
            found.sigma = spec.sigma
            found.minor_error = spec.minor_error
            found.call_error = spec.call_error
            found.failure = spec.failure
            found.minor_failure = spec.minor_failure
            found.minor_job = spec.minor_job
            found.partner_op = spec.partner_op
            found.partner_failure = spec.partner_failure
            self.sources[service] = found
        return found

    cdef tuple take(self, tuple bits):
        return tuple([self.random() if b is None else self.bits(b) for b in bits])

    cdef double span(self, str service, int depth, list spans, _Call edge):
        """A span and its children into `spans`: its duration; its status and route into `self`."""
        cdef _Source source = self.source(service)
        cdef Py_ssize_t choice = <Py_ssize_t>(self.random() * source.count)
        cdef double x2pi, g2rad, z, total, draw, own_error, share, took, deadline, weight
        cdef Py_ssize_t index, later
        cdef bint calls, failed
        cdef _Call child
        cdef tuple bits
        template = source.operations[choice]
        bits = source.bits[choice]
        op = (template, self.take(bits)) if bits else template
        if self.has_spare:
            z = self.spare
            self.has_spare = False
        else:
            x2pi = self.random() * TWO_PI
            g2rad = sqrt(-2.0 * log(1.0 - self.random()))
            z = cos(x2pi) * g2rad
            self.spare = sin(x2pi) * g2rad
            self.has_spare = True
        total = source.p50_ms * exp(z * source.sigma)
        index = len(spans)
        spans.append(self.pending)
        status = "ok"
        route = source.routes[choice]
        draw = self.random()
        own_error = source.own_errors[choice]
        if draw < own_error:
            status = source.failure
        elif source.minor_error and edge is None and draw < own_error + source.minor_error * (1.0 - own_error):
            status = source.minor_failure
            op = route = source.minor_job
        if source.partner_op and depth < self.max_depth:
            calls = self.random() < self.partner_share
            share = 0.4 + 0.5 * self.random()
            failed = draw < own_error and bool(source.partner_failure)
            if (failed or calls) and route != source.minor_job:
                spans.append(
                    (depth + 1, service, source.partner_op, total * share, source.partner_failure if failed else "ok")
                )
        if depth < self.max_depth:
            for child in source.calls:
                if self.random() >= child.share:
                    continue
                took = self.span(child.dep, depth + 1, spans, child)
                child_status = self.status
                total += took
                if child_status != "ok" and status == "ok" and self.random() < child.weight:
                    if child_status == "timeout" or child_status == "cancelled":
                        status = "error(upstream timeout)"
                    else:
                        status = "error(upstream error)"
        if edge is not None:
            deadline = edge.deadline_ms
            if total >= deadline:
                total = deadline
                status = "timeout"
                for later in range(index + 1, len(spans)):
                    below = spans[later]
                    if <double>below[3] > deadline:
                        spans[later] = (below[0], below[1], below[2], deadline, "cancelled")
            elif status == "ok" and self.random() < source.call_error:
                status = "error(500)"
        spans[index] = (depth, service, op, total, status)
        self.status = status
        self.route = route
        return total


cdef inline uint32_t _key_word(const unsigned char *data, Py_ssize_t length, Py_ssize_t j) noexcept:
    """Word `j` of a big-endian integer's bytes, counted from the least significant: 0 past its top."""
    cdef Py_ssize_t end = length - 4 * j
    cdef Py_ssize_t k
    cdef uint32_t value = 0
    for k in range(max(end - 4, 0), end):
        value = (value << 8) | data[k]
    return value


cdef _Call _call(object edge):
    cdef _Call call = _Call.__new__(_Call)
    call.dep = edge.dep
    call.share = edge.share
    call.weight = edge.weight
    call.deadline_ms = edge.deadline_ms
    return call


def draw_requests(
    str key,
    str service,
    int count,
    object source_of,
    object request,
    int max_depth,
    double partner_share,
    object pending,
):
    """`count` requests through `service`, drawn from the rng `random.Random(key)` as
    `traces.draw_in_python` draws them."""
    cdef _Sampler sampler = _Sampler.__new__(_Sampler)
    cdef int i
    cdef double total
    sampler.seed(key)
    sampler.sources = {}
    sampler.source_of = source_of
    sampler.has_spare = False
    sampler.max_depth = max_depth
    sampler.partner_share = partner_share
    sampler.pending = pending
    drawn = []
    for i in range(count):
        spans = []
        total = sampler.span(service, 0, spans, None)
        drawn.append(request(sampler.route, total, sampler.status, sampler.word(), spans))
    return drawn
