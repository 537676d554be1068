# The compiled kernel's interface (_spans.pyx), for type checkers.
import random
from collections.abc import Callable
from typing import Any

def draw_requests(
    rng: random.Random,
    service: str,
    count: int,
    source_of: Callable[[str], Any],
    draw_bits: Callable[[str], tuple[int | None, ...]],
    request: Callable[..., Any],
    max_depth: int,
    partner_share: float,
    pending: object,
) -> list[Any]: ...
