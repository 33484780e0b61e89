def affine(x, w):
    x *= w
    x += 1.0
    return x
