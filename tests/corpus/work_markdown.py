"""Render Markdown documents to HTML with Python-Markdown (compiled regexes, element trees)."""
import random
import sys
import zlib

import markdown

rng = random.Random(0)
words = ["alpha", "**bold**", "_em_", "`code`", "[link](http://x.y/z)", "beta", "gamma", "delta"]
md = markdown.Markdown(extensions=["tables", "fenced_code"])
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 120):
    parts = [f"# Title {i}", ""]
    for _ in range(rng.randint(2, 6)):
        parts.append(" ".join(rng.choices(words, k=rng.randint(5, 40))))
        parts.append("")
        if rng.random() < 0.4:
            parts += [f"- item {k} {rng.choice(words)}" for k in range(rng.randint(1, 5))] + [""]
    html = md.reset().convert("\n".join(parts))
    print(i, len(html), zlib.crc32(html.encode()))
