"""Humanise numbers, sizes and durations with humanize (text and number formatting)."""
import datetime
import random
import sys

import humanize

rng = random.Random(0)
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 4000):
    n = rng.randint(0, 10**rng.randint(1, 12))
    print(i, humanize.intcomma(n), humanize.naturalsize(n), humanize.intword(n), humanize.ordinal(i),
          humanize.naturaldelta(datetime.timedelta(seconds=rng.randint(0, 10**6))))
