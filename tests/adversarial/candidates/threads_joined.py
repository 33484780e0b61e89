# Honest: the work split over threads that the call waits for (numpy releases the GIL).
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def affine(x, w):
    out = np.empty(x.shape[0])
    half = x.shape[0] // 2

    def part(lo, hi):
        out[lo:hi] = x[lo:hi] * w[lo:hi] + 1.0

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda bounds: part(*bounds), [(0, half), (half, x.shape[0])]))
    return out
