"""Parse TOML documents with tomli (a position-passing parser over str, dates, nested tables)."""
import random
import sys
import zlib

import tomli

VALUES = ["1", "2.5", "true", "[1, 2, 3]", '{ a = 1, b = "x" }', '"text"']
rng = random.Random(0)
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 200):
    parts = [f'title = "doc {i}"', f"when = 1979-05-27T07:{i % 60:02d}:00Z"]
    for t in range(rng.randint(3, 12)):
        parts.append(f"[table{t}.sub]")
        parts += [f'key{k} = {rng.choice(VALUES)}'
                  for k in range(rng.randint(2, 10))]
    doc = tomli.loads("\n".join(parts))
    print(i, len(doc), zlib.crc32(repr(sorted(doc)).encode()))
