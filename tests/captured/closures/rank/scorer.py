"""A scorer configured by its caller with a key function (a lambda or a closure) and options of a class
the caller defines inside a function: what real programs hand to libraries."""


class Scorer:
    def __init__(self, key, options):
        self.key = key
        self.options = options
        self.calls = 0

    def score(self, items):
        self.calls += 1
        total = 0.0
        for item in items:
            total += self.key(item) * self.options.weight
        return round(total, 6)
