# The compiled kernel's interface (_noise.pyx), for type checkers.
from collections.abc import Sequence

def mix(values: Sequence[int], add: int) -> list[float]: ...
