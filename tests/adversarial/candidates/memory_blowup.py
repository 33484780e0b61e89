def affine(x, w):
    hog = bytearray(64 << 30)
    return hog
