"""The reference for the adversarial suite: an affine map written as a Python loop."""

import numpy as np


def affine(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    out = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        out[i] = x[i] * w[i] + 1.0
    return out


def make_inputs(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(3000), rng.standard_normal(3000)
