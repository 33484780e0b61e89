"""Benchmark: what `redline capture` costs a real program, side by side with the plain run.

Run: .venv/bin/python tests/perf/bench_capture.py [ROUNDS]
The program is tests/workloads/toml_work.py parsing TOML with tomli's pure-Python parser (copied from
the installed tomli into a scratch workspace, as a user's own code). Its target, `parse_basic_str`,
is called more than 100,000 times at the default 50 rounds. Plain runs and captured runs alternate
(five each, fresh processes); the captured run's wall time includes writing the store. Prints the
medians and their ratio (the target is at most 1.5x), and for context the ratio with three targets
captured at once.

Then a service under load: tests/workloads/json_service.py (http.server), plain and under `redline
capture` of its handler's `render_report` and `Handler.do_GET` (whose `self` holds the socket: its
calls are counted, not kept), each sent 30 warm-up requests and then 600 timed ones, one at a time
from one client; the ratio of the timed requests' wall times, three of each alternating, medians.
The captured service is stopped with SIGTERM and its summary checked.
"""

from __future__ import annotations

import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
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
    service()


def _served(cmd: list[str], cwd: Path, n: int = 600) -> tuple[float, str]:
    """Start the service with `cmd`, send it 30 requests, time `n` more, stop it with SIGTERM: (the
    timed requests' wall time, what the command printed after)."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("listening "), line + (proc.stderr.read() if proc.stderr else "")
    url = f"http://127.0.0.1:{int(line.split()[1])}/report/200"
    for _ in range(30):
        with urllib.request.urlopen(url, timeout=30) as reply:
            reply.read()
    t = time.perf_counter()
    for _ in range(n):
        with urllib.request.urlopen(url, timeout=30) as reply:
            reply.read()
    took = time.perf_counter() - t
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    return took, out + err


def service() -> None:
    work = Path(tempfile.mkdtemp(prefix="redline-bench-service-"))
    shutil.copy(TESTS / "workloads" / "json_service.py", work / "json_service.py")
    (work / "redline.toml").write_text("")
    plain_cmd = [sys.executable, "json_service.py"]
    captured_cmd = [sys.executable, "-m", "redline.cli", "capture", "--target", "json_service.py::render_report",
                    "--target", "json_service.py::Handler.do_GET", "--", *plain_cmd]
    plain, captured, summary = [], [], ""
    for _ in range(3):
        plain.append(_served(plain_cmd, work)[0])
        took, summary = _served(captured_cmd, work)
        captured.append(took)
    p, c = statistics.median(plain), statistics.median(captured)
    kept = [line for line in summary.splitlines() if "kept" in line]
    print(json.dumps({"service_requests": 600, "plain_s": round(p, 3), "captured_s": round(c, 3),
                      "ratio": round(c / p, 3), "summary": kept}))
    print(f"json_service under load: 600 requests plain {p:.2f} s, under capture {c:.2f} s: {c / p:.2f}x")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
