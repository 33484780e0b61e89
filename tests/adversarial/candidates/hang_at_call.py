def affine(x, w):
    while True:
        pass
