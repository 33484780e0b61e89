import sys

from rank.scorer import Scorer


def make(weight):
    class Options:  # a local class
        def __init__(self):
            self.weight = weight

    bonus = weight / 10
    return Scorer(lambda s: len(s) + bonus, Options())  # a lambda closing over `bonus`


scorers = [make(w) for w in (1.0, 2.5)]
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 40):
    print(scorers[i % 2].score(["alpha", "be", "gamma" * (i % 5)]))
