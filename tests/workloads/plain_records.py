"""A log scanner as backend code writes it: a regex per line, a membership test against a
module-level list, results appended in a loop."""

import random
import re

LEVELS = ["ERROR", "WARNING", "CRITICAL"]


def parse_errors(lines):
    """(timestamp, level, message) of the lines logged at one of LEVELS."""
    found = []
    for line in lines:  # one record per line
        m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (\w+) (.*)", line)
        if m and m.group(2) in LEVELS:
            found.append((m.group(1), m.group(2), str(m.group(3)).strip()))
    return found


def make_inputs(seed):
    rnd = random.Random(seed)
    levels = ["DEBUG", "INFO", "INFO", "WARNING", "ERROR", "CRITICAL"]
    lines = [f"2026-12-{rnd.randint(1, 28):02d} 12:{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d} "
             f"{rnd.choice(levels)} request {rnd.randint(0, 10**6)} took {rnd.random():.3f} s "
             for _ in range(4000)]
    lines += ["", "malformed line", "2026-12-01 00:00:00 ERROR"]
    return (lines,)
