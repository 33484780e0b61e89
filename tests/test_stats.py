"""Statistics used for every reported speedup."""

from __future__ import annotations

import math

import pytest
from redline.evaluator.stats import geomean, median, quantile, ratio_mean_ci, speedup_ci


def test_median_odd_even_and_unsorted() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    with pytest.raises(ValueError):
        median([])


def test_quantile_ends_are_min_and_max() -> None:
    xs = [5.0, 1.0, 9.0, 3.0]
    assert quantile(xs, 0.0) == 1.0 and quantile(xs, 1.0) == 9.0
    assert quantile(xs, 0.5) == median(xs)


def test_geomean_in_log_space() -> None:
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert geomean([1e300, 1e300]) == pytest.approx(1e300)  # no overflow from multiplying first
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def test_speedup_of_identical_rounds_is_one_and_interval_holds_it() -> None:
    rounds = [[1.0 + 0.01 * ((i * 7 + j) % 5) for j in range(10)] for i in range(20)]
    point, (lo, hi) = speedup_ci(rounds, rounds)
    assert point == 1.0 and lo <= 1.0 <= hi


def test_speedup_direction_and_interval_order() -> None:
    base = [[2.0 + 0.01 * j for j in range(8)] for _ in range(15)]
    cand = [[1.0 + 0.005 * j for j in range(8)] for _ in range(15)]
    point, (lo, hi) = speedup_ci(base, cand)
    assert point == pytest.approx(2.0, rel=0.01) and lo <= point <= hi and lo > 1.5


def test_drift_shared_by_a_round_cancels() -> None:
    # the machine gets 3x slower halfway; paired rounds still say 2x
    base = [[2.0 * (3 if i >= 10 else 1)] * 5 for i in range(20)]
    cand = [[1.0 * (3 if i >= 10 else 1)] * 5 for i in range(20)]
    point, (lo, hi) = speedup_ci(base, cand)
    assert math.isclose(point, 2.0) and math.isclose(lo, 2.0) and math.isclose(hi, 2.0)



def test_the_mean_of_independent_ratios_has_a_t_interval_of_their_logs() -> None:
    point, (lo, hi) = ratio_mean_ci([1.1, 1.21])
    assert point == pytest.approx((1.1 * 1.21) ** 0.5)
    half = 12.706 * (math.log(1.21) - math.log(1.1)) / 2  # two ratios: sd / sqrt(2) is half their distance
    assert (lo, hi) == (pytest.approx(point * math.exp(-half)), pytest.approx(point * math.exp(half)))
    assert ratio_mean_ci([1.2, 1.2, 1.2]) == (pytest.approx(1.2), (pytest.approx(1.2), pytest.approx(1.2)))
    # More agreeing samples, a narrower interval around the same centre.
    few, many = ratio_mean_ci([1.1, 1.2, 1.15]), ratio_mean_ci([1.1, 1.2, 1.15] * 2)
    assert many[1][1] - many[1][0] < few[1][1] - few[1][0]
    for bad in ([1.1], [1.0] * 12, [1.1, 0.0]):
        with pytest.raises(ValueError):
            ratio_mean_ci(bad)
