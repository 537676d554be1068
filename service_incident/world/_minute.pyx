# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=False, cpow=True
"""One service's state in a simulated minute, in C: `simulation._service_state`, operation for operation.

`simulation.py` holds the reference in Python and uses this one where it was compiled (setup.py);
tests/test_core_minute.py holds the two to the same states. Every float operation is Python's, in its
order, on the same values: C doubles are Python's floats, `%` keeps Python's sign (cdivision off), `**`
is C's pow as Python's float power is for the non-negative bases here (cpow), and the build fuses no
multiply-adds.
"""

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


def service_state(
    tuple constants,
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
    node, capacity_rps_, base_queueing_, calm_queueing_, memory_noise_, of_record_, edges, rhythm = constants
    cdef double capacity_rps = capacity_rps_, base_queueing = base_queueing_, calm_queueing = calm_queueing_
    cdef double memory_noise = memory_noise_
    cdef bint of_record = of_record_
    name = node.name
    cdef double noise = node.noise
    cdef double n1 = 1.0 + noise * w1
    cdef double nw2 = noise * w2
    cdef double n2 = 1.0 + nw2
    cdef double strength_total = 0.0
    cdef double capacity, utilisation, slowdown, strength, shed_share, self_p50, self_p99, cpu, memory
    cdef double moved_cpu, moved_memory, own_ok, silent, extra_cpu, extra_error, minor_error
    cdef double p50, p99, success, worst_wait, error_rate, floor, call_failure, strongest
    cdef double refused, dep_p50, dep_p99, deadline, timed_out, failed, seen, wait50, wait99, extra
    cdef double share, wait, weighted_share, bound
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
    self_p50 = <double>node.p50_ms * slowdown * n1
    self_p99 = self_p50 * <double>node.tail * n2
    if requests:
        cpu = 100.0 * utilisation * n2
        if not cpu < 99.0:
            cpu = 99.0
    else:
        cpu = node.cpu_pct
    memory = <double>node.memory_pct * (1.0 + memory_noise * w1)
    moved_cpu, moved_memory = _movement(rhythm, step, requests)
    if moved_cpu > 0.0:
        bound = cpu if not cpu < MOVEMENT_CPU else MOVEMENT_CPU
        cpu = cpu + moved_cpu if not bound < cpu + moved_cpu else bound
    bound = memory if not memory < MOVEMENT_MEMORY else MOVEMENT_MEMORY
    memory = memory + moved_memory if not bound < memory + moved_memory else bound
    own_ok = (1.0 - <double>node.error_rate * (1.0 + w1)) * (1.0 - shed_share)
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
        own_ok *= 1.0 - RESTART_DISRUPTION / <double>node.replicas * n1
    p50, p99, success = self_p50, self_p99, 1.0
    failing = []
    if edges:
        worst_wait = 0.0
        for edge, weighted_share_, retry_power in edges:
            weighted_share = weighted_share_
            dep = states[edge.dep]
            refused = dep.call_failure
            dep_p50 = dep.p50_ms
            dep_p99 = dep.p99_ms
            deadline = edge.deadline_ms
            timed_out = exceed(dep_p50, dep_p99, deadline) if dep_p99 * 2 > deadline else 0.0
            failed = 1.0 - (1.0 - refused) * (1.0 - timed_out)
            if edge.breaker and failed >= BREAKER_OPEN:
                seen, wait50, wait99, cause = 1.0, 1.0, 2.0, "breaker"
            else:
                dep_mode = dep.mode
                retried = edge.retries if dep_mode not in ("rejected", "refused", "handshake") else 0
                seen = failed ** (<double>retry_power if retried else 1.0)
                extra = 1.0 + <double>retried * failed
                wait50 = (deadline if deadline < dep_p50 else dep_p50) * extra
                wait99 = (deadline if deadline < dep_p99 else dep_p99) * extra
                cause = "timeout" if timed_out > refused else dep_mode
            share = weighted_share * seen
            success *= 1.0 - share
            p50 += <double>edge.share * wait50
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


cdef tuple _movement(object rhythm, object minute_, double requests):
    """`Rhythm.at`: the CPU and memory points a service's everyday movement adds at a minute."""
    cdef double minute = minute_
    cdef double memory = 0.0, cpu = 0.0, ramp, extra
    cdef double gc_points = rhythm.gc_points, fill_points = rhythm.fill_points, batch_minutes = rhythm.batch_minutes
    cdef double traffic_memory = rhythm.traffic_memory, healthy_rps = rhythm.healthy_rps
    cdef double gc_minutes, fill_at, batch_at
    if gc_points:
        gc_minutes = rhythm.gc_minutes
        memory += gc_points * (((minute + <double>rhythm.gc_phase) % gc_minutes) / gc_minutes)
    if fill_points:
        fill_at = rhythm.fill_at
        if minute >= fill_at:
            memory -= fill_points * exp(-(minute - fill_at) / <double>rhythm.fill_minutes)
    if batch_minutes:
        batch_at = rhythm.batch_at
        ramp = minute - batch_at
        extra = batch_at + batch_minutes - minute
        ramp = (extra if extra < ramp else ramp) / BATCH_RAMP_MINUTES
        if ramp > 0.0:
            ramp = ramp if ramp < 1.0 else 1.0
            cpu += <double>rhythm.batch_cpu * ramp
            memory += <double>rhythm.batch_memory * ramp
    if traffic_memory and healthy_rps:
        extra = requests / healthy_rps - 1.0
        memory += traffic_memory * (extra if extra < TRAFFIC_MEMORY_CAP else TRAFFIC_MEMORY_CAP)
    return cpu, memory
