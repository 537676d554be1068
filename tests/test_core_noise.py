"""The draws' compiled hashes (`world/_noise.pyx`) compute what the Python they stand for computes: the
noise hash (`draws.mix_in_python`) the same floats for the keys of every size and sign a plan and a
metric point hash, and for every offset a minute adds; a keyed draw (`draws.unit_in_python`) the same
float for keys of every make and length, and the same error for text UTF-8 cannot encode; draws sharing
a prefix (`draws.DrawsInPython`) the same floats for prefixes of every make and labels of any text."""

from __future__ import annotations

import enum
import random

import pytest
from kernel_support import compiled_or_skip

from service_incident.world import draws

# Offsets a minute adds (a step's wobble, the page's, far before it) and the edges of 32 and 64 bits.
OFFSETS = [0, 1, -1, 2**32 - 1, 2**32, -(2**40) + 3, 2**70 + 11, draws.wobble_minute(-13), draws.wobble_minute(0)]
# Every value a 32-bit lane can hold at its edges, and ones past them either way.
EDGES = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, -(2**31), -(2**32) + 1, 2**64 - 1, 2**64, -(2**64)]


@pytest.fixture
def kernel() -> tuple[draws.MixNoise, draws.KeyedDraw, draws.MakeDraws]:
    return compiled_or_skip(draws)


@pytest.fixture
def compiled(kernel: tuple[draws.MixNoise, draws.KeyedDraw, draws.MakeDraws]) -> draws.MixNoise:
    return kernel[0]


@pytest.fixture
def keyed(kernel: tuple[draws.MixNoise, draws.KeyedDraw, draws.MakeDraws]) -> draws.KeyedDraw:
    return kernel[1]


@pytest.fixture
def prefixed(kernel: tuple[draws.MixNoise, draws.KeyedDraw, draws.MakeDraws]) -> draws.MakeDraws:
    return kernel[2]


@pytest.mark.parametrize("size", [0, 1, 2, 5, 30, 75])
def test_the_kernel_hashes_keys_of_every_size_and_sign_as_the_python_does(compiled: draws.MixNoise, size: int) -> None:
    rng = random.Random(size)
    values = [rng.randrange(-(2**80), 2**80) >> rng.randrange(0, 80) for _ in range(size)]
    for add in OFFSETS:
        assert compiled(values, add) == draws.mix_in_python(values, add), add


def test_the_kernel_hashes_the_edges_of_a_lane_as_the_python_does(compiled: draws.MixNoise) -> None:
    for add in OFFSETS:
        assert compiled(EDGES, add) == draws.mix_in_python(EDGES, add), add
    # A tuple, as a plan keeps its keys, hashes as the list does.
    assert compiled(tuple(EDGES), 7) == compiled(EDGES, 7)


def test_the_noise_is_in_minus_one_to_one_and_spread_over_it() -> None:
    found = draws.mix(range(10_000), 12_345)
    assert all(-1.0 <= value < 1.0 for value in found)
    assert min(found) < -0.99 and max(found) > 0.99
    assert len(set(found)) > 9_990


class _Level(enum.IntEnum):
    LOW = 3


class _Named(enum.StrEnum):
    A = "a"


class _Tagged(str):
    def __str__(self) -> str:
        return "tagged"


# Parts of keys as the core draws them (ids, names, labels, steps, indices) and their edges: empty and
# multi-byte text, a colon inside a part, ints at and past 64 bits either way, floats, bools and None
# (which only `str` spells), subclasses of str and int that `str` spells otherwise, and an empty key.
KEYS = [
    ("gen_hard-5", "cache", "maxconn"),
    (),
    ("",),
    ("", ""),
    ("a:b", "", "c"),
    ("é漢字😀", 3, -7),
    (1, 1.0, True, False, None, 0.1, -0.0, float("inf"), float("nan")),
    (0, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 2**200, -(2**200)),
    (_Level.LOW, _Named.A, _Tagged("x"), 3),
    ("x" * 5_000,),
]


def _random_text(rng: random.Random) -> str:
    return "".join(
        chr(rng.choice((rng.randrange(32, 0xD800), rng.randrange(0x10000, 0x110000)))) for _ in range(rng.randrange(12))
    )


def _random_part(rng: random.Random) -> object:
    make = rng.randrange(4)
    if make == 0:
        return rng.randrange(-(2**70), 2**70) >> rng.randrange(70)
    if make == 1:
        # Text of one to four UTF-8 bytes a character (none a surrogate).
        return _random_text(rng)
    if make == 2:
        return rng.random() * 10 ** rng.randrange(-5, 300)
    return rng.choice([True, False, None, -0.0, float("inf")])


def test_the_kernel_draws_keys_of_every_make_as_the_python_does(keyed: draws.KeyedDraw) -> None:
    rng = random.Random(23)
    keys = KEYS + [tuple(_random_part(rng) for _ in range(rng.randrange(6))) for _ in range(20_000)]
    # The cache's function itself: what a draw is, not what a cache kept of it.
    python = draws.unit_in_python.__wrapped__
    assert sum(keyed(*key) != python(*key) for key in keys) == 0


def test_the_kernel_refuses_text_utf8_cannot_encode_as_the_python_does(keyed: draws.KeyedDraw) -> None:
    for key in (("\ud800",), ("ok", 3, "\udfff")):
        with pytest.raises(UnicodeEncodeError):
            draws.unit_in_python.__wrapped__(*key)
        with pytest.raises(UnicodeEncodeError):
            keyed(*key)


# Bounds of a spread as the core passes them: ints, floats, negative, reversed, equal.
BOUNDS = [(20, 900), (500, 20_000), (0.6, 1.5), (0.0002, 0.004), (-30.0, 10.0), (1.0, 0.2), (3, 3), (-7, 0.5)]


def test_the_kernel_draws_under_a_prefix_as_the_python_does(prefixed: draws.MakeDraws) -> None:
    rng = random.Random(29)
    labels = ["", "rps", "0:1", "a:b", "é漢字😀", "x" * 5_000] + [_random_text(rng) for _ in range(300)]
    for prefix in KEYS:
        compiled, python = prefixed(*prefix), draws.DrawsInPython(*prefix)
        assert [compiled.unit(label) for label in labels] == [python.unit(label) for label in labels], prefix
        for low, high in BOUNDS:
            found = [compiled.spread(low, high, label) for label in labels[:50]]
            assert found == [python.spread(low, high, label) for label in labels[:50]], (prefix, low, high)
    # A label of a subclass of str draws as its value does, as the Python encodes it.
    assert prefixed("p").unit(_Named.A) == draws.DrawsInPython("p").unit(_Named.A) == prefixed("p").unit("a")
    # Under a prefix, a draw is the keyed draw of the whole key.
    assert prefixed("gen_hard-5", 3).unit("p50") == draws.unit_in_python.__wrapped__("gen_hard-5", 3, "p50")


def test_the_kernel_refuses_under_a_prefix_what_the_python_refuses(prefixed: draws.MakeDraws) -> None:
    for make in (prefixed, draws.DrawsInPython):
        with pytest.raises(UnicodeEncodeError):
            make("ok", "\ud800")
        with pytest.raises(UnicodeEncodeError):
            make("ok").unit("\udfff")


def test_a_keyed_draw_is_in_zero_to_one_and_spread_over_it() -> None:
    found = [draws.unit("spread", index) for index in range(10_000)]
    assert all(0.0 <= value < 1.0 for value in found)
    assert min(found) < 0.001 and max(found) > 0.999
    assert len(set(found)) > 9_990
