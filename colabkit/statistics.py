"""Statistics of measurements: summaries, confidence intervals of medians and of ratios of medians, and
the verdict on a comparison. Numbers in, numbers out: nothing here knows records, files or pandas.

The unit of evidence is a *run* (one notebook in its own kernel), not an epoch: epochs of one run share
its process, its memory layout and the state of its host, so they are not independent samples of what
another run would measure (Kalibera & Jones, "Rigorous Benchmarking in Reasonable Time", ISMM 2013).
A headline's uncertainty is therefore taken over runs:

* `median_ci(samples)`: the median of the runs and a 95 % percentile-bootstrap interval of it
  (BOOTSTRAP_RESAMPLES resamples drawn with replacement, a fixed seed so that a report rebuilt from
  the same records prints the same interval). Computed in NumPy: ten lines, no new dependency, and
  the percentile method is the one that suits a median (SciPy's default BCa needs a jackknife, which
  is degenerate for a median); tests/test_statistics.py checks it against scipy.stats.bootstrap.
* `ratio_ci(numerator, denominator)`: the ratio of the two medians and a percentile-bootstrap
  interval of it, each side resampled independently (the runs of two configurations are not paired).
  Runs that are paired (a figure and its baseline measured in the same run) give one ratio per run:
  take `median_ci` of those ratios instead.
* `verdict(interval)`: faster or slower when the whole interval lies beyond the tolerance band
  [1 / (1 + TOLERANCE), 1 + TOLERANCE] (criterion.rs's noise threshold); "no difference resolved"
  when it includes 1 or does not leave the band; "too few runs" when there is no interval.

Too few runs: below MIN_RUNS (3) there is no interval at all. Between 3 and 5 runs there is one, but
no interval can promise 95 %: whatever the method, an interval inside the runs' range covers the true
median with probability at most 1 - 2^(1-n) (75 % at n = 3, 87.5 % at 4, 93.75 % at 5), and the
percentile bootstrap's interval there is the range itself; `Interval.note` says so.
"""

from __future__ import annotations

import math
import statistics as _pystats
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 2013  # fixed: the same records give the same interval in every report
MIN_RUNS = 3  # fewer runs than this: no interval
EXACT_95_RUNS = 6  # from this many runs on, the runs' range covers the median with >= 95 % (1 - 2^(1-n))
TOLERANCE = 0.02  # a ratio whose interval stays within [1/1.02, 1.02] is no difference worth a word


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


def range_coverage(n: int) -> float:
    """The probability that the range [min, max] of n independent runs covers the true median:
    1 - 2^(1-n), whatever the distribution. No interval inside the range can do better."""
    return 1.0 - 2.0 ** (1 - n) if n >= 1 else 0.0


def small_sample_note(n: int) -> str:
    """What an interval from `n` runs can promise, in words ('' when it can promise 95 %)."""
    if n < MIN_RUNS:
        return f"n = {n}: too few runs for an interval (it takes {MIN_RUNS} or more)"
    if n < EXACT_95_RUNS:
        return (f"n = {n}: the interval is about the runs' range, which covers the true median with probability "
                f"{100 * range_coverage(n):.4g} %, not 95 % ({EXACT_95_RUNS} runs are needed for that)")
    return ""


@dataclass(frozen=True)
class Interval:
    """An estimate (a median, or a ratio of medians) with its confidence interval.

    `low` and `high` are None when there were too few runs (`note` says so); `n` is the number of runs
    behind it (for a ratio, those of the side with fewer); `note` states any limitation of coverage."""

    estimate: float | None
    low: float | None
    high: float | None
    n: int
    confidence: float = CONFIDENCE
    note: str = ""

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


