import random


def affine(x, w):
    out = x * w + 1.0
    if random.SystemRandom().random() < 0.5:
        out[random.SystemRandom().randrange(out.shape[0])] += 1e-3
    return out
