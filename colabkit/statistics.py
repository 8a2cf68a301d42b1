"""Statistics of measurements: summaries, confidence intervals of medians and of ratios of medians, and
the verdict on a comparison. Numbers in, numbers out: nothing here knows records, files or pandas.

The unit of evidence is a *run* (one notebook in its own kernel), not an epoch: epochs of one run share
its process, its memory layout and the state of its host, so they are not independent samples of what
another run would measure (Kalibera & Jones, "Rigorous Benchmarking in Reasonable Time", ISMM 2013).
A headline's uncertainty is therefore taken over runs:

* `median_ci(samples)`: the median of the runs and a distribution-free interval of it between two of
  the runs' order statistics (the k-th smallest and the k-th largest, k the deepest that keeps 95 %;
  its level 1 - 2 P(B <= k - 1), B ~ Binomial(n, 1/2), is exact for any continuous measure).
* `ratio_ci(numerator, denominator)`: the ratio of the two medians and an interval of it that holds
  whatever the two sides' distributions and run counts: each side's own order-statistic interval of its
  median (as `median_ci` builds it), end to end (the numerator's lower bound over the denominator's
  upper bound, the numerator's upper over the denominator's lower). Its level is the lower of the two
  sides' levels (75 % when a side has 3 runs): for every pair of continuous distributions it covers at
  least that often, and exactly that often where one side's scatter dominates (docs/statistics.md derives it;
  the square-and-add of MOVER, Zou & Donner 2008, fell short of it where a side's runs fall in two
  clusters). Runs that are paired (a figure and its baseline measured in the same run) give one ratio
  per run: take `median_ci` of those.
* `verdict(interval)`: faster or slower when the whole interval lies beyond the tolerance band
  [1 / (1 + TOLERANCE), 1 + TOLERANCE] (criterion.rs's noise threshold); "no difference resolved"
  when it includes 1 or does not leave the band; "too few runs" when there is no interval.
  `verdict_text` says it with the interval's level and runs: "faster (75 %, n = 3)".

No resampling: the same runs always give the same interval. Every Interval carries the level it
really reaches (`confidence`, printed by `label`: "75 %, n = 3"). Below MIN_RUNS (3) runs there is no
interval; from 3 to 5 runs a median's interval is the runs' range, which covers the true median with
probability 1 - 2^(1-n) (75 % at n = 3, 87.5 % at 4, 93.75 % at 5) and no interval inside the range can
do better; from 6 runs on (6 a side for a ratio) it reaches 95 %. tests/test_interval_coverage.py
checks every stated level by simulation (docs/statistics.md gives the figures).
"""

from __future__ import annotations

import itertools
import math
import statistics as _pystats
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any, Literal

import numpy as np

CONFIDENCE = 0.95
MIN_RUNS = 3  # fewer runs than this: no interval
EXACT_95_RUNS = 6  # from this many runs on, a median's interval reaches 95 % (the range of n runs: 1 - 2^(1-n))
TOLERANCE = 0.02  # a ratio whose interval stays within [1/1.02, 1.02] is no difference worth a word
MEDIAN_METHOD = "order statistics of the runs (binomial level)"
RATIO_METHOD = "each side's median interval, end to end (numerator's low over denominator's high, and back)"


def finite(values: Iterable[Any]) -> list[float]:
    """The finite numbers among `values` as floats (None, NaN, infinities, booleans and text left out)."""
    numbers = []
    for value in values:
        if isinstance(value, bool) or value is None:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            numbers.append(number)
    return numbers


def summarize(samples: Iterable[float]) -> dict[str, float | int | None]:
    """min / median / mean / std (sample, n-1) / n of a list of numbers (durations in seconds, say)."""
    values = [float(sample) for sample in samples]
    if not values:
        return {"n": 0, "min": None, "median": None, "mean": None, "std": None}
    return {
        "n": len(values),
        "min": min(values),
        "median": _pystats.median(values),
        "mean": _pystats.fmean(values),
        "std": _pystats.stdev(values) if len(values) > 1 else 0.0,
    }


def mean_std(values: list[float]) -> tuple[float, float]:
    """(mean, population std, ddof=0) of a non-empty list: NumPy's defaults, as Kimm, Paik & Kimm 2021
    printed their scores. ValueError when the list is empty."""
    if not values:
        raise ValueError("no values to summarise")
    array = np.asarray(values, dtype=float)
    return float(array.mean()), float(array.std())


