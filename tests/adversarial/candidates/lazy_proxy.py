import numpy as np


class Lazy(np.ndarray):
    pass


def affine(x, w):
    return (x * w + 1.0).view(Lazy)
