"""A result class whose own pickle keeps part of its state (a cached slot is left out), as pyparsing's
ParseResults does."""


class Result:
    __slots__ = ("items", "_size")

    def __init__(self, items):
        self.items = items
        self._size = len(items)

    def __getstate__(self):
        return {"items": self.items}

    def __setstate__(self, state):
        self.items = state["items"]


def collect(words):
    return Result([w.upper() for w in words if w])
