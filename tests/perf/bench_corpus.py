"""Benchmark: verdicts on the real-code corpus (tests/corpus), through the real CLI.

Run: .venv/bin/python tests/perf/bench_corpus.py [--top N] [--scale X] [--only NAME,NAME] [--json OUT]

For each library (pinned in the dev extra): its sources copied into a scratch workspace, its workload
profiled with py-spy, the N hottest functions of its own code captured with the defaults, and for each
captured target an identical copy (must be `not_faster`) and a planted wrong rewrite (the original with
its result changed on about a quarter of the distinct captured calls, chosen from the store; must be
`incorrect`) judged by `redline optimise`.
Prints per target the calls kept of those seen, both verdicts (with the reason where it is not the
expected one) and per library the capture overhead: `redline capture`'s wall time over the plain
run's, and the program's run alone (the same less redline's own start, timed as `redline capture` of
the same targets on an empty program), each the median of three alternating runs; then a summary
line: copies `not_faster`, wrong rewrites `incorrect`, false accepts, overhead medians and worst.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "corpus"))
from corpus import Result, bench_arguments, libraries, run_library


def main() -> None:
    ap = bench_arguments()
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    chosen = libraries(args.only)
    root = Path(tempfile.mkdtemp(prefix="redline-bench-corpus-"))
    results: list[Result] = []
    started = time.perf_counter()
    for lib in chosen:
        r = run_library(lib, root / lib.name, args.top, args.scale, repeats=3)
        results.append(r)
        print(f"{lib.name}: capture overhead {r.overhead:.2f}x, the program's run {r.run_overhead:.2f}x (plain "
              f"{r.plain_s:.2f} s, captured {r.capture_s:.2f} s, redline's start {r.start_s:.2f} s)"
              + (f"  ERROR {r.error}" if r.error else ""), flush=True)
        for row in r.rows:
            print(f"  {row.target}: kept {row.kept}/{row.seen}; copy {row.copy}; wrong {row.wrong} "
                  f"(planted on {row.wrong_on} calls; {row.optimise_s:.0f} s)", flush=True)
            if row.copy != "not_faster":
                print(f"    copy: {row.copy_reason[:400]}")
            if row.wrong not in ("incorrect", "n/a (static or class method)") and row.wrong != row.copy:
                print(f"    wrong: {row.wrong_reason[:400]}")
    rows = [row for r in results for row in r.rows]
    judged = [row for row in rows if row.kept]
    copies = sum(row.copy == "not_faster" for row in judged)
    planted = [row for row in judged if not row.wrong.startswith("n/a")]
    wrong = sum(row.wrong == "incorrect" for row in planted)
    false_accepts = sum(row.wrong == "ok" for row in planted)
    overheads = sorted(r.overhead for r in results if r.overhead)
    runs = sorted(r.run_overhead for r in results if r.overhead)
    starts = sorted(r.start_s for r in results if r.overhead)
    print(f"summary: {len(chosen)} libraries, {len(rows)} targets captured, {len(judged)} with calls kept; identical copy "
          f"not_faster on {copies}/{len(judged)}; planted wrong rewrite incorrect on {wrong}/{len(planted)}; "
          f"false accepts {false_accepts}; capture overhead median "
          f"{statistics.median(overheads) if overheads else 0:.2f}x, worst {max(overheads, default=0):.2f}x; the "
          f"program's run median {statistics.median(runs) if runs else 0:.2f}x, worst {max(runs, default=0):.2f}x; "
          f"redline's start median {statistics.median(starts) if starts else 0:.2f} s; "
          f"{time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([{**asdict(r), "overhead": r.overhead} for r in results], indent=2))


if __name__ == "__main__":
    main()
