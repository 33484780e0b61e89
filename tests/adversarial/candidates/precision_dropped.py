import numpy as np


def affine(x, w):
    return (x.astype(np.float16) * w.astype(np.float16) + np.float16(1.0)).astype(np.float64)
