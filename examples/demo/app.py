"""A small signal-processing job: smooth a noisy series, then find its peaks.

`rolling_zscore` is written the way quick analysis code often is, with Python loops over a
NumPy array; it is the hot spot `redline demo` profiles and optimises.
"""

from __future__ import annotations

import numpy as np


def rolling_zscore(xs: np.ndarray, window: int) -> np.ndarray:
    """z-score of each point against the `window` points before it (0 where there are too few)."""
    n = xs.shape[0]
    out = np.zeros(n)
    for i in range(window, n):
        total = 0.0
        sq = 0.0
        for j in range(i - window, i):
            total += xs[j]
            sq += xs[j] * xs[j]
        mean = total / window
        var = sq / window - mean * mean
        out[i] = (xs[i] - mean) / np.sqrt(var) if var > 0 else 0.0
    return out


def peaks(z: np.ndarray, threshold: float) -> list[int]:
    """Indices where the z-score crosses `threshold` upwards."""
    return [i for i in range(1, len(z)) if z[i - 1] < threshold <= z[i]]


def make_inputs(seed: int) -> tuple[np.ndarray, int]:
    """Arguments for rolling_zscore: a noisy series with a few spikes, and a window."""
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal(4000).cumsum() * 0.1 + rng.standard_normal(4000)
    xs[rng.integers(0, 4000, 8)] += 6.0
    return xs, 32


def main() -> None:
    total = 0
    for seed in range(12):
        xs, window = make_inputs(seed)
        total += len(peaks(rolling_zscore(xs, window), 3.0))
    print(f"{total} peaks")


if __name__ == "__main__":
    main()
