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
`YOUNG_PERIOD_S` instead, it holds what that long brought; the middle generation, collected every
few of those, what a tenth of a second brought. docs/measurement.md has the figures.
"""

from __future__ import annotations

import gc
import threading

# CPython's defaults are (700, 10, 10). The middle generation is collected every 5 young collections,
# the oldest every 1,000 middle ones (and only once a quarter more objects reached it since the last).
THRESHOLDS = (2_000, 5, 1_000)
# How often the young objects are collected whatever the counts say: a worker answering a thousand
# calls a second makes about a thousand in this long that outlive their call.
YOUNG_PERIOD_S = 0.02


class YoungCollections:
    """A daemon thread collecting the young generation every `period` seconds, and the middle one
    as often as CPython's thresholds would: every `THRESHOLDS[1]` young collections."""

    def __init__(self, period: float = YOUNG_PERIOD_S) -> None:
        self._period = period
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="young-collections", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._period):
            gc.collect(1 if gc.get_count()[1] >= THRESHOLDS[1] else 0)

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()


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
