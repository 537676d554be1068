"""The server's log configuration: uvicorn's own, with client faults rate-limited.

A client's mistake (a 4xx answer, a request uvicorn cannot parse) costs the client one line and the
server one line of log. Repeated in a loop, such lines would fill the disk at line rate, so each kind
of them passes at most `burst` times per `window_s`; the next one that passes says how many were
left out. The server's own faults (5xx, errors, tracebacks) always pass.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from typing import Any

from uvicorn.config import LOGGING_CONFIG

BURST = 20
WINDOW_S = 10.0
_ACCESS_STATUS = 4  # uvicorn's access record args: (client, method, path, http version, status)


class ClientFaults(logging.Filter):
    """Passes each kind of client fault `burst` times per `window_s`, and everything else always."""

    def __init__(self, burst: int = BURST, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self.clock = clock
        self._windows: dict[tuple[str, object], tuple[float, int]] = {}  # kind -> (window start, lines seen)

    def filter(self, record: logging.LogRecord) -> bool:
        kind = _fault_kind(record)
        if kind is None:
            return True
        now = self.clock()
        start, seen = self._windows.get(kind, (now, 0))
        if now - start >= self.window_s:
            if seen > self.burst:
                record.msg = f"[{seen - self.burst} more like this left out in {now - start:.0f} s] {record.msg}"
            start, seen = now, 0
        self._windows[kind] = (start, seen + 1)
        return seen < self.burst


def _fault_kind(record: logging.LogRecord) -> tuple[str, object] | None:
    """What makes a record one of a kind of client fault; None when it is not one."""
    if record.name == "uvicorn.access":
        args = record.args
        status = args[_ACCESS_STATUS] if isinstance(args, tuple) and len(args) > _ACCESS_STATUS else None
        return (record.name, status) if isinstance(status, int) and 400 <= status < 500 else None
    # uvicorn warns, without a traceback, only of requests it could not take (unparsable, bad upgrade).
    if record.name == "uvicorn.error" and record.levelno == logging.WARNING and not record.exc_info:
        return (record.name, record.msg)
    return None


def logging_config() -> dict[str, Any]:
    """uvicorn's LOGGING_CONFIG with the client-fault filter on its handlers (the error log's and the
    access log's). On the handlers, not the loggers: each configuration replaces the handlers, but
    would add a filter to loggers beside the ones already there."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"client_faults": {"()": ClientFaults}}
    for handler in config["handlers"].values():
        handler["filters"] = ["client_faults"]
    return config
