"""A generator whose caller changes each item it is given (as sqlparse regroups the statements its
splitter yields), each item referring to the one before it."""

class Stmt:
    def __init__(self, words, prev):
        self.words = words
        self.prev = prev  # the statement yielded before this one
        self.grouped = False


def split(text):
    prev = None
    for part in text.split(";"):
        if part.strip():
            prev = Stmt(part.split(), prev)
            yield prev


def work():
    total = 0
    for i in range(300):
        for stmt in split(f"select a{i} from t; update t set x = {i}; delete from t where y = {i % 7}"):
            stmt.words.append("<grouped>")  # the caller changes what it was given
            stmt.grouped = True
            total += len(stmt.words)
    return total


print(work())
