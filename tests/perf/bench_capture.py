"""Benchmark: what `redline capture` costs a real program, side by side with the plain run.

Run: .venv/bin/python tests/perf/bench_capture.py [ROUNDS]
The program is tests/workloads/toml_work.py parsing TOML with tomli's pure-Python parser (copied from
the installed tomli into a scratch workspace, as a user's own code). Its target, `parse_basic_str`,
is called more than 100,000 times at the default 50 rounds. Plain runs and captured runs alternate
(five each, fresh processes); the captured run's wall time includes writing the store. Prints the
medians and their ratio (the target is at most 1.5x), and for context the ratio with three targets
captured at once.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
sys.path.insert(0, str(TESTS))
from helpers import toml_workspace  # noqa: E402
from redline.evaluator.inputs.capture import capture_target, run_capture  # noqa: E402


def main() -> None:
    rounds = sys.argv[1] if len(sys.argv) > 1 else "50"
    work = toml_workspace(Path(tempfile.mkdtemp(prefix="redline-bench-capture-")))
    cmd = [sys.executable, "work.py", rounds]
    one = [capture_target(f"{work / 'tomli/_parser.py'}::parse_basic_str")]
    three = one + [capture_target(f"{work / 'tomli/_parser.py'}::{q}") for q in ("parse_value", "key_value_rule")]
    plain: list[float] = []
    captured: list[float] = []
    captured3: list[float] = []
    calls = 0
    subprocess.run(cmd, cwd=work, check=True, capture_output=True)  # warm the file cache
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run(cmd, cwd=work, check=True, capture_output=True)
        plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        result = run_capture(one, cmd, work)
        captured.append(time.perf_counter() - t)
        calls = result.manifests[0][1].calls_seen
        t = time.perf_counter()
        run_capture(three, cmd, work)
        captured3.append(time.perf_counter() - t)
    p, c, c3 = statistics.median(plain), statistics.median(captured), statistics.median(captured3)
    print(json.dumps({"rounds": int(rounds), "target_calls": calls, "plain_s": round(p, 3),
                      "captured_s": round(c, 3), "ratio": round(c / p, 3), "captured_three_targets_s": round(c3, 3),
                      "ratio_three_targets": round(c3 / p, 3)}))
    print(f"parse_basic_str called {calls} times: plain {p:.2f} s, under capture {c:.2f} s: {c / p:.2f}x "
          f"(three targets: {c3 / p:.2f}x)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
