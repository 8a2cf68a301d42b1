"""The intervals keep the level they state, checked by simulation with the truth known.

Medians: 2,000 simulated sets of log-normal runs, runs in two clusters (slow epochs come in clusters on
shared hosts; with the clusters wide, and tight as in issue 51) and runs with outliers, at 3, 5 and 10
runs; each interval must cover the true median within 2.5 points of its stated level (the simulation's
standard error is at most 1 point).

Ratios of medians (unpaired runs): first the worst case over every pair of distributions, by a dynamic
programme (exact: no dice), for every count pair from 3 to 12 a side: the stated level is the worst
case, reached and never undercut. Then simulations: the two sides scatter differently and have
different run counts: spreads (of the logarithms) 1x to 5x apart, 100x and 10,000x (one side's scatter
dominating, where the stated level is reached exactly), counts 3-10 a side, the four shapes above, on
each side alike or mixed. Every case must cover at least its stated level less 2.5 points, and the
cases where one side dominates (10,000x) must come within 2.5 points of it (the stated level is the one
reached, not a loose bound). CI runs a grid of 12 count pairs with 10,000 sets each (standard error at
most 0.5 points, so 2.5 points is five of them: a miss is the method's, not the dice's); `-m slow` runs
every count pair from 3 to 10 a side, 15 spread ratios and all sixteen pairs of shapes with 40,000 sets
each, within 1 point (four standard errors of 0.25). Issue 51's case (a tight two-cluster side against a
narrow log-normal one, 6 and 10 runs a side, 40,000 sets; and 55 % of runs at 1.0 against 45 % at 2.0)
is held to four standard errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import optimize, stats

from colabkit.statistics import CONFIDENCE, MIN_RUNS, log_ratio_bounds, median_ci, ratio_ci, ratio_depths

SETS = 2000
FACTOR = 1.5  # the true ratio of the two sides' medians


def _mixture_median(weights: list[float], scales: list[float], sigma: float) -> float:
    def cdf(x: float) -> float:
        return sum(w * stats.norm.cdf(np.log(x / s) / sigma) for w, s in zip(weights, scales)) - 0.5
    return float(optimize.brentq(cdf, 0.1, 10))


SHAPES = {  # name: (draw(rng, size), true median); size an int or a (sets, runs) shape
    "lognormal": (lambda rng, n: rng.lognormal(0, 0.14, n), 1.0),
    "two-cluster": (lambda rng, n: np.where(rng.random(n) < 0.3, 1.3, 1.0) * rng.lognormal(0, 0.03, n),
                    _mixture_median([0.7, 0.3], [1.0, 1.3], 0.03)),
    "contaminated": (lambda rng, n: np.where(rng.random(n) < 0.1, 2.0, 1.0) * rng.lognormal(0, 0.05, n),
                     _mixture_median([0.9, 0.1], [1.0, 2.0], 0.05)),
    # issue 51: 70 % of runs at 1.0, 30 % at 1.15, each cluster tight (log-sigma 0.001): a side's median
    # interval then often ends at the true median itself, where square-and-add (MOVER) fell short
    "two-cluster, tight": (lambda rng, n: np.where(rng.random(n) < 0.3, 1.15, 1.0) * rng.lognormal(0, 0.001, n),
                           _mixture_median([0.7, 0.3], [1.0, 1.15], 0.001)),
}


@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_median_intervals_cover_as_often_as_they_state(shape, n):
    draw, truth = SHAPES[shape]
    rng = np.random.default_rng(34 + n)
    intervals = [median_ci(draw(rng, n)) for _ in range(SETS)]
    stated = {interval.confidence for interval in intervals}
    assert len(stated) == 1, f"one level per n, got {stated}"
    covered = np.mean([interval.low <= truth <= interval.high for interval in intervals])
    assert abs(covered - stated.pop()) <= 0.025, f"{shape} median n={n}: covered {covered:.3f}"


def ratio_coverage(n: int, m: int, spread: float, shapes: tuple[str, str], sets: int,
                   rng: np.random.Generator) -> tuple[float, float]:
    """(covered, stated) of `sets` simulated ratio intervals: n runs of the numerator against m of the
    denominator, the numerator's logarithms scattering `spread` times as widely as the denominator's
    (each side's draw raised to the power sqrt(spread) and 1 / sqrt(spread): a median maps to the median)."""
    (draw_top, truth_top), (draw_bottom, truth_bottom) = (SHAPES[shape] for shape in shapes)
    power_top, power_bottom = np.sqrt(spread), 1 / np.sqrt(spread)
    top = FACTOR * draw_top(rng, (sets, n)) ** power_top
    bottom = draw_bottom(rng, (sets, m)) ** power_bottom
    truth = np.log(FACTOR * truth_top ** power_top / truth_bottom ** power_bottom)
    _, low, high, level = log_ratio_bounds(top, bottom)
    return float(np.mean((low <= truth) & (truth <= high))), level


def _check_ratio_grid(pairs, spreads, shape_pairs, sets: int, tolerance: float) -> None:
    rng = np.random.default_rng(45)
    misses = []
    for (n, m), spread, shapes in itertools.product(pairs, spreads, shape_pairs):
        covered, stated = ratio_coverage(n, m, spread, shapes, sets, rng)
        if covered < stated - tolerance:
            misses.append(f"{shapes} n={n} m={m} spread {spread:g}x: stated {stated:.3f}, covered {covered:.3f}")
        # one side dominates: the interval tends to that side's own median interval, whose level is the
        # stated one where that side has the lower level (the fewer runs): reached, not a loose bound. The
        # other side's half-width adds to it, so it takes 10,000x (at 100x the interval covered 1-2 points
        # more). Not the tight two-cluster shape: near its median it scatters only as its clusters do
        # (log-sigma 0.001, 140 times below its spread overall), so the other side keeps a say there
        dominant, dominant_shape = (n, shapes[0]) if spread > 1 else (m, shapes[1])
        if (abs(np.log10(spread)) >= 4 and median_ci(range(dominant)).confidence == stated
                and dominant_shape != "two-cluster, tight"):
            if abs(covered - stated) > tolerance:
                misses.append(f"{shapes} n={n} m={m} spread {spread:g}x (dominant side): stated {stated:.3f}, "
                              f"covered {covered:.3f}, not within {tolerance}")
    assert not misses, "\n".join(misses)


def _best_lattice_path(across: np.ndarray, up: np.ndarray) -> float:
    """The largest sum of steps along a monotone path on a grid's lines from its lower-left to its
    upper-right corner: across[k, l] a step from column k to k + 1 on row l, up[k, l] from row l to l + 1
    on column k (shapes (K, L + 1) and (K + 1, L)). Row by row; along a row, a running maximum."""
    best = np.concatenate([[0.0], np.cumsum(across[:, 0])])
    for row in range(1, up.shape[1] + 1):
        arrive = best + up[:, row - 1]
        walked = np.concatenate([[0.0], np.cumsum(across[:, row])])
        best = walked + np.maximum.accumulate(arrive - walked)
    return float(best[-1])


def _best_cell_chain(bottom: np.ndarray, left: np.ndarray) -> float:
    """An upper bound of what any monotone curve from the lower-left to the upper-right corner collects
    (shapes (K, L): cell [k, l]'s bottom and left edges, each the most its cell's horizontal or vertical
    travel can collect): a curve enters each column once and each row once, so it collects at most a
    chain of cells (moving right, up or diagonally) credited with the bottom edge of each column's first
    cell and the left edge of each row's first cell."""
    best = np.cumsum(bottom[:, 0]) + left[0, 0]
    for row in range(1, bottom.shape[1]):
        arrive = best + left[:, row]
        arrive[1:] = np.maximum(arrive[1:], best[:-1] + bottom[1:, row] + left[1:, row])
        walked = np.cumsum(bottom[:, row])
        best = walked + np.maximum.accumulate(arrive - walked)
    return float(best[-1])


def _worst_miss(n: int, m: int, i: int, j: int, steps: int) -> tuple[float, float]:
    """How often the ratio's interval of ranks (i, j) misses, at most, over every pair of continuous
    distributions: (reached, bound). Centred on their true medians, the numerator's logarithms x and the
    denominator's y; the interval misses below when x_(i) > y_(m+1-j) and above when x_(n+1-i) < y_(j).
    Its miss rate depends on the two distributions only through the path t -> (F(t), G(t)), monotone from
    (0, 0) through (1/2, 1/2) to (1, 1): it is the integral along it of C(v) dD(u) + A(u) dB(v), with
    A(u) = P(x_(i) > t) where F(t) = u, B(v) = P(y_(m+1-j) <= t), C(v) = P(y_(j) > t) and
    D(u) = P(x_(n+1-i) <= t), binomial tails. `reached`: the best path on the lines of a grid of `steps`
    a side (each such path is a pair of distributions); `bound`: what no path can exceed (A and C fall,
    so a cell's travel collects at most its bottom and left edges). The two meet as `steps` grows."""
    grid = np.linspace(0, 1, steps + 1)
    miss_low_x, low_y = stats.binom.cdf(i - 1, n, grid), stats.binom.sf(m - j, m, grid)  # A, B
    miss_high_y, high_x = stats.binom.cdf(j - 1, m, grid), stats.binom.sf(n - i, n, grid)  # C, D
    across = np.outer(np.diff(high_x), miss_high_y)  # [k, l]: u from grid[k] to grid[k + 1] at v = grid[l]
    up = np.outer(miss_low_x, np.diff(low_y))  # [k, l]: v from grid[l] to grid[l + 1] at u = grid[k]
    half = steps // 2  # every path passes (1/2, 1/2): F(0) = G(0) = 1/2
    reached = (_best_lattice_path(across[:half, :half + 1], up[:half + 1, :half])
               + _best_lattice_path(across[half:, half:], up[half:, half:]))
    bottom, left = across[:, :-1], up[:-1, :]
    bound = (_best_cell_chain(bottom[:half, :half], left[:half, :half])
             + _best_cell_chain(bottom[half:, half:], left[half:, half:]))
    return reached, bound


def test_the_stated_level_is_the_worst_case_over_every_pair_of_distributions():
    # no dice: for every count pair, the pair of distributions that makes the interval miss most often
    # misses 1 - stated exactly (one side's runs nearly equal, the other's far from its median: that side's
    # own miss rate), and none misses more (to the grid's resolution: at 200 steps the bound exceeds the
    # truth by at most 0.1 point)
    for n, m in itertools.product(range(MIN_RUNS, 13), repeat=2):
        i, j, level = ratio_depths(n, m)
        reached, bound = _worst_miss(n, m, i, j, steps=200)
        assert reached == pytest.approx(1 - level, abs=1e-9), (n, m, reached, level)
        assert reached <= bound <= 1 - level + 0.0015, (n, m, bound, level)


def test_the_miss_rate_is_the_integral_along_the_two_distributions_path():
    # the model the dynamic programme searches, against the product's intervals: 3 runs of two tight
    # clusters (issue 51's shape, on the log scale and centred on its true median) against 4 log-normal
    # runs; the integral along t -> (F(t), G(t)) must match 200,000 simulated sets (standard error 0.1 point)
    n, m = 3, 4
    i, j, _ = ratio_depths(n, m)
    truth = SHAPES["two-cluster, tight"][1]
    t = np.linspace(-0.3, 0.3, 200_001)
    u = 0.7 * stats.norm.cdf((t + np.log(truth)) / 0.001) + 0.3 * stats.norm.cdf((t + np.log(truth / 1.15)) / 0.001)
    v = stats.norm.cdf(t / 0.05)
    mid_u, mid_v = (u[1:] + u[:-1]) / 2, (v[1:] + v[:-1]) / 2
    modelled = (np.sum(stats.binom.cdf(i - 1, n, mid_u) * np.diff(stats.binom.sf(m - j, m, v)))
                + np.sum(stats.binom.cdf(j - 1, m, mid_v) * np.diff(stats.binom.sf(n - i, n, u))))
    rng = np.random.default_rng(7)
    top, bottom = SHAPES["two-cluster, tight"][0](rng, (200_000, n)), rng.lognormal(0, 0.05, (200_000, m))
    _, low, high, _ = log_ratio_bounds(top, bottom)
    simulated = np.mean((low > np.log(truth)) | (high < np.log(truth)))
    assert 0.05 < modelled < 0.5 and abs(simulated - modelled) < 0.004, (simulated, modelled)


SAME_SHAPES = [(shape, shape) for shape in sorted(SHAPES)]
CI_PAIRS = [(3, 3), (3, 6), (6, 3), (4, 4), (4, 10), (10, 4), (5, 5), (3, 10), (5, 8), (6, 6), (7, 9), (10, 10)]


@pytest.mark.parametrize("shapes", SAME_SHAPES + [("lognormal", "contaminated"), ("two-cluster", "lognormal"),
                                                  ("two-cluster, tight", "lognormal"), ("lognormal", "two-cluster, tight")])
def test_ratio_intervals_keep_their_level_when_the_sides_scatter_differently(shapes):
    _check_ratio_grid(CI_PAIRS, [1, 2, 5, 1 / 2, 1 / 5, 10_000, 1 / 10_000], [shapes], sets=10_000, tolerance=0.025)


@pytest.mark.slow
def test_ratio_intervals_keep_their_level_for_every_count_and_spread():
    pairs = list(itertools.product(range(MIN_RUNS, 11), repeat=2))
    spreads = [1, 1.5, 2, 3, 5, 10, 100, 10_000]
    spreads += [1 / spread for spread in spreads[1:]]
    _check_ratio_grid(pairs, spreads, list(itertools.product(sorted(SHAPES), repeat=2)), sets=40_000, tolerance=0.01)


def test_the_issue_s_cases_now_cover_what_they_state():
    # log-sigma 0.02 against 0.10, 3 a side; and 3 runs at 0.10 against 6 at 0.02: under the equal-shape
    # (Hodges-Lehmann) interval stated 90 % and 95.2 %, covered 82-83 % and 82.5 %
    rng = np.random.default_rng(4)
    for (n, sigma_top), (m, sigma_bottom) in (((3, 0.02), (3, 0.10)), ((3, 0.10), (6, 0.02))):
        top, bottom = rng.lognormal(0, sigma_top, (20_000, n)), rng.lognormal(0, sigma_bottom, (20_000, m))
        _, low, high, level = log_ratio_bounds(top, bottom)
        covered = np.mean((low <= 0) & (0 <= high))
        assert level == 0.75 and covered >= level - 0.01, (n, m, covered)


@pytest.mark.parametrize("runs", [6, 10])
@pytest.mark.parametrize(("far", "gap", "within"), [(0.3, 1.15, 0.001), (0.3, 1.15, 0.0), (0.45, 2.0, 0.0001)])
def test_a_side_in_two_tight_clusters_against_a_narrow_log_normal_one_keeps_the_stated_level(runs, far, gap, within):
    # issue 51: 70 % of runs at 1.0 and 30 % at 1.15 (each cluster's own log-sigma 0.001, or none: every
    # run exactly 1.0 or 1.15) against a log-sigma of 0.02, as either side: square-and-add (MOVER) covered
    # 92.0 % at a stated 96.9 % (6 a side) and 94.3 % at 97.85 % (10), the misses one-sided; and a harder
    # case, 55 % at 1.0 and 45 % at 2.0, where it covered 73 % and 76 %
    sets = 40_000
    rng = np.random.default_rng(51 + runs)
    truth = _mixture_median([1 - far, far], [1.0, gap], within) if within else 1.0  # the 1.0 cluster holds the median
    for clusters_on_top in (False, True):
        clustered = np.where(rng.random((sets, runs)) < far, gap, 1.0) * rng.lognormal(0, within, (sets, runs))
        narrow = FACTOR * rng.lognormal(0, 0.02, (sets, runs))
        top, bottom, ratio = (clustered, narrow, truth / FACTOR) if clusters_on_top else (narrow, clustered, FACTOR / truth)
        _, low, high, level = log_ratio_bounds(top, bottom)
        covered = np.mean((low <= np.log(ratio)) & (np.log(ratio) <= high))
        error = np.sqrt(level * (1 - level) / sets)  # 0.09 point at 96.9 %
        assert covered >= level - 4 * error, (runs, far, gap, within, clusters_on_top, level, covered)


def test_ratio_ci_is_the_vectorised_interval_for_one_comparison():
    rng = np.random.default_rng(9)
    for n, m in ((3, 3), (3, 7), (8, 4), (10, 10)):
        top, bottom = rng.lognormal(0.3, 0.1, n), rng.lognormal(0, 0.02, m)
        interval = ratio_ci(top, bottom)
        estimate, low, high, level = log_ratio_bounds(top, bottom)
        assert interval.confidence == level and interval.sides == (n, m)
        assert (interval.low, interval.estimate, interval.high) == pytest.approx(np.exp([low[0], estimate[0], high[0]]))
        # the two sides' median intervals end to end: numerator's low over denominator's high, and back
        i, j, _ = ratio_depths(n, m)
        ts, bs = np.sort(top), np.sort(bottom)
        assert (interval.low, interval.high) == pytest.approx((ts[i - 1] / bs[m - j], ts[n - i] / bs[j - 1]))
        assert interval.low <= interval.estimate <= interval.high


def test_a_level_below_95_is_stated_and_from_6_runs_a_median_reaches_95():
    assert [median_ci(range(n)).confidence for n in (3, 4, 5)] == [0.75, 0.875, 0.9375]
    assert all(median_ci(range(n)).confidence >= CONFIDENCE for n in range(6, 40))
    # a ratio reaches the lower of its two sides' median levels: 75 % with 3 runs on either side
    assert ratio_ci([1, 2, 3], [1, 2, 3]).confidence == 0.75 and ratio_ci([1, 2, 3], range(1, 11)).confidence == 0.75
    assert ratio_ci(range(1, 5), range(1, 11)).confidence == 0.875
    assert all(ratio_ci(range(1, n + 1), range(1, m + 1)).confidence >= CONFIDENCE
               for n in range(6, 30) for m in range(6, 30))
    assert median_ci([1.0, 2.0, 3.0]).label == "75 %, n = 3" and "not 95 %" in median_ci([1, 2, 3]).note
    assert ratio_ci([1, 2, 3], [1, 2, 3, 4]).label == "75 %, n = 3 and 4"
    assert ratio_ci([1, 2, 3], [1, 2, 3]).label == "75 %, n = 3"