def _bootstrap_medians(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The medians of `resamples` resamples of `values`, each drawn with replacement."""
    picks = rng.integers(0, len(values), size=(resamples, len(values)))
    return np.median(values[picks], axis=1)


def _bounds(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie between 0 and 1, got {confidence}")


def median_ci(samples: Iterable[Any], confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP_RESAMPLES,
              seed: int = BOOTSTRAP_SEED) -> Interval:
    """The median of the finite `samples` (one per run) and its percentile-bootstrap interval.

    No interval (low = high = None) with fewer than MIN_RUNS samples; the note says what an interval
    from fewer than EXACT_95_RUNS samples can promise. The same samples always give the same interval."""
    _check_confidence(confidence)
    values = np.asarray(finite(samples), dtype=float)
    n = len(values)
    if n == 0:
        return Interval(None, None, None, 0, confidence, small_sample_note(0))
    median = float(np.median(values))
    if n < MIN_RUNS:
        return Interval(median, None, None, n, confidence, small_sample_note(n))
    draws = _bootstrap_medians(values, resamples, np.random.default_rng(seed))
    low, high = _bounds(draws, confidence)
    return Interval(median, low, high, n, confidence, small_sample_note(n))


def ratio_ci(numerator: Iterable[Any], denominator: Iterable[Any], confidence: float = CONFIDENCE,
             resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Interval:
    """median(numerator) / median(denominator) and its percentile-bootstrap interval, the two sides
    resampled independently (unpaired runs). No interval when either side has fewer than MIN_RUNS
    finite samples, or a denominator resample's median is 0; the estimate is None without samples on
    both sides."""
    _check_confidence(confidence)
    top, bottom = (np.asarray(finite(values), dtype=float) for values in (numerator, denominator))
    n = min(len(top), len(bottom))
    if not len(top) or not len(bottom) or float(np.median(bottom)) == 0:
        return Interval(None, None, None, n, confidence, "no runs on one side" if not n else "a median of 0")
    estimate = float(np.median(top)) / float(np.median(bottom))
    if n < MIN_RUNS:
        return Interval(estimate, None, None, n, confidence, small_sample_note(n))
    rng = np.random.default_rng(seed)
    top_draws = _bootstrap_medians(top, resamples, rng)
    bottom_draws = _bootstrap_medians(bottom, resamples, rng)
    if np.any(bottom_draws == 0):
        return Interval(estimate, None, None, n, confidence, "a resampled median of 0: no interval")
    low, high = _bounds(top_draws / bottom_draws, confidence)
    return Interval(estimate, low, high, n, confidence, small_sample_note(n))


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
    NO_DIFFERENCE = "no difference resolved"  # the interval includes 1, or stays within the tolerance
    TOO_FEW_RUNS = "too few runs"  # no interval: fewer than MIN_RUNS runs on a side

    @property
    def resolved(self) -> bool:
        """Whether the comparison found a difference."""
        return self in (Verdict.FASTER, Verdict.SLOWER, Verdict.BETTER, Verdict.WORSE)


def verdict(ratio: Interval, higher_is_better: bool = True, tolerance: float = TOLERANCE,
            speed: bool = True) -> Verdict:
    """The verdict on `ratio` (candidate over baseline, of a measure where higher is better or not).

    Resolved only when the whole interval lies above 1 + tolerance or below 1 / (1 + tolerance): an
    interval that includes 1, or that stays inside that band, is "no difference resolved". `speed`
    picks the words: faster/slower for times and throughputs, better/worse for anything else."""
    if tolerance < 0:
        raise ValueError(f"tolerance must be 0 or more, got {tolerance}")
    if not ratio.resolved:
        return Verdict.TOO_FEW_RUNS
    up, down = (Verdict.FASTER, Verdict.SLOWER) if speed else (Verdict.BETTER, Verdict.WORSE)
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
            tolerance: float = TOLERANCE, speed: bool = True) -> Comparison:
    """Compare the runs of a candidate with those of a baseline (unpaired): each side's median with
    its interval, the ratio candidate / baseline with its interval, and the verdict."""
    base, cand = finite(baseline), finite(candidate)
    ratio = ratio_ci(cand, base)
    return Comparison(median_ci(base), median_ci(cand), ratio, verdict(ratio, higher_is_better, tolerance, speed))
