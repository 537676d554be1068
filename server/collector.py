"""The garbage collector's policy in the processes a server runs: the one `server` starts, each of its
`--workers`, each generation process. Not in an app built to be served otherwise (`create_app`): the
process is then its host's.

A worker holds every session's episode: a thousand sessions keep some 350,000 objects the collector
tracks, and CPython's default thresholds scan them all about once a second, for 100-200 ms during
which no session is answered. The core leaves no reference cycles behind it, so those scans find
nothing of its; what they still find is the serving layers' (asyncio's, the sockets'). So a process,
once started, freezes what it holds (modules, routes, the core's tables: never scanned again), and
scans its oldest objects rarely.

Its young objects are collected on a clock. CPython starts a young collection when allocations
outnumber deallocations by its first threshold, and a worker's deallocations are mostly of old
objects (an episode ended, its session reset): they cancel the new objects out, so while sessions
turn over no young collection comes, and the young generation grows to hundreds of thousands of
objects that the one collection that finally comes scans at once, for 300-500 ms. Collected every
`YOUNG_PERIOD_S` instead, it holds what that long brought. The middle generation is collected with
it: what outlived one period is scanned once and goes to the oldest generation. A session's objects
outlive their call by a second (until its next step replaces them), so scanning them once more a
tenth of a second later, as CPython's middle generation would, frees nothing their counts do not,
and costs more than the young collections themselves, in pauses five times as long.
docs/measurement.md has the figures.
"""

from __future__ import annotations

import gc
import threading

# CPython's defaults are (700, 10, 10). Between the clock's collections, a burst of allocations starts a
# young collection, and every fifth of those a middle one; the oldest generation is collected after
# 5,000 middle collections, 100 s of the clock's (and only once a quarter more objects reached it since
# the last).
THRESHOLDS = (2_000, 5, 5_000)
# How often the young objects are collected whatever the counts say: a worker answering a thousand
# calls a second makes about a thousand in this long that outlive their call.
YOUNG_PERIOD_S = 0.02


class YoungCollections:
    """A daemon thread collecting the young and the middle generations every `period` seconds."""

    def __init__(self, period: float = YOUNG_PERIOD_S) -> None:
        self._period = period
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="young-collections", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._period):
            tick()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()


def tick() -> None:
    """One tick of the clock: the young and the middle generations collected together, so that what
    outlived the period is scanned once and left to the oldest generation."""
    gc.collect(1)


_running: YoungCollections | None = None


def settle() -> None:
    """The policy, from the moment a process has started."""
    global _running
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
    if _running is None:
        _running = YoungCollections()


def unsettle() -> None:
    """CPython's own schedule again, the clock stopped (what was frozen stays frozen)."""
    global _running
    if _running is not None:
        _running.stop()
        _running = None
