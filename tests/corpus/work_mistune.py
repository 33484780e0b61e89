"""Render Markdown with mistune (a regex-driven block and inline parser keeping its state objects)."""
import random
import sys
import zlib

import mistune

rng = random.Random(0)
words = ["alpha", "**bold**", "*em*", "`code`", "[link](http://x.y/z)", "beta", "gamma", "> quote"]
render = mistune.create_markdown()
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 200):
    parts = [f"## Section {i}", ""]
    for _ in range(rng.randint(2, 6)):
        parts.append(" ".join(rng.choices(words, k=rng.randint(5, 40))))
        parts.append("")
    html = render("\n".join(parts))
    print(i, len(html), zlib.crc32(html.encode()))
