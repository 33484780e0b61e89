"""Benchmark (device only): redline's built-in proposers against eager and torch.compile on the
KernelBench-format problems in tests/perf/kernelbench/ (levels 1-3: elementwise chains, norms,
softmax and losses, attention, GEMMs with epilogues, small launch-bound models).

Run on the GPU machine (see tests/perf/device_env.sh):
    python3 tests/perf/bench_kernelbench.py [all|NAME,NAME...] [OUT_DIR] [TIME_LIMIT_S] [--max-autotune]
For each problem: eager and torch.compile(default) (and with --max-autotune, mode="max-autotune")
timed by the bench's own CUDA-event timer (bench_gpu.Timer: L2 flushed before every call, median
of repeats); then `redline optimise Model.forward --device cuda` with only the built-in proposers
and `--time-limit`, through the real CLI; its winner's code loaded and timed by the same timer.
Printed per problem: the times, winner / torch.compile, winner / the stronger baseline, the share
of the measured copy bandwidth, what limits the target (redline's probe) and the winning approach;
then the geomean of torch.compile's time over the time of what redline offers (its winner; with no
winner, the user's eager code).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_gpu import Timer, copy_bandwidth, load, nbytes, winner_fn

PROBLEMS = Path(__file__).parent / "kernelbench"


def optimise(path: Path, work: Path, out: Path, time_limit: int) -> dict[str, Any] | None:
    report = out / f"kb_{path.stem}.json"
    cmd = [sys.executable, "-m", "redline.cli", "optimise", f"{path}::Model.forward", "--device", "cuda",
           "--time-limit", str(time_limit), "--json", str(report)]
    t0, kill_s = time.perf_counter(), 3 * time_limit + 60
    try:  # a run that overruns its limit by far is reported as such rather than holding up the rest
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=kill_s)
        (out / f"kb_{path.stem}.log").write_text(proc.stdout + proc.stderr)
        code = str(proc.returncode)
    except subprocess.TimeoutExpired as exc:
        (out / f"kb_{path.stem}.log").write_text(str(exc.stdout or "") + str(exc.stderr or ""))
        code = f"none: killed at {kill_s} s"
    print(f"  redline optimise {path.stem}: exit {code} in {time.perf_counter() - t0:.0f} s", flush=True)
    return json.loads(report.read_text()) if report.exists() else None


def main(which: str, out: Path, time_limit: int, max_autotune: bool) -> int:
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-kb-"))
    (work / "pyproject.toml").write_text("[project]\nname = 'bench'\nversion = '0'\n")
    names = None if which == "all" else set(which.split(","))
    problems = [p for p in sorted(PROBLEMS.glob("*.py")) if names is None or p.stem in names]
    timer, bw = Timer(), copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.2f} TB/s; {len(problems)} problems", flush=True)
    rows: list[dict[str, Any]] = []
    for src in problems:
        path = work / src.name
        shutil.copy(src, path)
        started = time.perf_counter()
        mod = load(path, f"kb_{src.stem}")
        torch.manual_seed(0)
        with torch.device("cuda"):
            model = mod.Model(*mod.get_init_inputs())
            args = tuple(mod.get_inputs())
        row: dict[str, Any] = {"problem": src.stem}
        with torch.no_grad():
            moved = nbytes(args) + nbytes(model(*args))
            row["eager_us"] = timer.repeats(model, args)[0] * 1e6
            row["compile_us"] = timer.repeats(torch.compile(model), args)[0] * 1e6
            if max_autotune:
                row["max_autotune_us"] = timer.repeats(torch.compile(model, mode="max-autotune"), args)[0] * 1e6
            doc = optimise(path, work, out, time_limit)
            fn = winner_fn(doc, mod, "Model.forward") if doc else None
            row["bound"] = (doc or {}).get("bound", "")
            if fn is not None and doc is not None:
                row["winner_us"] = timer.repeats(lambda *a, _f=fn, _m=model: _f(_m, *a), args)[0] * 1e6
                cand = next(c for c in doc["candidates"] if c["id"] == doc["winner"]["id"])
                row.update(approach=cand.get("approach"), origin=cand.get("origin"),
                           redline_speedup=doc["winner"]["speedup"], sanitizer=cand.get("sanitizer"))
        stronger = min(row["eager_us"], row["compile_us"], row.get("max_autotune_us", math.inf))
        offered = row.get("winner_us", row["eager_us"])  # no winner: the user keeps the eager code
        row.update(vs_compile=row["compile_us"] / offered, vs_stronger=stronger / offered,
                   bw_share=moved / (offered * 1e-6) / bw, device_s=time.perf_counter() - started)
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "bench_kernelbench.json").write_text(json.dumps({"copy_bandwidth_Bps": bw, "rows": rows}, indent=2))
    print(f"\n{'problem':26} {'eager us':>9} {'compile':>9} {'winner':>9} {'vs comp':>7} {'vs best':>7} {'bw':>5}  "
          "bound, approach")
    for r in rows:
        win = f"{r['winner_us']:9.1f}" if "winner_us" in r else f"{'-':>9}"
        print(f"{r['problem']:26} {r['eager_us']:9.1f} {r['compile_us']:9.1f} {win} {r['vs_compile']:6.2f}x "
              f"{r['vs_stronger']:6.2f}x {r['bw_share']:5.0%}  {r['bound']}, {r.get('approach', 'no winner')}")
    if rows:
        geo = math.exp(sum(math.log(r["vs_compile"]) for r in rows) / len(rows))
        print(f"geomean over torch.compile: {geo:.3f}x over {len(rows)} problems; below 1.0x of the stronger "
              f"baseline: {sum(r['vs_stronger'] < 0.995 for r in rows)}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
    argv = [a for a in sys.argv[1:] if not a.startswith("--")]
    sys.exit(main(argv[0] if argv else "all", Path(argv[1] if len(argv) > 1 else os.environ.get("OUT", "/tmp/kb")),
                  int(argv[2]) if len(argv) > 2 else 60, "--max-autotune" in sys.argv))
