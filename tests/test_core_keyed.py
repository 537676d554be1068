"""The compiled keyed rng (`telemetry/_keyed.pyx`, setup.py) against what it stands for,
`random.Random(key)`: the same floats, bits and uniform draws, in the same order, from keys of many
lengths and makes (the key's words seed the state, however many there are), and the views drawing
from it write what they wrote with Python's rng."""

from __future__ import annotations

import random

import msgspec
import pytest

from service_incident.environment import ServiceIncidentEnvironment
from service_incident.harness.agents import ExpertAgent
from service_incident.telemetry import templates

KERNEL = templates.compiled_kernel()
needs_kernel = pytest.mark.skipif(KERNEL is None, reason="the kernel is not compiled in this install")

# Keys as the views write them, and keys of every length up to past the state's 624 words.
KEYS = [
    templates.seed_text(7, "hard-3", "orders-db", "logs", 2),
    templates.seed_text(2**63, "gen_expert-41", "gateway", "breakdown", -12),
    "",
    "\0",
    "\0\0x",
    "ünïcødé ✓",
    *("k" * length for length in (1, 3, 4, 5, 63, 64, 65, 2_431, 2_432, 2_433, 2_500, 5_000)),
    *(
        f"{seed}:{service}:{view}:{step}"
        for seed in (0, 1, 99)
        for service in ("db", "web")
        for view in ("logs", "p50")
        for step in (-12, 0, 9)
    ),
]
BITS = (0, 1, 5, 31, 32, 33, 63, 64, 65, 100, 200)


def drawn(rng: templates.Rng) -> list[float | int]:
    """A sequence of every kind of draw the views take, interleaved."""
    found: list[float | int] = []
    for round_ in range(40):
        found.append(rng.random())
        found.append(rng.getrandbits(BITS[round_ % len(BITS)]))
        found.append(rng.uniform(-0.05, 0.05))
        found.append(rng.uniform(3.0, 7.5))
    # Past the state's 624 words: the twist runs again.
    found += [rng.random() for _ in range(700)]
    return found


@needs_kernel
@pytest.mark.parametrize("key", KEYS, ids=lambda key: f"{len(key)}:{key[:12]!r}")
def test_the_compiled_rng_draws_what_random_draws_from_the_same_key(key: str) -> None:
    assert KERNEL is not None
    expected, found = drawn(random.Random(key)), drawn(KERNEL(key))
    # Compared as text as well: an int where Python drew a float would compare equal and print otherwise.
    assert found == expected
    assert list(map(repr, found)) == list(map(repr, expected))


@needs_kernel
def test_the_compiled_rng_refuses_negative_bits_as_random_does() -> None:
    assert KERNEL is not None
    with pytest.raises(ValueError, match="non-negative"):
        random.Random("key").getrandbits(-1)
    with pytest.raises(ValueError, match="non-negative"):
        KERNEL("key").getrandbits(-1)


@needs_kernel
def test_the_views_write_the_same_with_either_rng(monkeypatch: pytest.MonkeyPatch) -> None:
    def played(keyed: templates.Keyed) -> list[bytes]:
        monkeypatch.setattr(templates, "keyed", keyed)
        env = ServiceIncidentEnvironment()
        frames = []
        for task_id, seed in [("hard", 3), ("gen_hard", 4)]:
            observation = env.reset(task_id=task_id, seed=seed, episode_id=f"{task_id}-{seed}")
            agent = ExpertAgent()
            while not observation.done:
                observation = env.step(agent.act(observation))
                frames.append(msgspec.json.encode(observation))
        return frames

    assert KERNEL is not None
    assert played(KERNEL) == played(random.Random)
