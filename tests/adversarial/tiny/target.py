"""A reference whose values are far below float64's absolute tolerance."""

import numpy as np


def tiny(x: np.ndarray) -> np.ndarray:
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = x[i] * 1e-9
    return out


def make_inputs(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(2000)
