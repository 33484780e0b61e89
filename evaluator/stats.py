"""Small, tested statistics: medians, bootstrap intervals of a median ratio."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence


def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("median of nothing")
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def quantile(xs: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile, q in [0, 1]."""
    s = sorted(xs)
    if not s:
        raise ValueError("quantile of nothing")
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median_ci(xs: Sequence[float], resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval of the median."""
    rng = random.Random(seed)
    n = len(xs)
    meds = [median([xs[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples)]
    return quantile(meds, 0.025), quantile(meds, 0.975)


def speedup_ci(base_rounds: Sequence[Sequence[float]], cand_rounds: Sequence[Sequence[float]],
               resamples: int = 2000, seed: int = 0,
               center: Callable[[Sequence[float]], float] = median) -> tuple[float, tuple[float, float]]:
    """Speedup and its 95% interval from interleaved rounds.

    Each round pairs a baseline batch with a candidate batch run next to it in time; its ratio of
    `center`s (medians; sums for a mix of different calls, where the total is what counts) cancels
    drift that spans rounds. The speedup is the median of the round ratios, and the interval a
    bootstrap over rounds of that median.
    """
    if len(base_rounds) != len(cand_rounds) or not base_rounds:
        raise ValueError("need the same, non-zero number of baseline and candidate rounds")
    ratios = [center(b) / center(c) for b, c in zip(base_rounds, cand_rounds, strict=True)]
    point = median(ratios)
    rng = random.Random(seed)
    k = len(ratios)
    meds = [median([ratios[rng.randrange(k)] for _ in range(k)]) for _ in range(resamples)]
    return point, (quantile(meds, 0.025), quantile(meds, 0.975))


# Student's t, two-sided 95%, by degrees of freedom (1-10): few samples, a wide interval.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def ratio_mean_ci(ratios: Sequence[float]) -> tuple[float, tuple[float, float]]:
    """The geometric mean of independent ratios (each from its own experiment) and its 95% t interval,
    from the spread of their logs; at least two ratios, at most eleven."""
    if not 2 <= len(ratios) <= len(_T95) + 1 or min(ratios) <= 0:
        raise ValueError("need two to eleven positive ratios")
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    half = _T95[len(logs) - 2] * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), (math.exp(mean - half), math.exp(mean + half))


def total_ratio_ci(base: Sequence[float], cand: Sequence[float], weights: Sequence[float] | None = None,
                   resamples: int = 2000, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """Ratio of the weighted total times of paired calls (the same input on both sides) and its 95%
    interval, a bootstrap over the pairs."""
    if len(base) != len(cand) or not base:
        raise ValueError("need the same, non-zero number of paired times")
    w = list(weights) if weights is not None else [1.0] * len(base)
    if len(w) != len(base):
        raise ValueError("need one weight per pair")

    def ratio(idx: Sequence[int]) -> float:
        return sum(w[i] * base[i] for i in idx) / max(sum(w[i] * cand[i] for i in idx), 1e-300)

    rng = random.Random(seed)
    n = len(base)
    ratios = [ratio([rng.randrange(n) for _ in range(n)]) for _ in range(resamples)]
    return ratio(range(n)), (quantile(ratios, 0.025), quantile(ratios, 0.975))


def geomean(xs: Sequence[float]) -> float:
    """Geometric mean, computed in log space."""
    if not xs or any(x <= 0 for x in xs):
        raise ValueError("geometric mean needs positive values")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))