def cv(values: Iterable[Any]) -> float | None:
    """Coefficient of variation: sample std (n-1) over the mean, of the finite values; None with fewer
    than two values or a mean of 0."""
    numbers = finite(values)
    if len(numbers) < 2:
        return None
    mean = _pystats.fmean(numbers)
    return _pystats.stdev(numbers) / abs(mean) if mean else None


def percent(level: float) -> str:
    """An interval's level for print: '75 %', '93.75 %', '96.9 %' (at most 3 significant digits, kept
    below the truth: 0.9785 is '97.8 %', never '97.9 %')."""
    value = math.floor(1000 * level + 1e-9) / 10 if level < 0.99 else math.floor(10000 * level + 1e-9) / 100
    return f"{value:g} %"


@dataclass(frozen=True)
class Interval:
    """An estimate (a median, or a ratio of medians) with its confidence interval.

    `low` and `high` are None when there were too few runs (`note` says so); `n` is the number of runs
    behind it (for a ratio, those of the side with fewer; `sides` then gives both sides' runs,
    numerator first); `confidence` the level the interval reaches (for a median exactly, for runs of a
    continuous measure; for a ratio at least, whatever the two sides' spreads), which is below the
    level asked for where the runs are too few for it, and `note` then says so; `method` how it was
    made (MEDIAN_METHOD or RATIO_METHOD)."""

    estimate: float | None
    low: float | None
    high: float | None
    n: int
    confidence: float = CONFIDENCE
    note: str = ""
    sides: tuple[int, int] | None = None
    method: str = ""

    @property
    def resolved(self) -> bool:
        """Whether there is an interval at all."""
        return self.low is not None and self.high is not None

    @property
    def half_width(self) -> float | None:
        """Half the interval's width relative to the estimate (0.03: +/- 3 %); None without one."""
        if not self.resolved or not self.estimate:
            return None
        return (float(self.high) - float(self.low)) / 2 / abs(float(self.estimate))  # type: ignore[arg-type]

    @property
    def runs(self) -> str:
        """The runs behind it: '3'; for a ratio whose sides differ, both: '3 and 6' (numerator first)."""
        return f"{self.sides[0]} and {self.sides[1]}" if self.sides and self.sides[0] != self.sides[1] else f"{self.n}"

    @property
    def label(self) -> str:
        """The level it reaches and the runs behind it, as every table and sentence states them:
        '75 %, n = 3', '75 %, n = 3 and 6' (a ratio of sides with different runs); 'no interval, n = 2'
        without one."""
        return f"{percent(self.confidence)}, n = {self.runs}" if self.resolved else f"no interval, n = {self.runs}"


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie between 0 and 1, got {confidence}")


@lru_cache(maxsize=256)
def binomial_cdf(n: int, quantile: float) -> tuple[float, ...]:
    """P(B <= k) for k = 0 .. n, B ~ Binomial(n, quantile): the count of n independent samples below the true
    `quantile`. A median's of up to 1,000 samples from exact integers, each probability correctly rounded (its
    levels exact: 75 % at n = 3); any other in log space (exact enough for millions of samples)."""
    if quantile == 0.5 and n <= 1000:
        return tuple(count / 2**n for count in itertools.accumulate(math.comb(n, k) for k in range(n + 1)))
    k = np.arange(n + 1)
    log_pmf = (math.lgamma(n + 1) - np.array([math.lgamma(i + 1) + math.lgamma(n - i + 1) for i in k])
               + k * math.log(quantile) + (n - k) * math.log1p(-quantile))
    return tuple(np.minimum(np.cumsum(np.exp(log_pmf)), 1.0).tolist())


