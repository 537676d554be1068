"""The garbage collector's policy in the processes a server runs: the one `server` starts, each of its
`--workers`, each generation process. Not in an app built to be served otherwise (`create_app`): the
process is then its host's.

A worker holds every session's episode: a thousand sessions keep some 350,000 objects the collector
tracks, and CPython's default thresholds scan them all about once a second, for 100-200 ms during
which no session is answered. The core leaves no reference cycles behind it, so those scans find
nothing of its; what they still find is the serving layers' (asyncio's, the sockets'). So a process,
once started, freezes what it holds (modules, routes, the core's tables: never scanned again), and
collects its young objects less often, its older ones rarely. docs/measurement.md has the figures.
"""

from __future__ import annotations

import gc

# CPython's defaults are (700, 10, 10).
THRESHOLDS = (2_000, 50, 100)


def settle() -> None:
    """The policy, from the moment a process has started."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
