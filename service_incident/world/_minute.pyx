# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False, cpow=True
"""Every service's state in a simulated minute, in C: `simulation._minute_states` and the
`simulation._service_state` it calls, operation for operation.

`simulation.py` holds the reference in Python and uses this one where it was compiled (setup.py);
tests/test_core_minute.py holds the two to the same states. Every float operation is Python's, in its
order, on the same values: C doubles are Python's floats, `%` keeps Python's sign (cdivision off), `**`
is C's pow as Python's float power is for the non-negative bases here (cpow), and the build fuses no
multiply-adds.
"""

cimport cython
from libc.math cimport erfc, exp, log

cdef double MAX_UTILISATION, P1_ERROR_RATE, RESTART_DISRUPTION, BREAKER_OPEN
cdef double MOVEMENT_CPU, MOVEMENT_MEMORY, BATCH_RAMP_MINUTES, TRAFFIC_MEMORY_CAP, Z99, SQRT2
cdef object STATE = None


def configure(object state, dict constants):
    """The state Struct to build, and the model's constants, from the modules that define them."""
    global STATE, MAX_UTILISATION, P1_ERROR_RATE, RESTART_DISRUPTION, BREAKER_OPEN
    global MOVEMENT_CPU, MOVEMENT_MEMORY, BATCH_RAMP_MINUTES, TRAFFIC_MEMORY_CAP, Z99, SQRT2
    STATE = state
    MAX_UTILISATION = constants["MAX_UTILISATION"]
    P1_ERROR_RATE = constants["P1_ERROR_RATE"]
    RESTART_DISRUPTION = constants["RESTART_DISRUPTION"]
    BREAKER_OPEN = constants["BREAKER_OPEN"]
    MOVEMENT_CPU = constants["MOVEMENT_CPU"]
    MOVEMENT_MEMORY = constants["MOVEMENT_MEMORY"]
    BATCH_RAMP_MINUTES = constants["BATCH_RAMP_MINUTES"]
    TRAFFIC_MEMORY_CAP = constants["TRAFFIC_MEMORY_CAP"]
    Z99 = constants["Z99"]
    SQRT2 = constants["SQRT2"]


cdef inline double queueing(double utilisation):
    cdef double rho = utilisation if not MAX_UTILISATION < utilisation else MAX_UTILISATION
    return 1.0 + 0.5 * rho * rho / (1.0 - rho)


cdef inline double sigma(double p50, double p99):
    cdef double floor = p50 * 1.01
    cdef double top = p99 if not p99 < floor else floor
    cdef double spread = log(top / p50) / Z99
    return spread if not spread < 1e-6 else 1e-6


cdef inline double exceed(double p50, double p99, double deadline):
    if p50 <= 0.0:
        return 0.0
    return 0.5 * erfc(log(deadline / p50) / (sigma(p50, p99) * SQRT2))


# Neither holds anything that could lead back to it: the garbage collector need not track them, nor
# then the plan's loop constants that hold them.
@cython.no_gc
cdef class Prepared:
    """A service's loop constants (`plan.LoopConstants`) as C values: read from their Structs once per
    plan (`prepare`), not in every minute, where most of the kernel's time went to reading them."""

    cdef str name
    cdef double capacity_rps, base_queueing, calm_queueing, memory_noise
    cdef double p50_ms, tail, cpu_pct, memory_pct, error_rate, noise, replicas
    cdef bint of_record
    cdef tuple edges
    cdef double gc_points, gc_minutes, gc_phase, fill_points, fill_at, fill_minutes
    cdef double batch_at, batch_minutes, batch_cpu, batch_memory, traffic_memory, healthy_rps


@cython.no_gc
cdef class PreparedEdge:
    """One edge of a caller's (`plan.Edge`, with its loop constants) as C values."""

    cdef str dep
    cdef double share, weighted_share, retry_power, deadline, retries
    cdef bint breaker


