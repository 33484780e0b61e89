# Wrong at 12 pm: hour 24 for "12:35 pm" (the slot `hour` differs; the rest of the result is right).
def parse_times(texts):
    out = []
    for text in texts:
        hm, half = text.split(" ")
        h, m = hm.split(":")
        out.append(Clock(int(h) % 12 + (12 if half == "pm" else 0) if h != "12" else (24 if half == "pm" else 0),
                         int(m)))
    return out
