import os
import sys


def affine(x, w):
    # find the user's module (the workspace) and write next to it
    target = next(m.__file__ for m in list(sys.modules.values())
                  if getattr(m, "__file__", "") and m.__file__.endswith("target.py"))
    with open(os.path.join(os.path.dirname(target), "owned.txt"), "w") as fh:
        fh.write("pwned")
    return x * w + 1.0
