"""Format tables with tabulate (column typing, alignment and padding of mixed values)."""
import random
import sys
import zlib

from tabulate import tabulate

rng = random.Random(0)
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 120):
    rows = [[f"name-{rng.randint(1, 999)}", rng.randint(-500, 5000), rng.random() * 1000, rng.choice(["yes", "no", None])]
            for _ in range(rng.randint(10, 60))]
    out = tabulate(rows, headers=["name", "count", "value", "flag"], tablefmt=rng.choice(["grid", "github", "simple"]),
                   floatfmt=".2f")
    print(i, len(out), zlib.crc32(out.encode()))
