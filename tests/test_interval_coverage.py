"""The intervals keep the level they state: 2,000 simulated sets of runs (true median known) of
log-normal runs, runs in two clusters (slow epochs come in clusters on shared hosts) and runs with
outliers, at 3, 5 and 10 runs; each interval must cover the truth within 2.5 points of its stated level
(the simulation's own standard error is at most 1 point)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, stats

from colabkit.statistics import CONFIDENCE, median_ci, ratio_ci

SETS = 2000
FACTOR = 1.5  # the true ratio of the two sides' medians


def _mixture_median(weights: list[float], scales: list[float], sigma: float) -> float:
    def cdf(x: float) -> float:
        return sum(w * stats.norm.cdf(np.log(x / s) / sigma) for w, s in zip(weights, scales)) - 0.5
    return float(optimize.brentq(cdf, 0.1, 10))


SHAPES = {  # name: (draw(rng, n), true median)
    "lognormal": (lambda rng, n: rng.lognormal(0, 0.14, n), 1.0),
    "two-cluster": (lambda rng, n: np.where(rng.random(n) < 0.3, 1.3, 1.0) * rng.lognormal(0, 0.03, n),
                    _mixture_median([0.7, 0.3], [1.0, 1.3], 0.03)),
    "contaminated": (lambda rng, n: np.where(rng.random(n) < 0.1, 2.0, 1.0) * rng.lognormal(0, 0.05, n),
                     _mixture_median([0.9, 0.1], [1.0, 2.0], 0.05)),
}


@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_median_and_ratio_intervals_cover_as_often_as_they_state(shape, n):
    draw, truth = SHAPES[shape]
    rng = np.random.default_rng(34 + n)
    medians = [median_ci(draw(rng, n)) for _ in range(SETS)]
    ratios = [ratio_ci(FACTOR * draw(rng, n), draw(rng, n)) for _ in range(SETS)]
    for name, intervals, true in (("median", medians, truth), ("ratio", ratios, FACTOR)):
        stated = {interval.confidence for interval in intervals}
        assert len(stated) == 1, f"{name}: one level per n, got {stated}"
        covered = np.mean([interval.low <= true <= interval.high for interval in intervals])
        assert abs(covered - stated.pop()) <= 0.025, f"{shape} {name} n={n}: covered {covered:.3f}"


def test_a_level_below_95_is_stated_and_from_6_runs_a_median_reaches_95():
    assert [median_ci(range(n)).confidence for n in (3, 4, 5)] == [0.75, 0.875, 0.9375]
    assert all(median_ci(range(n)).confidence >= CONFIDENCE for n in range(6, 40))
    assert ratio_ci([1, 2, 3], [1, 2, 3]).confidence == pytest.approx(0.9)  # 1 - 2 / C(6, 3)
    assert all(ratio_ci(range(1, n + 1), range(1, n + 1)).confidence >= CONFIDENCE for n in range(4, 30))
    assert median_ci([1.0, 2.0, 3.0]).label == "75 %, n = 3" and "not 95 %" in median_ci([1, 2, 3]).note
