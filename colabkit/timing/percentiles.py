"""Latency percentiles with distribution-free intervals: order statistics and the binomial distribution.

Of n independent latencies sorted x(1) <= ... <= x(n), the number below the true q-quantile is
Binomial(n, q), so [x(l), x(u)] covers it with probability P(l <= B < u) whatever the latencies'
distribution (the reasoning behind MLPerf Inference's early-stopping estimate). The ranks come
from colabkit.statistics.order_ranks, the routine the medians over runs use: equal-tailed, each tail at most
(1 - confidence) / 2, and the coverage they really reach (at least `confidence`, more where ranks are coarse).
A percentile has an interval only from `min_queries` latencies on: the upper end needs q^n <= tail (the
largest latency must exceed the q-quantile with that probability), e.g. 368 queries for p99 at 95 %.
Fewer: the estimate alone, its interval None and a note saying why.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from colabkit.statistics import CONFIDENCE, order_ranks

PERCENTILES = (50, 90, 99)  # MLPerf scores SingleStream by p90, MultiStream and Server by p99


def min_queries(percentile: float, confidence: float = CONFIDENCE) -> int:
    """The fewest latencies from which the `percentile`'s equal-tailed interval at `confidence` exists."""
    if not 0 < percentile < 100 or not 0 < confidence < 1:
        raise ValueError(f"need 0 < percentile < 100 and 0 < confidence < 1, got {percentile} and {confidence}")
    q, tail = percentile / 100, (1 - confidence) / 2
    return max(math.ceil(math.log(tail) / math.log(max(q, 1 - q))), 1)


@dataclass(frozen=True)
class Percentile:
    """One latency percentile: the estimate (NumPy's linear interpolation), the order-statistic interval
    (None below `min_queries`), the coverage those ranks reach and how many latencies stand behind it."""

    percentile: float
    estimate: float
    low: float | None
    high: float | None
    coverage: float | None
    n: int
    min_queries: int

    @property
    def note(self) -> str:
        if self.low is not None:
            return ""
        return (f"p{self.percentile:g}: {self.n} queries give no {100 * CONFIDENCE:g} % interval "
                f"(it takes {self.min_queries})")


def percentile_interval(samples: Sequence[float] | np.ndarray, percentile: float,
                        confidence: float = CONFIDENCE) -> Percentile:
    """The `percentile` of `samples` with its distribution-free interval at `confidence` (module docstring)."""
    values = np.sort(np.asarray(list(samples), dtype=float))
    if not len(values) or not np.isfinite(values).all():
        raise ValueError("latency percentiles need at least one latency, every one finite")
    estimate = float(np.percentile(values, percentile))
    ranks = order_ranks(len(values), percentile / 100, confidence)
    needed = min_queries(percentile, confidence)
    if ranks is None:
        return Percentile(percentile, estimate, None, None, None, len(values), needed)
    low, high, coverage = ranks
    return Percentile(percentile, estimate, float(values[low - 1]), float(values[high - 1]), coverage, len(values),
                      needed)


def latency_percentiles(samples: Iterable[float], percentiles: Sequence[float] = PERCENTILES,
                        confidence: float = CONFIDENCE) -> list[Percentile]:
    """Each of `percentiles` of `samples` with its interval."""
    values = list(samples)
    return [percentile_interval(values, percentile, confidence) for percentile in percentiles]
