"""The compiled span draws (`telemetry/_spans.pyx`, setup.py) against the Python loop they stand for
(`traces.draw_in_python`): the same requests, span for span, from the rng one key seeds, on the worlds
the episodes play, on made-up services that take every branch of the draw, and from keys of several
lengths and makes, which the kernel seeds its own Mersenne Twister from."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import msgspec
import pytest

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import ExpertAgent
from service_incident.telemetry import traces
from service_incident.telemetry.templates import draw_bits, seed_text
from service_incident.world import Edge, World

KERNEL = traces.compiled_kernel()
needs_kernel = pytest.mark.skipif(KERNEL is None, reason="the kernel is not compiled in this install")


def both(world: World, service: str, step: int, key: object) -> tuple[bytes, bytes]:
    """A sample drawn by the Python loop and by the kernel from one key, encoded: a float where Python
    kept an int would compare equal and print otherwise."""
    assert KERNEL is not None
    reference, compiled = (
        msgspec.json.encode(draw(world, service, step, str(key))) for draw in (traces.draw_in_python, KERNEL)
    )
    return reference, compiled


def played_worlds() -> Iterator[tuple[World, int]]:
    """Each step's world of the expert's episodes: curated and generated, remedies applied."""
    env = ServiceIncidentEnvironment()
    for task_id, seed in [("easy", 1), ("hard", 2), ("gen_hard", 3), ("gen_expert", 4), ("gen_expert", 5)]:
        obs = env.reset(task_id=task_id, seed=seed)
        agent = ExpertAgent()
        while not obs.done:
            episode = env._episode
            assert episode is not None
            yield episode.world, episode.step
            obs = env.step(agent.act(obs))


@needs_kernel
def test_the_kernel_draws_the_requests_the_python_loop_draws_on_played_worlds() -> None:
    statuses: set[str] = set()
    compared = 0
    for world, step in played_worlds():
        for service in world.incident.names:
            key = seed_text(compared, world.incident.id, service, "traces", step)  # as a view keys its sample
            reference, compiled = both(world, service, step, key)
            assert compiled == reference, (world.incident.id, service, step)
            statuses.update(span[4] for request in msgspec.json.decode(reference) for span in request["spans"])
            compared += 1
    # The worlds took the draw's branches: failures of its own, calls given up on, work cancelled.
    assert {"ok", "timeout", "cancelled", "error(upstream error)"} <= statuses, statuses
    assert compared > 100


def made_up(
    operations: tuple[str, ...], edges: tuple[Edge, ...] = (), **fields: object
) -> Callable[[World, str, int], traces._SpanSource]:
    """A service's span source, every field set by hand, for services named in `edges` too."""
    source = traces._SpanSource(
        edges=edges,
        operations=operations,
        routes=tuple(op.split()[0] for op in operations),
        bits=tuple(map(draw_bits, operations)),
        p50_ms=12.0,
        sigma=0.9,
        own_errors=tuple(0.2 for _ in operations),
        failure="error(500)",
        minor_error=0.0,
        minor_failure="error(503)",
        minor_job="",
        call_error=0.1,
        partner_op="",
        partner_failure="",
    )
    source = msgspec.structs.replace(source, **fields)
    # Every dependency calls the others in turn, as deep as a trace goes, slower than its callers.
    below = msgspec.structs.replace(source, p50_ms=30.0, sigma=1.4)
    return lambda world, service, step: source if service == "front" else below


@needs_kernel
@pytest.mark.parametrize(
    ("fields", "shown"),
    [
        # Hex fields past one 32-bit word, ints and picks, drawn where a view may show the span.
        ({}, set()),
        # A red herring's background job failing at the entry.
        ({"minor_error": 0.3, "minor_job": "job-reindex"}, {"error(503)"}),
        # Calls to an outside party, failing through it.
        ({"partner_op": "POST partner:/charge", "partner_failure": "error(partner 502)"}, {"error(partner 502)"}),
        (
            {"partner_op": "POST partner:/charge", "partner_failure": "", "minor_error": 0.2, "minor_job": "job-x"},
            {"error(503)"},
        ),
    ],
)
def test_the_kernel_draws_what_the_python_loop_draws_on_every_branch(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, object], shown: set[str]
) -> None:
    operations = ("GET /a id={hex:16} n={int:1:9}", "POST /b {pick:x|y|z}", "GET /c", "PUT /d k={hex:6} f={float:0:1}")
    # Tight deadlines time calls out and cancel the work below them; loose ones let them finish.
    edges = tuple(
        Edge(f"dep-{index}", share, 0.7, deadline, 2, False, "named")
        for index, (share, deadline) in enumerate([(0.9, 25.0), (0.6, 400.0), (0.5, 60.0)])
    )
    monkeypatch.setattr(traces, "_span_source", made_up(operations, edges, **fields))
    world = ServiceIncidentEnvironment()
    world.reset(task_id="easy", seed=1)
    assert world._episode is not None
    statuses: set[str] = set()
    for seed in range(40):
        reference, compiled = both(world._episode.world, "front", 0, seed)
        assert compiled == reference, seed
        statuses.update(span[4] for request in msgspec.json.decode(reference) for span in request["spans"])
    assert {"cancelled", "timeout", "error(upstream timeout)", "error(500)", *shown} <= statuses, statuses


@needs_kernel
@pytest.mark.parametrize(
    "key",
    [
        "",  # no text: the integer seeded from is the SHA-512 alone
        "\0\0\0 leading zero bytes",  # which the integer does not have: dropped before its words are counted
        "\0" * 207,  # zero bytes, and a SHA-512 of them that starts with one: dropped into the digest
        "0:inc-7f3a:checkout:traces:12",  # a view's key, as `traces.sample` writes it
        "-9223372036854775808:" + "é" * 300,  # multi-byte text, a key of 172 words
        "k" * 2_600,  # more words than the Mersenne Twister's 624: the seeding wraps round the key
    ],
)
def test_the_kernel_seeds_from_a_key_as_random_does(key: str) -> None:
    env = ServiceIncidentEnvironment()
    env.reset(task_id="hard", seed=1)
    assert env._episode is not None
    world = env._episode.world
    for service in world.incident.names:
        reference, compiled = both(world, service, 0, key)
        assert compiled == reference, (key[:20], service)
