"""A fast subset of the real-code corpus (tests/corpus; the whole of it is tests/perf/bench_corpus.py):
real libraries copied into scratch workspaces, profiled, their hottest functions captured with the
defaults, and for each captured target an identical copy (`not_faster`) and a planted wrong rewrite
(`incorrect`) judged through the real CLI. No planted rewrite may be accepted."""

from __future__ import annotations

from pathlib import Path

import pytest
from corpus.corpus import LIBRARIES, run_library

# A result kept in __slots__; mixed rows and type inference; token types linked both ways through sets,
# lexers whose class state a metaclass builds on first use, and generators.
SUBSET = ["python-dateutil", "tabulate", "pygments"]


@pytest.mark.parametrize("name", SUBSET)
def test_identical_copies_are_not_faster_and_planted_rewrites_incorrect(name: str, tmp_path: Path) -> None:
    lib = next(lib for lib in LIBRARIES if lib.name == name)
    result = run_library(lib, tmp_path, top=2, scale=0.3)
    assert not result.error, result.error
    judged = [row for row in result.rows if row.kept]
    assert len(judged) == 2, [(r.target, r.kept, r.seen) for r in result.rows]
    for row in judged:
        assert row.copy == "not_faster", (row.target, row.copy_reason)
        assert row.wrong == "incorrect", (row.target, row.wrong, row.wrong_reason)
