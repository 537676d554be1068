"""Fair turns on the event loop for sessions that pipeline.

Every session yields to the event loop after each frame, so one that pipelines thousands of frames
cannot starve the rest. That alone is round robin: with fifty sessions pipelining, everyone else
waits for fifty frames at every turn. So a session that still has frames queued after answering one
(it is pipelining) waits for a turn instead, and such sessions get one frame between them per loop
iteration: a neighbour that sends one frame and waits for its answer is served in the next
iteration, behind at most one pipelined frame, and the pipelining sessions keep the server busy.

How many frames a socket has queued is the server's to know: `transport.WebSocketProtocol` puts it
in the scope (`BACKLOG_EXTENSION`). Served by a plain uvicorn, every session simply yields.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from starlette.types import Scope

BACKLOG_EXTENSION = "service_incident.backlog"


def backlog(scope: Scope) -> Callable[[], int] | None:
    """The count of frames received and not yet read on this socket, if the server tells it."""
    return scope.get("extensions", {}).get(BACKLOG_EXTENSION)


class FairTurns:
    def __init__(self) -> None:
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._releasing = False

    async def after_frame(self, queued: int) -> None:
        """Yield after answering a frame: a plain yield, or, with `queued` frames still waiting, a turn."""
        if not queued:
            # asyncio's own yield: the loop is asyncio's (turns are its futures), and anyio's checkpoint
            # would look the backend up first, on every frame.
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[None] = loop.create_future()
        self._waiting.append(turn)
        if not self._releasing:
            self._releasing = True
            loop.call_soon(self._release, loop)
        await turn

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        # One waiting session per loop iteration; the next is released by the next iteration.
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():  # a session cancelled while it waited has gone
                turn.set_result(None)
                break
        if self._waiting:
            loop.call_soon(self._release, loop)
        else:
            self._releasing = False
