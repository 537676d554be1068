# The compiled kernel's interface (_spans.pyx), for type checkers.
from collections.abc import Callable
from typing import Any

def draw_requests(
    key: str,
    service: str,
    count: int,
    source_of: Callable[[str], Any],
    request: Callable[..., Any],
    max_depth: int,
    partner_share: float,
    pending: object,
) -> list[Any]: ...
