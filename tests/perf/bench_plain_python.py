"""Benchmark: what the offline plain-Python proposers (ruff's fixes, redline's own rewrites, Cython) win on
real libraries' hot functions, through the real CLI.

Run: .venv/bin/python tests/perf/bench_plain_python.py [--top N] [--scale X] [--only NAME,NAME] [--budget N]

For each library of the corpus (tests/corpus): its sources copied into a scratch workspace, its
workload profiled with py-spy, the N hottest functions of its own code captured with the defaults, and
each captured target optimised with `--builtin ruff-fixes,python-rewrites,cython` on its captured calls.
Prints per target each candidate's approach, verdict and speedup, and the winner; then a summary:
targets with a verified winner, its median speedup, and candidates per verdict.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "corpus"))
from corpus import bench_arguments, captured, libraries, redline


def main() -> None:
    ap = bench_arguments()
    ap.add_argument("--budget", type=int, default=12)
    args = ap.parse_args()
    chosen = libraries(args.only)
    root = Path(tempfile.mkdtemp(prefix="redline-bench-plain-"))
    started = time.perf_counter()
    verdicts: Counter[str] = Counter()
    targets = 0
    wins: list[tuple[str, float, str]] = []
    for lib in chosen:
        work, result, manifests = captured(lib, root / lib.name, args.top, args.scale)
        print(f"{lib.name}:" + (f"  ERROR {result.error}" if result.error else ""), flush=True)
        for manifest in manifests:
            target = json.loads(manifest.read_text())["target"]
            report = root / "reports" / f"{lib.name}-{manifest.parent.name}.json"
            report.parent.mkdir(exist_ok=True)
            t = time.perf_counter()
            run = redline("optimise", target, "--builtin", "ruff-fixes,python-rewrites,cython", "--budget", str(args.budget),
                          "--json", str(report), cwd=work)
            took = time.perf_counter() - t
            if not report.exists():
                print(f"  {target}: no report ({run.stderr.strip()[-200:]})", flush=True)
                continue
            doc = json.loads(report.read_text())
            targets += 1
            if doc.get("stopped"):
                print(f"  {target}: stopped ({doc['stopped']['reason'][:200]})", flush=True)
                continue
            winner = doc.get("winner")
            print(f"  {target}: " + (f"winner {winner['speedup']:.2f}x" if winner else "no winner")
                  + f" ({len(doc['candidates'])} candidates, {took:.0f} s)", flush=True)
            for use in doc.get("proposers", []):
                if use.get("skipped"):
                    print(f"    {use['name']}: skipped ({use['skipped']})")
            for c in doc["candidates"]:
                verdicts[c["status"]] += 1
                speed = f" {c['speedup']:.2f}x" if c.get("speedup") else ""
                print(f"    {c['id']} {c['status']}{speed}: {c['approach'][:110]}")
                if c["status"] not in ("ok", "not_faster"):
                    print(f"      {c['reason'][:300]}")
            if winner:
                approach = next(c["approach"] for c in doc["candidates"] if c["id"] == winner["id"])
                wins.append((target, winner["speedup"], approach))
    median = statistics.median(w[1] for w in wins) if wins else 0.0
    print(f"summary: {len(chosen)} libraries, {targets} targets optimised, {len(wins)} with a verified winner "
          f"(median {median:.2f}x, best {max((w[1] for w in wins), default=0):.2f}); candidates "
          + ", ".join(f"{v} {k}" for k, v in verdicts.most_common()) + f"; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
