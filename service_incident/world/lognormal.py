"""Latency as a lognormal distribution given by its median and p99: how the world times calls out
and how traces draw span durations."""

from __future__ import annotations

import math

# The standard normal's 99th percentile: the p99 of a lognormal is exp(Z99 * sigma) times its median.
Z99 = 2.326
SQRT2 = math.sqrt(2.0)


def sigma(p50: float, p99: float) -> float:
    """The log-space spread of a lognormal latency with this median and p99 (a p99 at least 1% above
    the median, so the spread is never zero)."""
    return max(math.log(max(p99, p50 * 1.01) / p50) / Z99, 1e-6)


def exceed(p50: float, p99: float, deadline: float) -> float:
    """The share of calls slower than a deadline, for a lognormal latency with this median and p99."""
    if p50 <= 0.0:
        return 0.0
    return 0.5 * math.erfc(math.log(deadline / p50) / (sigma(p50, p99) * SQRT2))
