"""The compiled noise hash (`world/_noise.pyx`) computes what the Python it stands for computes
(`draws.mix_in_python`), value for value: the same floats for the keys of every size and sign a plan
and a metric point hash, and for every offset a minute adds."""

from __future__ import annotations

import random

import pytest

from service_incident.world import draws

# Offsets a minute adds (a step's wobble, the page's, far before it) and the edges of 32 and 64 bits.
OFFSETS = [0, 1, -1, 2**32 - 1, 2**32, -(2**40) + 3, 2**70 + 11, draws.wobble_minute(-13), draws.wobble_minute(0)]
# Every value a 32-bit lane can hold at its edges, and ones past them either way.
EDGES = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, -(2**31), -(2**32) + 1, 2**64 - 1, 2**64, -(2**64)]


@pytest.fixture
def compiled() -> draws.MixNoise:
    kernel = draws.compiled_kernel()
    if kernel is None:
        pytest.skip("no compiled kernels in this install: the Python hashes (tests/test_core_kernels.py)")
    return kernel


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
