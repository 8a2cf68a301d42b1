"""Latency percentiles with distribution-free intervals: order statistics and the binomial distribution.

Of n independent latencies sorted x(1) <= ... <= x(n), the number below the true q-quantile is
Binomial(n, q), so [x(l), x(u)] covers it with probability P(l <= B < u) whatever the latencies'
distribution (Hahn & Meeker 1991, ch. 5; the reasoning behind MLPerf Inference's early-stopping
estimate). `percentile_interval` takes the equal-tailed ranks: each tail at most (1 - confidence) / 2,
and states the coverage they really reach (at least `confidence`, more where ranks are coarse).
A percentile has an interval only from `min_queries` latencies on: the upper end needs q^n <= tail (the
largest latency must exceed the q-quantile with that probability), e.g. 368 queries for p99 at 95 %.
Fewer: the estimate alone, its interval None and a note saying why.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
PERCENTILES = (50, 90, 99)  # MLPerf scores SingleStream by p90, MultiStream and Server by p99


def min_queries(percentile: float, confidence: float = CONFIDENCE) -> int:
    """The fewest latencies from which the `percentile`'s equal-tailed interval at `confidence` exists."""
    q, tail = _quantile(percentile), (1 - _checked(confidence)) / 2
    return max(math.ceil(math.log(tail) / math.log(max(q, 1 - q))), 1)


def _checked(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie between 0 and 1, got {confidence}")
    return confidence


def _quantile(percentile: float) -> float:
    if not 0 < percentile < 100:
        raise ValueError(f"a percentile lies between 0 and 100 (exclusive), got {percentile}")
    return percentile / 100


def binomial_cdf(n: int, q: float) -> np.ndarray:
    """P(B <= k) for k = 0 .. n, B ~ Binomial(n, q), computed in log space (exact enough for n in the millions)."""
    k = np.arange(n + 1)
    log_pmf = (math.lgamma(n + 1) - np.array([math.lgamma(i + 1) + math.lgamma(n - i + 1) for i in k])
               + k * math.log(q) + (n - k) * math.log1p(-q))
    return np.minimum(np.cumsum(np.exp(log_pmf)), 1.0)


def order_ranks(n: int, percentile: float, confidence: float = CONFIDENCE) -> tuple[int, int, float] | None:
    """(l, u, coverage): 1-based ranks of the sorted latencies bounding the `percentile` with each tail at most
    (1 - confidence) / 2, and their coverage P(l <= B < u); None when n is below min_queries."""
    q, tail = _quantile(percentile), (1 - _checked(confidence)) / 2
    if n < 1:
        return None
    cdf = binomial_cdf(n, q)
    below = np.nonzero(cdf <= tail)[0]  # P(B <= l - 1) <= tail: l - 1 is one of these
    above = np.nonzero(1 - cdf <= tail)[0]  # P(B >= u) = 1 - P(B <= u - 1) <= tail: u - 1 is one of these
    if not len(below) or not len(above) or above[0] + 1 > n:
        return None
    low, high = int(below[-1]) + 1, int(above[0]) + 1
    return low, high, float(cdf[high - 1] - cdf[low - 1])


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
    ranks = order_ranks(len(values), percentile, confidence)
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
