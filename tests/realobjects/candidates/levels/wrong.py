# Wrong at one boundary: 10 is MID in the reference.
def levels(values):
    low, mid, high = Level.LOW, Level.MID, Level.HIGH
    return [low if v <= 10 else mid if v < 100 else high for v in values]
