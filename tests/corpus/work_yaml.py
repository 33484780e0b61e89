"""Load YAML with PyYAML's pure-Python loader (scanner, parser and composer objects, marks, events)."""
import random
import sys
import zlib

import yaml

rng = random.Random(0)
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 100):
    items = "\n".join(f"  - name: item{k}\n    size: {rng.randint(0, 999)}\n    tags: [a, b, {k}]\n"
                      f"    ratio: {rng.random():.3f}" for k in range(rng.randint(5, 30)))
    doc = yaml.load(f"doc: {i}\nflag: true\nitems:\n{items}\n", Loader=yaml.Loader)
    print(i, len(doc["items"]), zlib.crc32(repr(doc).encode()))
