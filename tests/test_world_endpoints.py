"""A fault in the code its release changed fails the endpoints that code serves: a bad deployment's
payload parsing fails a service's writes, while its reads fare as every day, alike in the metrics'
breakdown, the traces' and the callers' lines, and with the service's error rate as it was."""

from __future__ import annotations

import re

from service_incident.generator import Knobs, generate
from service_incident.telemetry import Telemetry
from service_incident.telemetry.endpoints import request_templates, route
from service_incident.world import World

_CALL = re.compile(r'call="([^"]+)"')


def test_a_bad_deployment_fails_the_writes_its_payload_change_serves() -> None:
    checked = 0
    traced = {True: [0, 0], False: [0, 0]}  # writes or not: [requests, failed]
    for seed in range(40):
        incident = generate(Knobs(services=(4, 7), fault_types=("bad_deployment",), intensity=(0.6, 1.0)), seed=seed)
        root = incident.faults[0].service
        world = World(incident)
        kind = world.plan.by_name[root].kind
        templates, written = request_templates(kind)
        writes = {route(t) for t in written}
        if not writes or writes == {route(t) for t in templates}:
            continue  # every request alike: no path to fall on
        checked += 1
        telemetry = Telemetry(world, seed)
        state, calm = world.states[root], world.plan.calm[root]
        rows = [r for r in telemetry.metrics(root, 0).endpoints if r.work == "request"]
        total = sum(r.rps * r.error_rate for r in rows) / sum(r.rps for r in rows)
        # The service's error rate is what its rows add up to, within the metrics' noise.
        assert abs(total - state.error_rate) <= 0.12 * state.error_rate, (root, total, state.error_rate)
        upstream = 1.0 - (1.0 - state.error_rate) / (1.0 - max(0.0, state.error_rate - calm.error_rate))
        # Reads carry failures only once every write fails (the rate has to add up).
        saturated = all(r.error_rate >= 0.9 for r in rows if r.endpoint in writes)
        for row in rows:
            if row.endpoint in writes:
                assert row.error_rate >= 0.9 * state.error_rate, (root, row)
            elif not saturated:
                # A read fails as every day, with what its dependencies fail besides.
                assert row.error_rate <= 1.15 * calm.error_rate + max(0.0, upstream) + 0.02, (root, row, state)
        traces = telemetry.traces(root, 0)
        for line in traces.splitlines():
            if match := re.match(r"endpoint (.+): (\d+) requests, (\d+) failed", line):
                counts = traced[match.group(1) in writes]
                counts[0] += int(match.group(2))
                counts[1] += int(match.group(3))
        for caller in incident.services:
            if root in caller.depends_on:
                for target in _CALL.findall(telemetry.logs(caller.name, 0)):
                    if route(target) in {route(t) for t in templates}:
                        assert route(target) in writes, (caller.name, target)
    assert checked >= 10
    write_share = traced[True][1] / traced[True][0]
    read_share = traced[False][1] / traced[False][0]
    assert write_share >= 3 * read_share, traced
