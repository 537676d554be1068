"""Busy polling: after each reply the event loop polls its sockets for a moment before it sleeps.

A client that steps in a loop sends its next frame some 100-200 µs after our reply. If the loop
sleeps in epoll meanwhile, the process gives up its core, and the next step pays for it: the
wake-up, and a CPU whose caches other work refilled (docs/measurement.md, "Core speed: hot in a
loop, cold in a server"). So for `BUSY_POLL_US` after every reply, the loop keeps a callback ready,
which makes it poll without blocking (asyncio's and uvloop's rule for ready callbacks), as the
kernel's busy polling and haltpoll do. Each round calls `sched_yield`, so a process waiting for the
same CPU runs first. Polled time is CPU time: it counts against a container's CPU quota, and an
autoscaler on CPU reads it as load (`BUSY_POLL_US=0` sleeps at once).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# ASGI messages that end a reply: what a client waits for before it sends again.
_REPLIES = frozenset({"websocket.send", "http.response.body"})
# POSIX's; elsewhere a round polls without yielding.
_yield_cpu: Callable[[], None] = getattr(os, "sched_yield", lambda: None)


class BusyPoll:
    """Keeps the running loop polling without blocking until `window_us` after the last `arm()`."""

    __slots__ = ("_deadline", "_loop", "_window_s")

    def __init__(self, window_us: int) -> None:
        self._window_s = window_us / 1e6
        self._deadline = 0.0
        # The loop a poller runs on, None while none does. An app may be served by one loop after
        # another (a test's, a closed one's): a new loop gets a poller of its own.
        self._loop: asyncio.AbstractEventLoop | None = None

    def arm(self) -> None:
        self._deadline = time.perf_counter() + self._window_s
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            loop.call_soon(self._poll, loop)

    @property
    def polling(self) -> bool:
        return self._loop is not None

    def _poll(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self._loop:
            return  # another loop took over
        if time.perf_counter() >= self._deadline:
            self._loop = None
            return
        _yield_cpu()
        loop.call_soon(self._poll, loop)


class BusyPolling:
    """ASGI middleware: arms a `BusyPoll` on every reply sent (a WebSocket frame, an HTTP body's end)."""

    def __init__(self, app: ASGIApp, *, window_us: int) -> None:
        self.app = app
        self.poll = BusyPoll(window_us) if window_us else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        poll = self.poll
        if poll is None or scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return

        async def send_then_poll(message: Message) -> None:
            await send(message)
            if message["type"] in _REPLIES and not message.get("more_body", False):
                poll.arm()

        await self.app(scope, receive, send_then_poll)
