"""Benchmark: speedscope and torch.profiler traces into hotspots, against json.load, side by side.

Run: .venv/bin/python tests/perf/bench_profilers.py
Builds a 1,000,000-sample speedscope file from a real py-spy recording of tests/workloads/cpu_work.py,
then measures in fresh processes (so peak RSS is each step's own): json.load of the file, and
redline's read + hotspots of it. Prints the time ratio and peak memory against the file size.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
sys.path.insert(0, str(TESTS))
from helpers import GPU, WORKLOAD, py_spy_record  # noqa: E402

STEP = r"""
import json, resource, sys, time
path, mode, root = sys.argv[1], sys.argv[2], sys.argv[3]
import redline.profilers as P
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
if mode == "json":
    with open(path) as fh:
        json.load(fh)
else:
    P.report([path], root)
dt = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"s": dt, "peak_kb": peak, "base_kb": base}))
"""


def step(path: Path, mode: str, root: Path, repeat: int = 3) -> dict[str, float]:
    best: dict[str, float] | None = None
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", STEP, str(path), mode, str(root)], capture_output=True, text=True,
                             check=True).stdout
        r = json.loads(out)
        if best is None or r["s"] < best["s"]:
            best = r
    assert best is not None
    return best


def main() -> None:
    tmp = Path(tempfile.mkdtemp())
    rec = py_spy_record(TESTS / "workloads" / "cpu_work.py", tmp / "rec.json", "speedscope", rate=250)
    doc = json.loads(rec.read_text())
    prof = doc["profiles"][0]
    samples, weights = prof["samples"], prof["weights"]
    n = 1_000_000
    prof["samples"] = [samples[i % len(samples)] for i in range(n)]
    prof["weights"] = [weights[i % len(weights)] for i in range(n)]
    big = tmp / "big.speedscope.json"
    big.write_text(json.dumps(doc))
    size_kb = big.stat().st_size / 1024
    j = step(big, "json", TESTS)
    r = step(big, "redline", TESTS)
    extra_kb = r["peak_kb"] - r["base_kb"]
    print(f"speedscope 1,000,000 samples, {size_kb / 1024:.1f} MiB")
    print(f"  json.load            {j['s']:.3f} s")
    print(f"  redline hotspots     {r['s']:.3f} s   ratio {r['s'] / j['s']:.2f}x json.load (target <= 1.5x)")
    print(f"  peak memory growth   {extra_kb / 1024:.1f} MiB = {extra_kb / size_kb:.2f}x file size (target <= 3x); "
          f"json.load's growth {(j['peak_kb'] - j['base_kb']) / size_kb:.2f}x")
    ops = GPU / "torch_trace_ops.json.gz"
    if ops.exists():
        t = step(ops, "redline", WORKLOAD)
        print(f"torch_trace_ops.json.gz (64,847 events) into hotspots: {t['s']:.3f} s (target < 1 s)")


if __name__ == "__main__":
    main()
