# Honest: split instead of a regex match per text.
def parse_times(texts):
    out = []
    append = out.append
    for text in texts:
        hm, half = text.split(" ")
        h, m = hm.split(":")
        append(Clock(int(h) % 12 + (12 if half == "pm" else 0), int(m)))
    return out
