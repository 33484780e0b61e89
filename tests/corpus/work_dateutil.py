"""Parse free-form dates and times with dateutil's parser (its result object keeps fields in slots)."""
import random
import sys

from dateutil import parser

rng = random.Random(0)
months = ["Jan", "February", "Mar", "April", "Sep", "Dec"]
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 1500):
    form = i % 4
    if form == 0:
        text = f"{rng.randint(1, 28)} {rng.choice(months)} {rng.randint(1990, 2030)} {rng.randint(1, 12)}:{rng.randint(0, 59):02d} {rng.choice(['am', 'pm'])}"
    elif form == 1:
        text = f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00"
    elif form == 2:
        text = f"{rng.choice(months)} {rng.randint(1, 28)}, {rng.randint(1990, 2030)} at {rng.randint(1, 12)}:{rng.randint(0, 59):02d}pm"
    else:
        text = f"{rng.randint(1, 12)}/{rng.randint(1, 28)}/{rng.randint(90, 99)}"
    print(i, parser.parse(text).isoformat())
