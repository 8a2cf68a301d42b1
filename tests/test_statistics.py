"""colabkit.statistics on samples from known distributions: intervals that cover the true median, no
difference found between samples of one distribution, differences of 30 % resolved, tiny samples
said to be tiny with the level they reach (tests/test_interval_coverage.py checks every level)."""

from __future__ import annotations

import numpy as np
import pytest

from colabkit.statistics import (
    TOLERANCE,
    Interval,
    Verdict,
    compare,
    cv,
    finite,
    mean_std,
    median_ci,
    percent,
    ratio_ci,
    speedup_ci,
    summarize,
    verdict,
    verdict_text,
    verdict_word,
)

TRIALS = 200


@pytest.mark.parametrize(("name", "draw", "true_median"), [
    ("normal", lambda rng, n: rng.normal(100.0, 10.0, n), 100.0),
    ("lognormal", lambda rng, n: rng.lognormal(0.0, 0.3, n), 1.0),  # skewed, as run times are
])
def test_95_percent_intervals_cover_the_true_median_in_at_least_90_percent_of_200_trials(name, draw, true_median):
    # 10 runs: the 2nd smallest to the 2nd largest, 97.85 % whatever the distribution
    rng = np.random.default_rng(20)
    covered = 0
    for _ in range(TRIALS):
        interval = median_ci(draw(rng, 10))
        covered += interval.low <= true_median <= interval.high
    assert covered / TRIALS >= 0.90, f"{name}: {covered} of {TRIALS}"
    assert covered / TRIALS <= 0.99  # an interval that always covers would be too wide to tell anything


def test_two_samples_of_one_distribution_get_no_difference_most_of_the_time():
    rng = np.random.default_rng(12)
    verdicts = [compare(rng.lognormal(0, 0.1, 5), rng.lognormal(0, 0.1, 5)).verdict for _ in range(TRIALS)]
    assert sum(v == Verdict.NO_DIFFERENCE for v in verdicts) / TRIALS >= 0.9
    assert set(verdicts) <= {Verdict.NO_DIFFERENCE, Verdict.FASTER, Verdict.SLOWER}


def test_samples_30_percent_apart_are_resolved_in_the_right_direction():
    rng = np.random.default_rng(13)
    faster = slower_times = 0
    for _ in range(TRIALS):
        baseline = rng.lognormal(0, 0.05, 5)
        better = rng.lognormal(np.log(1.3), 0.05, 5)
        faster += compare(baseline, better, higher_is_better=True).verdict == Verdict.FASTER  # a throughput up 30 %
        slower_times += compare(baseline, better, higher_is_better=False).verdict == Verdict.SLOWER  # a time up 30 %
    assert faster / TRIALS >= 0.95 and slower_times / TRIALS >= 0.95


def test_too_few_runs_give_no_interval_and_tiny_samples_say_what_they_can_promise():
    assert median_ci([]).estimate is None and median_ci([]).n == 0
    two = median_ci([1.0, 2.0])
    assert (two.estimate, two.low, two.high) == (1.5, None, None) and "too few runs" in two.note
    three = median_ci([3.0, 1.0, 2.0])
    assert (three.low, three.high) == (1.0, 3.0)  # the interval of 3 runs is their range ...
    assert "75 %" in three.note and "not 95 %" in three.note and three.confidence == 0.75  # ... at 75 %
    assert median_ci(list(range(1, 11))).note == ""
    assert verdict(two) == Verdict.TOO_FEW_RUNS and compare([1.0, 1.1], [2.0, 2.1, 2.2]).verdict == Verdict.TOO_FEW_RUNS


def test_the_same_samples_give_the_same_interval_every_time():
    samples = [4.1, 3.9, 4.4, 4.0, 5.2, 3.8]
    assert median_ci(samples) == median_ci(list(samples))
    assert ratio_ci(samples, samples[::-1]) == ratio_ci(samples, samples[::-1])


