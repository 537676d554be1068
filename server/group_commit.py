"""Group commit: the writes that many sessions make at about the same time go to a store together.

Every save is awaited before its reply is sent (replay.py), so a store that wrote each save on its own
would pay a transaction (SQLite) or a round trip (Redis) per step. Here a write joins a queue. While
one batch is being written, the writes that arrive meanwhile wait. The next batch takes all of them,
in the order they came, up to `limit`. So under load a batch grows to about the number of sessions
stepping at once, and a write made alone goes at once, in a batch of one, within the loop's next turn.

A writer learns its own result, or the batch's error, only once the whole batch is written: what
the store acknowledges is what a reply may rely on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

Write = TypeVar("Write")
Result = TypeVar("Result")

# A batch bigger than a server's sessions gains nothing more, and one transaction stays short.
BATCH_LIMIT = 512


class GroupCommit(Generic[Write, Result]):
    """Writes `write_batch` many at a time: it takes a batch and gives one result per write, in order."""

    def __init__(self, write_batch: Callable[[list[Write]], Awaitable[list[Result]]], limit: int = BATCH_LIMIT) -> None:
        self._write_batch = write_batch
        self._limit = limit
        self._queue: list[tuple[Write, asyncio.Future[Result]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def write(self, item: Write) -> Result:
        """`item` written with the others of its batch; its result once the batch is in the store."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Result] = loop.create_future()
        self._queue.append((item, done))
        if self._writer is None:
            self._writer = loop.create_task(self._write_queued())
        # A caller cancelled while it waits leaves its write in the batch: it may already be written.
        return await done

    async def _write_queued(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[: self._limit], self._queue[self._limit :]
                try:
                    results = await self._write_batch([item for item, _ in batch])
                except asyncio.CancelledError:
                    for _, done in batch:
                        done.cancel()
                    raise
                except Exception as error:
                    for _, done in batch:
                        if not done.done():
                            done.set_exception(error)
                    continue
                for (_, done), result in zip(batch, results, strict=True):
                    if not done.done():
                        done.set_result(result)
        finally:
            self._writer = None
            left, self._queue = self._queue, []
            for _, done in left:  # only when cancelled: nothing is left to write them
                done.cancel()

    async def aclose(self) -> None:
        """Wait until every write queued so far is written."""
        if self._writer is not None:
            await asyncio.wait([self._writer])
