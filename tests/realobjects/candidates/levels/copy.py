def levels(values):
    out = []
    for v in values:
        for limit, level in ((10, Level.LOW), (100, Level.MID)):
            if v < limit:
                out.append(level)
                break
        else:
            out.append(Level.HIGH)
    return out
