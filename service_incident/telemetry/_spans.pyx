# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False
"""The span draws of a trace sample in C: `traces.draw_in_python`'s loop, draw for draw.

`traces.py` holds the reference loop in Python and uses this one where it was compiled (setup.py);
tests/test_core_spans.py holds the two to the same requests. The sample's rng is its own: the sampler
is a `KeyedRandom` (_keyed.pyx), seeded from the sample's key as `random.Random(key)` seeds one and
drawn from in C, and every float operation is Python's, in its order. (Drawing here spares a view a
`Random` and the 625 integers of its `getstate`, which cost more than the draws of a small service's
sample.)
"""

from libc.math cimport cos, exp, log, sin, sqrt

from service_incident.telemetry._keyed cimport KeyedRandom

cdef double TWO_PI = 2.0 * 3.141592653589793  # math.pi, as random.gauss has it


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


cdef class _Sampler(KeyedRandom):
    cdef dict sources
    cdef object source_of
    cdef double spare
    cdef bint has_spare
    cdef int max_depth
    cdef double partner_share
    cdef object pending
    # The status and route of the span `span` drew last, beside the duration it returns.
    cdef object status, route

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
        return tuple([self.draw() if b is None else self.bits(b) for b in bits])

    cdef double span(self, str service, int depth, list spans, _Call edge):
        """A span and its children into `spans`: its duration; its status and route into `self`."""
        cdef _Source source = self.source(service)
        cdef Py_ssize_t choice = <Py_ssize_t>(self.draw() * source.count)
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
            x2pi = self.draw() * TWO_PI
            g2rad = sqrt(-2.0 * log(1.0 - self.draw()))
            z = cos(x2pi) * g2rad
            self.spare = sin(x2pi) * g2rad
            self.has_spare = True
        total = source.p50_ms * exp(z * source.sigma)
        index = len(spans)
        spans.append(self.pending)
        status = "ok"
        route = source.routes[choice]
        draw = self.draw()
        own_error = source.own_errors[choice]
        if draw < own_error:
            status = source.failure
        elif source.minor_error and edge is None and draw < own_error + source.minor_error * (1.0 - own_error):
            status = source.minor_failure
            op = route = source.minor_job
        if source.partner_op and depth < self.max_depth:
            calls = self.draw() < self.partner_share
            share = 0.4 + 0.5 * self.draw()
            failed = draw < own_error and bool(source.partner_failure)
            if (failed or calls) and route != source.minor_job:
                spans.append(
                    (depth + 1, service, source.partner_op, total * share, source.partner_failure if failed else "ok")
                )
        if depth < self.max_depth:
            for child in source.calls:
                if self.draw() >= child.share:
                    continue
                took = self.span(child.dep, depth + 1, spans, child)
                child_status = self.status
                total += took
                if child_status != "ok" and status == "ok" and self.draw() < child.weight:
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
            elif status == "ok" and self.draw() < source.call_error:
                status = "error(500)"
        spans[index] = (depth, service, op, total, status)
        self.status = status
        self.route = route
        return total


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