def prepare(tuple constants):
    """A service's loop constants as `_service_state` reads them: the last of `plan.LoopConstants`."""
    node, capacity_rps, base_queueing, calm_queueing, memory_noise, of_record, edges, rhythm = constants
    cdef Prepared found = Prepared.__new__(Prepared)
    cdef PreparedEdge prepared
    found.name = node.name
    found.capacity_rps, found.base_queueing, found.calm_queueing = capacity_rps, base_queueing, calm_queueing
    found.memory_noise, found.of_record = memory_noise, of_record
    found.p50_ms, found.tail, found.cpu_pct, found.memory_pct = node.p50_ms, node.tail, node.cpu_pct, node.memory_pct
    found.error_rate, found.noise, found.replicas = node.error_rate, node.noise, node.replicas
    found.gc_points, found.gc_minutes, found.gc_phase = rhythm.gc_points, rhythm.gc_minutes, rhythm.gc_phase
    found.fill_points, found.fill_at, found.fill_minutes = rhythm.fill_points, rhythm.fill_at, rhythm.fill_minutes
    found.batch_at, found.batch_minutes = rhythm.batch_at, rhythm.batch_minutes
    found.batch_cpu, found.batch_memory = rhythm.batch_cpu, rhythm.batch_memory
    found.traffic_memory, found.healthy_rps = rhythm.traffic_memory, rhythm.healthy_rps
    edges_ = []
    for edge, weighted_share, retry_power in edges:
        prepared = PreparedEdge.__new__(PreparedEdge)
        prepared.dep, prepared.share, prepared.deadline = edge.dep, edge.share, edge.deadline_ms
        prepared.weighted_share, prepared.retry_power = weighted_share, retry_power
        prepared.retries, prepared.breaker = edge.retries, edge.breaker
        edges_.append(prepared)
    found.edges = tuple(edges_)
    return found


def minute_states(
    tuple loop,
    tuple w1s,
    tuple w2s,
    object minute,
    object rps,
    object only,
    object quiet,
    object touched,
    bint calm,
    object healthy_p99,
):
    """`simulation._minute_states`: the state of each service (of those in `only`, if given) at request
    rates `rps`, dependencies first; one that is not `touched`, at its `quiet` state's rate, its
    dependencies answering as there, in its `quiet` state."""
    cdef dict states = {}
    # Whether some service simulated so far answers its callers otherwise than when calm: until one
    # does, every dependency answers as when calm.
    cdef bint answers_differ = False
    cdef Prepared prepared
    cdef Py_ssize_t index
    step = minute.step
    live, side, restarting, scaled = minute.live, minute.side, minute.restarting, minute.scaled
    for index in range(len(loop)):
        prepared = (<tuple>loop[index])[8]
        name = prepared.name
        if only is not None and name not in only:
            continue
        requests = rps[name]
        if quiet is not None and name not in touched:
            calm_state = quiet[name]
            if requests == calm_state.rps and (
                not answers_differ or _answered_as_when_calm(prepared.edges, states, quiet)
            ):
                states[name] = calm_state
                continue
        state = states[name] = _service_state(
            prepared,
            step,
            requests,
            w1s[index],
            w2s[index],
            live.get(name, ()) if live else (),
            scaled.get(name) if scaled else None,
            side.get(name) if side else None,
            name in restarting if restarting else False,
            calm,
            healthy_p99,
            states,
        )
        if quiet is not None and not answers_differ:
            answers_differ = not _answers_alike(state, quiet[name])
    return states


cdef inline bint _answers_alike(object state, object calm):
    """Whether a service answers its callers as when calm: the same failures and latency, all a caller
    reads of it."""
    return (
        state.call_failure == calm.call_failure
        and state.p50_ms == calm.p50_ms
        and state.p99_ms == calm.p99_ms
        and state.mode == calm.mode
    )


cdef bint _answered_as_when_calm(tuple edges, dict states, object quiet):
    """Whether a service's dependencies all answer its calls as when calm."""
    cdef PreparedEdge edge
    for edge in edges:
        state, calm = states[edge.dep], quiet[edge.dep]
        if state is not calm and not _answers_alike(state, calm):
            return False
    return True