def test_the_verdict_needs_the_whole_interval_beyond_the_tolerance_band():
    def ratio(low: float, high: float) -> Interval:
        return Interval((low + high) / 2, low, high, 5)

    assert verdict(ratio(1.05, 1.20)) == Verdict.FASTER
    assert verdict(ratio(1.05, 1.20), higher_is_better=False) == Verdict.SLOWER  # a time that grew
    assert verdict(ratio(0.80, 0.95)) == Verdict.SLOWER
    assert verdict(ratio(0.95, 1.10)) == Verdict.NO_DIFFERENCE  # includes 1
    assert verdict(ratio(1.005, 1.015)) == Verdict.NO_DIFFERENCE  # excludes 1, but within +/- 2 %
    assert verdict(ratio(1.005, 1.015), tolerance=0) == Verdict.FASTER
    assert verdict(ratio(1.05, 1.20), words="measure") == Verdict.BETTER
    assert verdict(ratio(1.05, 1.20), higher_is_better=False, words="cost") == Verdict.COSTLIER  # a cost that grew
    assert verdict(ratio(0.80, 0.95), higher_is_better=False, words="cost") == Verdict.CHEAPER
    assert 1 + TOLERANCE == pytest.approx(1.02)


def test_a_ratio_interval_brackets_the_ratio_of_medians_and_speedups_point_the_right_way():
    fast, slow = [2.0, 2.1, 1.9, 2.05, 1.95], [1.0, 1.05, 0.95, 1.02, 0.98]
    interval = ratio_ci(fast, slow)
    assert interval.estimate == pytest.approx(2.0) and interval.low < 2.0 < interval.high
    assert 1.9 / 1.05 <= interval.low and interval.high <= 2.1 / 0.95
    times = speedup_ci([1.0, 1.05, 0.95], [2.0, 2.1, 1.9], higher_is_better=False)  # half the time: 2x
    assert times.estimate == pytest.approx(2.0) and verdict(times) == Verdict.FASTER
    assert speedup_ci([10.0] * 3, [5.0] * 3, True).estimate == 2.0  # a throughput twice as high: 2x
    assert ratio_ci([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]).estimate is None  # a median of 0: no ratio


def test_an_interval_of_a_median_runs_between_order_statistics_of_the_runs():
    runs = [5.0, 1.0, 4.0, 2.0, 3.0, 9.0, 8.0, 7.0, 6.0, 10.0]
    interval = median_ci(runs)
    assert (interval.low, interval.high) == (2.0, 9.0)  # the 2nd smallest and 2nd largest of 10: 97.85 %
    assert interval.confidence == pytest.approx(1 - 2 * 11 / 1024) and interval.label == "97.8 %, n = 10"
    assert percent(0.9375) == "93.7 %" and percent(0.75) == "75 %"  # never rounded up past the truth
    assert verdict_text(Verdict.FASTER, interval) == "faster (97.8 %, n = 10)"
    assert verdict_word("faster (97.8 %, n = 10)") == "faster" and verdict_text(Verdict.TOO_FEW_RUNS, interval) == "too few runs"


def test_summaries_and_helpers_say_what_they_promise():
    stats = summarize([1.0, 2.0, 3.0, 10.0])
    assert stats == {"n": 4, "min": 1.0, "median": 2.5, "mean": 4.0, "std": pytest.approx(4.0825, abs=1e-4)}
    assert summarize([])["median"] is None
    assert mean_std([0.9, 0.8, 0.85, 0.95]) == pytest.approx((0.875, np.std([0.9, 0.8, 0.85, 0.95])))
    with pytest.raises(ValueError):
        mean_std([])
    assert finite([1, None, float("nan"), "x", True, 2.5, float("inf")]) == [1.0, 2.5]
    assert cv([1.0]) is None and cv([9.0, 11.0]) == pytest.approx(np.std([9.0, 11.0], ddof=1) / 10)
