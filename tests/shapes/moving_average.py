"""Edge-shape tests: a moving average written as loops, timed at length 400."""

import numpy as np


def moving_average(xs, k):
    n = xs.shape[0]
    out = np.empty(n)
    for i in range(n):
        lo = max(0, i - k + 1)
        total = 0.0
        for j in range(lo, i + 1):
            total += xs[j]
        out[i] = total / (i + 1 - lo)
    return out


def make_inputs(seed):
    return np.random.default_rng(seed).standard_normal(400), 8