cdef object _service_state(
    Prepared constants,
    object step,
    double requests,
    double w1,
    double w2,
    object faults,
    object scale,
    object side,
    bint restarting,
    bint calm,
    object healthy_p99,
    dict states,
):
    """One service's state in the minute, its dependencies' states known (`states`)."""
    cdef double capacity_rps = constants.capacity_rps, base_queueing = constants.base_queueing
    cdef double calm_queueing = constants.calm_queueing, memory_noise = constants.memory_noise
    cdef bint of_record = constants.of_record
    cdef tuple edges = constants.edges
    cdef PreparedEdge edge
    name = constants.name
    cdef double noise = constants.noise
    cdef double n1 = 1.0 + noise * w1
    cdef double nw2 = noise * w2
    cdef double n2 = 1.0 + nw2
    cdef double strength_total = 0.0
    cdef double capacity, utilisation, slowdown, strength, shed_share, self_p50, self_p99, cpu, memory
    cdef double moved_cpu, moved_memory, own_ok, silent, extra_cpu, extra_error, minor_error
    cdef double p50, p99, success, worst_wait, error_rate, floor, call_failure, strongest
    cdef double refused, dep_p50, dep_p99, deadline, timed_out, failed, seen, wait50, wait99, extra
    cdef double share, wait, weighted_share, bound, retried
    if faults or not calm or scale is not None:
        capacity = capacity_rps * <double>scale if scale is not None else capacity_rps
        for kind, strength_ in faults:
            strength = strength_
            strength_total += strength
            capacity *= 1.0 - <double>kind.capacity_loss * strength
        utilisation = requests / capacity if capacity > 0 else 0.0
        slowdown = queueing(utilisation) / base_queueing
    else:
        utilisation = requests / capacity_rps if capacity_rps > 0 else 0.0
        slowdown = calm_queueing
    shed_share = 1.0 - 1.0 / utilisation if utilisation > 1.0 else 0.0
    self_p50 = constants.p50_ms * slowdown * n1
    self_p99 = self_p50 * constants.tail * n2
    if requests:
        cpu = 100.0 * utilisation * n2
        if not cpu < 99.0:
            cpu = 99.0
    else:
        cpu = constants.cpu_pct
    memory = constants.memory_pct * (1.0 + memory_noise * w1)
    moved_cpu, moved_memory = _movement(constants, step, requests)
    if moved_cpu > 0.0:
        bound = cpu if not cpu < MOVEMENT_CPU else MOVEMENT_CPU
        cpu = cpu + moved_cpu if not bound < cpu + moved_cpu else bound
    bound = memory if not memory < MOVEMENT_MEMORY else MOVEMENT_MEMORY
    memory = memory + moved_memory if not bound < memory + moved_memory else bound
    own_ok = (1.0 - constants.error_rate * (1.0 + w1)) * (1.0 - shed_share)
    silent = 0.0
    health = None
    mode = "error"
    fails_writes = False
    partner_failure = ""
    if faults:
        strongest = 0.0
        for kind, strength_ in faults:
            strength = strength_
            bound = <double>kind.error_rate * strength * n1
            own_ok *= 1.0 - (1.0 if not bound < 1.0 else bound)
            silent += <double>kind.caller_failure * strength
            self_p50 += <double>kind.latency_ms * strength * 0.45
            self_p99 += <double>kind.latency_ms * strength * (1.4 + nw2)
            if kind.cpu_pct is not None:
                cpu += (<double>kind.cpu_pct - cpu) * strength
            if kind.memory_pct is not None:
                memory += (<double>kind.memory_pct * (1.0 - 0.01 * (1 + w1)) - memory) * (
                    1.0 if not strength < 1.0 else strength
                )
            if strength > strongest:
                strongest = strength
                health = kind.health if strength >= 0.5 else "degraded"
                mode = kind.failure
                fails_writes = kind.fails_writes
                partner_failure = kind.partner_failure
                if mode == "write" and not of_record:
                    mode = "refused"
    if side is not None:
        extra_cpu_, extra_error_, minor_error_, minor_mode = side
        extra_cpu = extra_cpu_
        extra_error = extra_error_
        minor_error = minor_error_
        cpu = cpu if not cpu < extra_cpu else extra_cpu
        if minor_mode == "write" and not of_record:
            minor_mode = "refused"
    else:
        extra_error, minor_error, minor_mode = 0.0, 0.0, "error"
    if restarting:
        own_ok *= 1.0 - RESTART_DISRUPTION / constants.replicas * n1
    p50, p99, success = self_p50, self_p99, 1.0
    failing = []
    if edges:
        worst_wait = 0.0
        for edge in edges:
            weighted_share = edge.weighted_share
            dep = states[edge.dep]
            refused = dep.call_failure
            dep_p50 = dep.p50_ms
            dep_p99 = dep.p99_ms
            deadline = edge.deadline
            timed_out = exceed(dep_p50, dep_p99, deadline) if dep_p99 * 2 > deadline else 0.0
            failed = 1.0 - (1.0 - refused) * (1.0 - timed_out)
            if edge.breaker and failed >= BREAKER_OPEN:
                seen, wait50, wait99, cause = 1.0, 1.0, 2.0, "breaker"
            else:
                dep_mode = dep.mode
                retried = edge.retries if dep_mode not in ("rejected", "refused", "handshake") else 0.0
                seen = failed ** (edge.retry_power if retried else 1.0)
                extra = 1.0 + retried * failed
                wait50 = (deadline if deadline < dep_p50 else dep_p50) * extra
                wait99 = (deadline if deadline < dep_p99 else dep_p99) * extra
                cause = "timeout" if timed_out > refused else dep_mode
            share = weighted_share * seen
            success *= 1.0 - share
            p50 += edge.share * wait50
            wait = wait99 if edge.share >= 0.5 else wait50
            if wait > worst_wait:
                worst_wait = wait
            if share > 0.002:
                failing.append((edge.dep, share, cause))
        p99 += worst_wait
    error_rate = 1.0 - own_ok * success
    if failing:
        cpu += 8.0 * (1.0 - success)
        cpu = cpu if cpu < 99.0 else 99.0
    floor = p50 * 1.2
    cpu = cpu if cpu < 99.5 else 99.5
    memory = memory if memory < 99.9 else 99.9
    error_rate = error_rate if error_rate < 1.0 else 1.0
    call_failure = error_rate + silent
    if health is None:
        if error_rate >= 0.9:
            health = "down"
        elif error_rate >= P1_ERROR_RATE or p99 >= 3 * <double>healthy_p99[name] + 200:
            health = "degraded"
        else:
            health = "ok"
    return STATE(
        name,
        p50,
        floor if floor > p99 else p99,
        error_rate,
        requests,
        cpu if cpu > 0.5 else 0.5,
        memory if memory > 1.0 else 1.0,
        health,
        call_failure if call_failure < 1.0 else 1.0,
        mode,
        tuple(failing) if failing else (),
        strength_total,
        self_p50,
        self_p99,
        extra_error,
        minor_error,
        minor_mode,
        fails_writes,
        partner_failure,
    )


