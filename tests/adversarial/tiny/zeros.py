import numpy as np


def tiny(x):
    return np.zeros(x.shape[0])
