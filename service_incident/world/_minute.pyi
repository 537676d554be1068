# The compiled kernel's interface (_minute.pyx), for type checkers.
from collections.abc import Mapping
from typing import Any

def configure(state: type, constants: Mapping[str, float]) -> None: ...
def prepare(constants: tuple[Any, ...]) -> object: ...
def service_state(
    loop_constants: tuple[Any, ...],
    step: int,
    requests: float,
    w1: float,
    w2: float,
    faults: Any,
    scale: float | None,
    side: Any,
    restarting: bool,
    calm: bool,
    healthy_p99: Mapping[str, float],
    states: dict[str, Any],
) -> Any: ...