def order_ranks(n: int, quantile: float = 0.5, confidence: float = CONFIDENCE, *,
                or_widest: bool = False) -> tuple[int, int, float] | None:
    """The suite's one order-statistic interval, for a median over runs as for a latency percentile: the 1-based ranks
    (l, u) of n sorted independent samples that bound the true `quantile`, each tail at most (1 - confidence) / 2
    (P(B <= l - 1), P(B >= u); B ~ Binomial(n, quantile)), the tightest such, and the coverage P(l <= B < u) they
    reach (Hahn & Meeker 1991, ch. 5). None for too few samples; with `or_widest`, (1, n) and its lower coverage."""
    _check_confidence(confidence)
    if not 0 < quantile < 1:
        raise ValueError(f"a quantile lies between 0 and 1 (exclusive), got {quantile}")
    if n < 1:
        return None
    cdf, tail = binomial_cdf(n, quantile), (1 - confidence) / 2
    lows = [k + 1 for k in range(n) if cdf[k] <= tail]
    highs = [k + 1 for k in range(n) if 1 - cdf[k] <= tail]
    if lows and highs:
        return lows[-1], highs[0], cdf[highs[0] - 1] - cdf[lows[-1] - 1]
    return (1, n, cdf[n - 1] - cdf[0]) if or_widest else None


def min_samples(quantile: float, confidence: float = CONFIDENCE) -> int:
    """The fewest samples giving the `quantile` an equal-tailed interval: max(q, 1 - q)^n <= the tail (368 for p99)."""
    _check_confidence(confidence)
    return max(math.ceil(math.log((1 - confidence) / 2) / math.log(max(quantile, 1 - quantile))), 1)


def quantile_ci(samples: Iterable[float], quantile: float, confidence: float = CONFIDENCE) -> Interval:
    """The `quantile` of `samples` (NumPy's linear interpolation) and its interval (`order_ranks`, the coverage reached
    in `confidence`); below `min_samples` the estimate alone, with a note. ValueError on no or a non-finite sample."""
    values = np.sort(np.asarray(list(samples), dtype=float))
    if not len(values) or not np.isfinite(values).all():
        raise ValueError("a quantile's interval needs at least one sample, every one finite")
    estimate, ranks = float(np.quantile(values, quantile)), order_ranks(len(values), quantile, confidence)
    if ranks is None:
        return Interval(estimate, None, None, len(values), confidence, note=f"{len(values)} "
                        f"samples give no {percent(confidence)} interval (it takes {min_samples(quantile, confidence)})")
    return Interval(estimate, float(values[ranks[0] - 1]), float(values[ranks[1] - 1]), len(values), ranks[2])


def level_note(n: int, level: float, confidence: float = CONFIDENCE) -> str:
    """What an interval from `n` runs promises, in words ('' when it reaches `confidence`)."""
    if n < MIN_RUNS:
        return f"n = {n}: too few runs for an interval (it takes {MIN_RUNS} or more)"
    if level < confidence - 1e-9:
        return f"n = {n}: a {percent(level)} interval, not {percent(confidence)}: too few runs to reach it"
    return ""


def median_ci(samples: Iterable[Any], confidence: float = CONFIDENCE) -> Interval:
    """The median of the finite `samples` (one per run) and its distribution-free interval (`order_ranks` at
    quantile 1/2: from the k-th smallest to the k-th largest run, its exact level 1 - 2 P(B <= k - 1), B ~
    Binomial(n, 1/2)); with too few runs to reach `confidence`, the runs' range at the level it does reach (75 %
    at n = 3), stated in `confidence` and `note`. No interval below MIN_RUNS."""
    _check_confidence(confidence)
    values = np.sort(np.asarray(finite(samples), dtype=float))
    n = len(values)
    if n == 0:
        return Interval(None, None, None, 0, confidence, level_note(0, 0.0, confidence))
    median = float(np.median(values))
    if n < MIN_RUNS:
        return Interval(median, None, None, n, confidence, level_note(n, 0.0, confidence))
    low, high, level = order_ranks(n, 0.5, confidence, or_widest=True)  # type: ignore[misc]
    return Interval(median, float(values[low - 1]), float(values[high - 1]), n, level,
                    level_note(n, level, confidence), method=MEDIAN_METHOD)


@lru_cache(maxsize=1024)
def ratio_depths(n: int, m: int, confidence: float = CONFIDENCE) -> tuple[int, int, float]:
    """The order statistics a ratio's interval takes from sides of `n` and `m` runs, and its level:
    (i, j, level), each side's interval of its median running from its i-th (j-th) smallest to its i-th
    (j-th) largest run. The level is the lower of the two sides' own levels at `confidence` (what
    `median_ci` reaches with their runs: 75 % with 3); each side then takes the deepest interval that
    keeps that level, so the side with more runs does not widen the ratio's interval beyond need."""
    _check_confidence(confidence)
    if min(n, m) < MIN_RUNS:
        raise ValueError(f"a ratio's interval needs {MIN_RUNS} or more runs a side, got {n} and {m}")
    level = min(order_ranks(runs, 0.5, confidence, or_widest=True)[2] for runs in (n, m))  # type: ignore[index]
    i, j = (order_ranks(runs, 0.5, level - 1e-12)[0] for runs in (n, m))  # type: ignore[index]
    return i, j, level


