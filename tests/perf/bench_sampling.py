"""Benchmark: what py-spy's blocking sampling (redline profile's default) costs the profiled program,
against non-blocking sampling and no profiler, and how many stacks non-blocking sampling tears.

Run: .venv/bin/python tests/perf/bench_sampling.py [--runs N] [--rate HZ]

For two workloads (tests/workloads/deep_calls.py: recursion whose depth changes all the time;
cpu_work.py: two flat loops), the median wall time of N runs of each: plain, under `redline profile`
(blocking), under `redline profile --nonblocking`; printed as ratios to plain, side by side, with the
share of samples whose stack does not start at the program's entry (torn) for each sampling mode.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOADS = Path(__file__).resolve().parent.parent / "workloads"
REDLINE = [sys.executable, "-m", "redline.cli"]


def timed(cmd: list[str], cwd: Path) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t


def torn(trace: Path) -> float:
    total = bad = 0
    for line in trace.read_text().splitlines():
        frames, _, count = line.rpartition(" ")
        if ".py:" not in frames or "<frozen" in frames.split(";")[0]:
            continue  # no Python frame, or the interpreter's start-up imports (run from C)
        total += int(count)
        bad += int(count) if not frames.startswith("<module>") else 0
    return bad / total if total else 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rate", type=int, default=100)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="redline-bench-sampling-"))
    for name, argv in (("deep_calls.py", ["150"]), ("cpu_work.py", [])):
        (work / name).write_text((WORKLOADS / name).read_text())
        program = [sys.executable, name, *argv]
        times: dict[str, list[float]] = {"plain": [], "blocking": [], "nonblocking": []}
        tears: dict[str, list[float]] = {"blocking": [], "nonblocking": []}
        for i in range(args.runs):  # interleaved, so drift hits every mode alike
            times["plain"].append(timed(program, work))
            for mode in ("blocking", "nonblocking"):
                trace = work / f"{mode}-{i}.txt"
                flags = ["--nonblocking"] if mode == "nonblocking" else []
                times[mode].append(timed([*REDLINE, "profile", *flags, "--format", "raw", "--rate", str(args.rate),
                                          "-o", str(trace), "--", *program], work))
                tears[mode].append(torn(trace))
        plain = statistics.median(times["plain"])
        print(f"{name}: plain {plain:.2f} s; blocking {statistics.median(times['blocking']) / plain:.2f}x "
              f"(torn stacks {statistics.median(tears['blocking']):.1%}); nonblocking "
              f"{statistics.median(times['nonblocking']) / plain:.2f}x (torn stacks "
              f"{statistics.median(tears['nonblocking']):.1%}); median of {args.runs}, {args.rate} Hz", flush=True)


if __name__ == "__main__":
    main()
