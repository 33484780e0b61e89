"""The script that runs the parser beside four steps of its own, each hotter than the parser's own lines and
cooler than the parser with its helpers (tests/test_capture.py, tests/test_server_features.py)."""

import time

from parser_mod import parse


def a(n):
    return sum(i % 3 for i in range(n))


def b(n):
    return sum(i % 5 for i in range(n))


def c(n):
    return sum(i % 7 for i in range(n))


def d(n):
    return sum(i % 11 for i in range(n))


def main():
    text = ";".join(f"key{i}={i * 7919 % 100000:05d}" for i in range(1000))
    end = time.perf_counter() + 2.0
    while time.perf_counter() < end:
        parse(text)
        for step in (a, b, c, d):
            step(7_000)


main()
