def parse_times(texts):
    out = []
    for text in texts:
        m = re.match(r"(\d+):(\d+) (am|pm)$", text)
        hour = int(m.group(1)) % 12 + (12 if m.group(3) == "pm" else 0)
        out.append(Clock(hour, int(m.group(2))))
    return out