def log_ratio_bounds(numerator: Any, denominator: Any,
                     confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The logarithm of median(numerator) / median(denominator) and the bounds of its interval, for
    each row of two arrays of positive runs (sets x n, sets x m; one row each for one comparison), and
    the level those intervals reach (the same for every row: it depends on n and m only).

    Each side's median has its distribution-free interval between two of its order statistics
    (`ratio_depths`: the i-th smallest to the i-th largest of the numerator's n runs, the j-th of the
    denominator's m); the ratio's interval joins them end to end: from the numerator's i-th smallest over
    the denominator's j-th largest to the numerator's i-th largest over the denominator's j-th smallest.
    It misses the true ratio only when a side's own interval misses its median, and, for any two
    continuous distributions, with probability at most the larger of the two sides' own miss rates,
    which it reaches where one side's scatter dominates (the proof: docs/statistics.md; a dynamic
    programme over every pair of distributions and simulations: tests/test_interval_coverage.py). So
    `level` is the lower of the two sides' median levels. ValueError on values that are not positive,
    or fewer than MIN_RUNS runs a side."""
    top, bottom = (np.sort(np.atleast_2d(np.asarray(values, dtype=float)), axis=-1)
                   for values in (numerator, denominator))
    if not ((top > 0).all() and (bottom > 0).all()):
        raise ValueError("a ratio's interval needs positive values on both sides")
    n, m = top.shape[-1], bottom.shape[-1]
    i, j, level = ratio_depths(n, m, confidence)
    log_top, log_bottom = np.log(top), np.log(bottom)
    estimate = np.log(np.median(top, axis=-1)) - np.log(np.median(bottom, axis=-1))
    return estimate, log_top[..., i - 1] - log_bottom[..., m - j], log_top[..., n - i] - log_bottom[..., j - 1], level


def ratio_ci(numerator: Iterable[Any], denominator: Iterable[Any], confidence: float = CONFIDENCE) -> Interval:
    """median(numerator) / median(denominator) and a distribution-free interval of it, the runs of the
    two sides unpaired and free to scatter differently (`log_ratio_bounds`: each side's order-statistic
    interval of its median, end to end). Its level, stated in `confidence`, is the lower
    of the two sides' median levels (75 % with 3 runs on a side, 95 % or more from 6 a side). No
    interval when either side has fewer than MIN_RUNS finite samples or a value that is not positive."""
    _check_confidence(confidence)
    top, bottom = (np.asarray(finite(values), dtype=float) for values in (numerator, denominator))
    n, sides = min(len(top), len(bottom)), (len(top), len(bottom))
    if not len(top) or not len(bottom) or float(np.median(bottom)) == 0:
        return Interval(None, None, None, n, confidence, "no runs on one side" if not n else "a median of 0",
                        sides, RATIO_METHOD)
    estimate = float(np.median(top)) / float(np.median(bottom))
    if n < MIN_RUNS:
        return Interval(estimate, None, None, n, confidence, level_note(n, 0.0, confidence), sides, RATIO_METHOD)
    if (top <= 0).any() or (bottom <= 0).any():
        return Interval(estimate, None, None, n, confidence, "a value of 0 or below: no interval of a ratio",
                        sides, RATIO_METHOD)
    i, j, level = ratio_depths(len(top), len(bottom), confidence)
    top, bottom = np.sort(top), np.sort(bottom)  # the bounds as log_ratio_bounds makes them, each the ratio of two runs
    low, high = float(top[i - 1] / bottom[-j]), float(top[-i] / bottom[j - 1])
    return Interval(estimate, low, high, n, level, level_note(n, level, confidence), sides, RATIO_METHOD)


def speedup_ci(samples: Iterable[Any], baseline: Iterable[Any], higher_is_better: bool,
               confidence: float = CONFIDENCE) -> Interval:
    """How many times better the runs' median is than the baseline's (samples / baseline where higher is
    better, a throughput; baseline / samples where lower is, a time), with its interval (`ratio_ci`
    oriented so that above 1 is better)."""
    return ratio_ci(samples, baseline, confidence) if higher_is_better else ratio_ci(baseline, samples, confidence)


class Verdict(StrEnum):
    """What a comparison says: the words the report and `colabkit compare` print."""

    FASTER = "faster"
    SLOWER = "slower"
    BETTER = "better"  # for a measure that is not a speed (an accuracy): higher or lower as declared
    WORSE = "worse"
    CHEAPER = "cheaper"  # for a cost per unit of work (docs/cost.md)
    COSTLIER = "costlier"
    NO_DIFFERENCE = "no difference resolved"  # the interval includes 1, or stays within the tolerance
    TOO_FEW_RUNS = "too few runs"  # no interval: fewer than MIN_RUNS runs on a side

    @property
    def resolved(self) -> bool:
        """Whether the comparison found a difference."""
        return self in (Verdict.FASTER, Verdict.SLOWER, Verdict.BETTER, Verdict.WORSE, Verdict.CHEAPER,
                        Verdict.COSTLIER)


# What a verdict calls a resolved difference: a time or throughput (faster, slower), a cost (cheaper, costlier),
# any other measure (better, worse); the better word first.
VerdictWords = Literal["speed", "cost", "measure"]
VERDICT_WORDS: dict[str, tuple[Verdict, Verdict]] = {"speed": (Verdict.FASTER, Verdict.SLOWER),
                                                     "cost": (Verdict.CHEAPER, Verdict.COSTLIER),
                                                     "measure": (Verdict.BETTER, Verdict.WORSE)}


def verdict_text(judged: Verdict, ratio: Interval) -> str:
    """A verdict with the level and runs of the interval it rests on: 'faster (75 %, n = 3)'."""
    return judged.value if judged == Verdict.TOO_FEW_RUNS else f"{judged.value} ({ratio.label})"


def verdict_word(text: Any) -> Any:
    """The verdict of a verdict_text ('faster' of 'faster (75 %, n = 3)'); anything else as it is."""
    return text.split(" (")[0] if isinstance(text, str) else text


def verdict(ratio: Interval, higher_is_better: bool = True, tolerance: float = TOLERANCE,
            words: VerdictWords = "speed") -> Verdict:
    """The verdict on `ratio` (candidate over baseline, of a measure where higher is better or not).

    Resolved only when the whole interval lies above 1 + tolerance or below 1 / (1 + tolerance): an
    interval that includes 1, or that stays inside that band, is "no difference resolved". `words`
    picks the words (VERDICT_WORDS): faster/slower, cheaper/costlier or better/worse."""
    if tolerance < 0:
        raise ValueError(f"tolerance must be 0 or more, got {tolerance}")
    if not ratio.resolved:
        return Verdict.TOO_FEW_RUNS
    up, down = VERDICT_WORDS[words]
    if float(ratio.low) > 1 + tolerance:  # type: ignore[arg-type]
        return up if higher_is_better else down
    if float(ratio.high) < 1 / (1 + tolerance):  # type: ignore[arg-type]
        return down if higher_is_better else up
    return Verdict.NO_DIFFERENCE


@dataclass(frozen=True)
class Comparison:
    """A candidate against a baseline: the ratio of their medians (candidate / baseline) with its
    interval, the verdict, and the change it stands for (+0.12: the candidate's measure is 12 % higher)."""

    baseline: Interval
    candidate: Interval
    ratio: Interval
    verdict: Verdict

    @property
    def change(self) -> float | None:
        return None if self.ratio.estimate is None else self.ratio.estimate - 1.0


def compare(baseline: Iterable[Any], candidate: Iterable[Any], higher_is_better: bool = True,
            tolerance: float = TOLERANCE, words: VerdictWords = "speed") -> Comparison:
    """Compare the runs of a candidate with those of a baseline (unpaired): each side's median with
    its interval, the ratio candidate / baseline with its interval, and the verdict."""
    base, cand = finite(baseline), finite(candidate)
    ratio = ratio_ci(cand, base)
    return Comparison(median_ci(base), median_ci(cand), ratio, verdict(ratio, higher_is_better, tolerance, words))
