def affine(x, w):
    out = x * w + 1.0
    x[0] = 0.0  # the right answer, but the caller's input is changed
    return out
