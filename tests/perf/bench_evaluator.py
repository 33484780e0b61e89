"""Benchmark: the evaluator's noise floor and its overhead per candidate, through the real sandbox.

Run: .venv/bin/python tests/perf/bench_evaluator.py
- Noise floor: the reference against an identical copy of itself, 40 separate evaluations. None may
  be a winner; it prints how many won in their first pair of workers (and so were timed again in a
  second pair, which overturned them), and the spread of the reported speedups.
- Overhead: wall time of one full evaluation (two sandboxed workers, gate, warm-up, timing) of a
  ~1 ms function, against the 1.5 s target.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from redline.evaluator.evaluate import Evaluator
from redline.evaluator.models import EvalSettings
from redline.evaluator.target import load_target

TARGET = '''
import numpy as np


def smooth(xs):
    out = np.empty(len(xs))
    acc = 0.0
    for i in range(len(xs)):
        acc = 0.9 * acc + 0.1 * xs[i]
        out[i] = acc
    return out


def make_inputs(seed):
    return (np.random.default_rng(seed).standard_normal(1400),)
'''


def main() -> int:
    work = Path(tempfile.mkdtemp())
    (work / "t.py").write_text(TARGET)
    target = load_target(f"{work / 't.py'}::smooth")
    ev = Evaluator(target, EvalSettings())
    copy = target.function_source
    speedups, walls, winners, per_call, confirmed = [], [], 0, [], 0
    runs = 40
    for i in range(runs):
        t0 = time.perf_counter()
        r = ev.evaluate(f"copy{i}", copy, "bench")
        walls.append(time.perf_counter() - t0)
        assert r.speedup is not None and r.speedup_ci95 is not None, (r.status, r.reason)
        speedups.append(r.speedup)
        per_call.append(r.median_s or 0.0)
        winners += r.status == "ok"
        confirmed += "pair" in r.reason
        print(f"  run {i + 1}: {r.speedup:.3f}x (95% CI {r.speedup_ci95[0]:.3f}-{r.speedup_ci95[1]:.3f}) "
              f"{r.status}, {walls[-1]:.2f} s{' (timed in a second pair)' if 'pair' in r.reason else ''}")
    ev.close()
    inside = sum(0.97 <= s <= 1.03 for s in speedups)
    q = statistics.quantiles(speedups, n=20)
    print(f"noise floor: identical copy, {runs} evaluations: speedups {min(speedups):.3f}-{max(speedups):.3f} "
          f"(5th-95th percentile {q[0]:.3f}-{q[-1]:.3f}), {inside}/{runs} within 0.97-1.03; {confirmed} won in "
          f"their first pair of workers, {winners} winners after the second (target: 0)")
    print(f"overhead: function median {statistics.median(per_call) * 1e3:.2f} ms; one evaluation "
          f"{statistics.median(walls):.2f} s median wall (min {min(walls):.2f}, max {max(walls):.2f}; target <= 1.5 s)")
    return 0 if winners == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
