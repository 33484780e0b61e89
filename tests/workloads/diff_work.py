"""A program whose hot function of its own spends its time in the standard library (difflib): little
self time, most of the profile inclusive. `main` only calls `closest`. It prints as real programs do, a
line per item on stdout and on stderr, which nothing a server runs may pass into its protocol stream."""

import difflib
import sys


def closest(word, words):
    best, score = None, 0.0
    for w in words:
        r = difflib.SequenceMatcher(None, word, w).ratio()
        if r > score:
            best, score = w, r
    return best


def main(n):
    words = [f"item-{i * 7919 % 1000:03d}-of-the-catalogue-{i % 7}" for i in range(300)]
    hits = 0
    for i in range(n):
        best = closest(f"item-{i:03d}-of-a-catalogue", words)
        hits += best is not None
        print(f"{i}: {best}")
        print(f"progress {i + 1}/{n}", file=sys.stderr)
    print(hits)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
