# The compiled kernel's interface (_minute.pyx), for type checkers.
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

def configure(state: type, constants: Mapping[str, float]) -> None: ...
def prepare(constants: tuple[Any, ...]) -> object: ...
def minute_states(
    loop: tuple[Any, ...],
    w1s: tuple[float, ...],
    w2s: tuple[float, ...],
    minute: Any,
    rps: Mapping[str, float],
    only: AbstractSet[str] | None,
    quiet: Mapping[str, Any] | None,
    touched: AbstractSet[str],
    calm: bool,
    healthy_p99: Mapping[str, float],
) -> dict[str, Any]: ...
