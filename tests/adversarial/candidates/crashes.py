def affine(x, w):
    raise ValueError("candidate blew up")
