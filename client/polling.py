"""Busy polling: an event loop that polls its sockets for a moment before it sleeps.

A reply or a request a few hundred microseconds away is met sooner by a loop that keeps polling
than by one that sleeps in epoll: sleeping gives up the core, and the process then pays for the
wake-up and for caches that other work refilled (docs/measurement.md, "Core speed: hot in a loop,
cold in a server"). While a callback is ready, asyncio's and uvloop's loops poll with a zero
timeout, so `poll_for` keeps one ready, as the kernel's busy polling and haltpoll do. Each round
calls `sched_yield`, so a process waiting for the same CPU runs first. Polled time is CPU time: it
counts against a container's quota, and an autoscaler on CPU reads it as load.

The server polls after each reply (`server/busy_poll.py`), the client after each request
(`EnvClient(busy_poll_us=...)`). One poller per loop, however many sockets arm it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from weakref import WeakKeyDictionary

# Each polling loop's deadline. Weak: a loop closed mid-window takes its entry with it.
_deadlines: WeakKeyDictionary[asyncio.AbstractEventLoop, float] = WeakKeyDictionary()
# POSIX's; elsewhere a round polls without yielding.
_yield_cpu: Callable[[], None] = getattr(os, "sched_yield", lambda: None)


def poll_for(window_s: float) -> None:
    """Keep the running loop polling without blocking for at least `window_s` from now."""
    loop = asyncio.get_running_loop()
    deadline = time.perf_counter() + window_s
    current = _deadlines.get(loop)
    if current is None:
        _deadlines[loop] = deadline
        loop.call_soon(_poll, loop)
    elif deadline > current:
        _deadlines[loop] = deadline


def polling(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether `loop` is within a window."""
    return loop in _deadlines


def _poll(loop: asyncio.AbstractEventLoop) -> None:
    if time.perf_counter() >= _deadlines[loop]:
        del _deadlines[loop]
        return
    _yield_cpu()
    loop.call_soon(_poll, loop)