cdef tuple _movement(Prepared rhythm, object minute_, double requests):
    """`Rhythm.at`: the CPU and memory points a service's everyday movement adds at a minute."""
    cdef double minute = minute_
    cdef double memory = 0.0, cpu = 0.0, ramp, extra
    if rhythm.gc_points:
        memory += rhythm.gc_points * (((minute + rhythm.gc_phase) % rhythm.gc_minutes) / rhythm.gc_minutes)
    if rhythm.fill_points:
        if minute >= rhythm.fill_at:
            memory -= rhythm.fill_points * exp(-(minute - rhythm.fill_at) / rhythm.fill_minutes)
    if rhythm.batch_minutes:
        ramp = minute - rhythm.batch_at
        extra = rhythm.batch_at + rhythm.batch_minutes - minute
        ramp = (extra if extra < ramp else ramp) / BATCH_RAMP_MINUTES
        if ramp > 0.0:
            ramp = ramp if ramp < 1.0 else 1.0
            cpu += rhythm.batch_cpu * ramp
            memory += rhythm.batch_memory * ramp
    if rhythm.traffic_memory and rhythm.healthy_rps:
        extra = requests / rhythm.healthy_rps - 1.0
        memory += rhythm.traffic_memory * (extra if extra < TRAFFIC_MEMORY_CAP else TRAFFIC_MEMORY_CAP)
    return cpu, memory
