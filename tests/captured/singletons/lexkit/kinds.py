"""Token kinds as module-level singletons, compared by identity (as sqlparse's token types are)."""


class Kind:
    def __init__(self, name):
        self.name = name


WORD = Kind("word")
NUMBER = Kind("number")


def label(kinds):
    return ["w" if k is WORD else "n" if k is NUMBER else "?" for k in kinds]
