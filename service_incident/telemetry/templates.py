"""The template language log lines and reports are written in, the log levels, and the keyed draws
every rendering takes its randomness from."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from functools import cache
from typing import Protocol

from ..world import unit

LEVELS = ("CRIT", "PANIC", "FATAL", "ERROR", "WARN", "LOG", "INFO")
# The levels a line that reports trouble is written at, loudest first.
LOUD_LEVELS = LEVELS[:5]

_FIELD = re.compile(r"\{(\w+)(?::([^{}]*))?\}")


class RandomSource(Protocol):
    """What a template draws from: an rng, or the draws it took earlier (`replay`)."""

    def random(self) -> float: ...

    def getrandbits(self, k: int, /) -> int: ...


class Rng(RandomSource, Protocol):
    """What a view draws from: the rng its key seeds (`rng_for`)."""

    def uniform(self, a: float, b: float, /) -> float: ...


# An rng seeded from a text key, drawing what `random.Random(key)` draws.
Keyed = Callable[[str], Rng]


_Piece = Callable[[RandomSource, dict[str, str]], str]
# The fields that draw from the rng (what each takes: `draw_bits`, which must agree with `_piece`).
_DRAWING = ("int", "float", "hex", "pick")
# A template's draws, taken in `fill`'s order without writing its text (`take`), to write it later (`replay`).
Taken = tuple[float | int, ...]


def level(line: str) -> str:
    """The level word of a rendered log line, or "" for a line without one."""
    fields = line.split(maxsplit=4)
    return fields[3] if len(fields) > 3 else ""


def compiled_kernel() -> Keyed | None:
    """`random.Random(key)` compiled (setup.py), at a little over half its cost, if this install has it:
    a view seeds an rng per look, which costs more than most of its draws."""
    try:
        from ._keyed import KeyedRandom
    except ImportError:  # an install without a C compiler: Python's own
        return None
    return KeyedRandom


keyed_in_python: Keyed = random.Random
keyed: Keyed = compiled_kernel() or keyed_in_python


def rng_for(seed: int, *key: object) -> Rng:
    return keyed(seed_text(seed, *key))


def seed_text(seed: int, *key: object) -> str:
    """The text a keyed rng is seeded from: an episode's seed and what the draws are for."""
    return ":".join(map(str, (seed, *key)))


def pick(rng: RandomSource, options: tuple[str, ...] | list[str]) -> str:
    return options[int(rng.random() * len(options))]


def pick_fixed(options: tuple[str, ...], *key: object) -> str:
    return options[int(unit(*key) * len(options))]


def hexkey(*key: object) -> str:
    """Six hex digits drawn from a key: the stuff of pod names and replica-set hashes."""
    return hex_digits(unit(*key))


def hex_digits(draw: float) -> str:
    """Six hex digits from a draw in [0, 1)."""
    return f"{int(draw * 0xFFFFFF):06x}"


def _literal(text: str) -> _Piece:
    return lambda _rng, _context: text


def _piece(name: str, arg: str | None) -> _Piece:
    if name == "int":
        low, high = map(int, (arg or "").split(":"))
        return lambda rng, _: str(low + int(rng.random() * (high - low + 1)))
    if name == "float":
        low_f, high_f = map(float, (arg or "").split(":"))
        return lambda rng, _: f"{low_f + rng.random() * (high_f - low_f):.1f}"
    if name == "hex":
        digits = int(arg or "0")
        return lambda rng, _: f"{rng.getrandbits(4 * digits):0{digits}x}"
    if name == "pick":
        options = tuple((arg or "").split("|"))
        return lambda rng, _: pick(rng, options)
    if name == "endpoint":
        return lambda rng, context: fill(context[name], rng, context)
    return lambda _, context: context[name]


@cache
def _compile(template: str) -> tuple[_Piece, ...]:
    """A template cut once into literal text and the fields to draw: rendering is then a join."""
    pieces: list[_Piece] = []
    position = 0
    for match in _FIELD.finditer(template):
        literal = template[position : match.start()]
        if literal:
            pieces.append(_literal(literal))
        pieces.append(_piece(match.group(1), match.group(2)))
        position = match.end()
    if template[position:]:
        pieces.append(_literal(template[position:]))
    return tuple(pieces)


def fill(template: str, rng: RandomSource, context: dict[str, str]) -> str:
    """Expand a template: {int:a:b}, {float:a:b}, {hex:n}, {pick:a|b} and named context fields."""
    if "{" not in template:
        return template
    return "".join([piece(rng, context) for piece in _compile(template)])


# What `fill` draws for a template, field by field (`draw_bits`).
Bits = tuple[int | None, ...]


@cache
def draw_bits(template: str) -> Bits:
    """What `fill` draws for a template, field by field: the bits of a {hex} field, None for a field that
    takes one `random()`. Named fields draw nothing, unless their text does ({endpoint})."""
    return tuple(
        4 * int(match.group(2) or "0") if match.group(1) == "hex" else None
        for match in _FIELD.finditer(template)
        if match.group(1) in _DRAWING
    )


def take(template: str, rng: random.Random) -> Taken:
    """The draws `fill` takes for a template with no named fields, without writing its text: what a
    rendering that may never show the text takes, so its later draws are the same (`replay` writes it)."""
    random_, bits_ = rng.random, rng.getrandbits
    return tuple([random_() if bits is None else bits_(bits) for bits in draw_bits(template)])


class _Replay:
    """Hands `fill` the draws `take` took, in order, as its rng."""

    __slots__ = ("_next",)

    def __init__(self, taken: Taken) -> None:
        self._next: Callable[[], float | int] = iter(taken).__next__

    def random(self) -> float:
        return self._next()

    def getrandbits(self, k: int, /) -> int:
        return int(self._next())


def replay(template: str, taken: Taken) -> str:
    """A template with no named fields as `fill` writes it from the draws `take` took."""
    return fill(template, _Replay(taken), {})
