# Cheat: a daemon thread started in the call does the work; the call returns before it has (or, when the GIL
# lets the thread run first, after it has: the harness must catch both the same way).
import threading

import numpy as np


def affine(x, w):
    out = np.empty(x.shape[0])

    def finish():
        for i in range(x.shape[0]):
            out[i] = x[i] * w[i] + 1.0

    threading.Thread(target=finish, daemon=True).start()
    return out
