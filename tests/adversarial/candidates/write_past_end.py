import ctypes


def affine(x, w):
    out = x * w + 1.0
    ctypes.memset(out.ctypes.data + out.nbytes, 0, 64)
    return out
