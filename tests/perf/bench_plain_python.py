"""Benchmark: what the offline plain-Python proposers (ruff's fixes, redline's own rewrites, Cython, mypyc) win on
real libraries' hot functions, through the real CLI.

Run: .venv/bin/python tests/perf/bench_plain_python.py [--top N] [--scale X] [--only NAME,NAME] [--budget N]

For each library of the corpus (tests/corpus): its sources copied into a scratch workspace, its
workload profiled with py-spy, the N hottest functions of its own code captured with the defaults, and
each captured target optimised with `--builtin ruff-fixes,python-rewrites,cython,mypyc` on its captured calls.
Then the library's winners are written into a copy of the workspace (as accepting them in the editor
writes them) and the workload runs plain and with them, alternating five times: its printed output
compared byte for byte, its median wall time as a ratio (bytecode written and the compiled builds done in a
first run, not timed).
Prints per target each candidate's approach, verdict and speedup, and the winner; per library the
workload's figures; then a summary: targets with a verified winner, their median and geometric mean
speedup, candidates per verdict, and the workloads whose output the winners changed.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "corpus"))
from corpus import Library, alternate, bench_arguments, captured, libraries, redline
from redline.evaluator.target import Target, TargetError, apply_candidate, locate


def with_winners(lib: Library, work: Path, winners: list[tuple[str, str]], scale: float, cache: Path) -> str:
    """The workload plain and with `winners` ((target, code)) written into a copy of `work`: whether its
    output is the same, and its median wall time each way (five alternating runs after a first one)."""
    applied = work.parent / (work.name + "-applied")
    shutil.copytree(work, applied, ignore=shutil.ignore_patterns(".redline", "__pycache__"))
    for spec, code in winners:
        loc = locate(str(applied / spec))
        target = Target(loc.file, loc.qualname, loc.fn, loc.source, applied, None)  # type: ignore[arg-type]
        try:
            target.file.write_text(apply_candidate(target, code))
        except TargetError as exc:
            return f"workload not run: the winner for {spec} cannot be written in ({exc})"
    line, fell_back, _ = alternate(lib, work, applied, scale, {"REDLINE_CYTHON_CACHE": str(cache)})
    return (f"workload with {len(winners)} winner(s) applied: {line}"
            + ("; a compiled winner fell back to plain Python" if fell_back else ""))


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
    changed: list[str] = []
    for lib in chosen:
        work, result, manifests = captured(lib, root / lib.name, args.top, args.scale, repeats=0)
        print(f"{lib.name}:" + (f"  ERROR {result.error}" if result.error else ""), flush=True)
        winners: list[tuple[str, str]] = []
        for manifest in manifests:
            target = json.loads(manifest.read_text())["target"]
            report = root / "reports" / f"{lib.name}-{manifest.parent.name}.json"
            report.parent.mkdir(exist_ok=True)
            t = time.perf_counter()
            run = redline("optimise", target, "--builtin", "ruff-fixes,python-rewrites,cython,mypyc", "--budget", str(args.budget),
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
                won = next(c for c in doc["candidates"] if c["id"] == winner["id"])
                wins.append((target, winner["speedup"], won["approach"]))
                winners.append((str(Path(doc["target"]["file"]).relative_to(work)) + "::" + doc["target"]["function"],
                                won["code"]))
        if winners:
            line = with_winners(lib, work, winners, args.scale, root / "cython-cache")
            print(f"  {line}", flush=True)
            if "DIFFER" in line or "not run" in line:
                changed.append(lib.name)
    speedups = [w[1] for w in wins]
    print(f"summary: {len(chosen)} libraries, {targets} targets optimised, {len(wins)} with a verified winner "
          f"(median {statistics.median(speedups) if wins else 0:.2f}x, geomean "
          f"{statistics.geometric_mean(speedups) if wins else 0:.2f}x, best {max(speedups, default=0):.2f}x); "
          "candidates " + ", ".join(f"{v} {k}" for k, v in verdicts.most_common())
          + f"; workloads whose output the winners changed or that could not take them: {', '.join(changed) or 'none'}"
          + f"; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
