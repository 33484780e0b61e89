# Honest: one comprehension, the members bound to locals.
def levels(values):
    low, mid, high = Level.LOW, Level.MID, Level.HIGH
    return [low if v < 10 else mid if v < 100 else high for v in values]
