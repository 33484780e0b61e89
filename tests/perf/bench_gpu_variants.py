"""Device study: which torch.compile settings reach the copy-bandwidth ceiling on the workload ops,
and does a second process compiling the same function from a warm inductor cache fail.

Run on the GPU machine: python3 tests/perf/bench_gpu_variants.py [OUT_DIR] [SECONDS]
1. Warm cache: rmsnorm and softmax_naive compiled (torch.compile default, then multi-kernel) in one process, then
   again in a second process with the same TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR, as
   redline's head-to-head does; prints each process's exit and the second one's traceback.
2. Variants: each op compiled under several inductor settings (and the tanh-through-sigmoid rewrite
   for gelu_bias) in one process, timed with bench_gpu's head-start timer, printed as time and share
   of the measured copy bandwidth. Stops starting new variants after SECONDS.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from bench_gpu import INPUTS, WORKLOAD_OPS, Timer, copy_bandwidth, nbytes
from redline.evaluator.proposers.builtin import MULTI_KERNEL, TUNED, sigmoid_tanh_source

WARM = '''
import json, sys, torch
ns = {}
exec(sys.argv[1], ns)
exec(sys.argv[2], ns)
options = json.loads(sys.argv[4])
fn = torch.compile(ns[sys.argv[3]], dynamic=False, **({"options": options} if options else {"mode": "default"}))
args = ns["make_inputs"](1)
out = fn(*args)
torch.cuda.synchronize()
out32 = fn(*[a.float() for a in args])  # the harness's float32 oracle: a recompile
torch.cuda.synchronize()
print("ok", tuple(out.shape))
'''


# Plain torch.compile, and the multi-kernel variant whose second compile from a warm cache raised in
# redline's head-to-head.
WARM_MODES = {"default": {}, "multi-kernel": MULTI_KERNEL}


def warm_cache(out: Path) -> None:
    for mode, options in WARM_MODES.items():
        for name in ("rmsnorm", "softmax_naive"):
            cache = tempfile.mkdtemp(prefix=f"warm-{name}-")
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor", "TRITON_CACHE_DIR": f"{cache}/triton"}
            for attempt in (1, 2):
                t0 = time.perf_counter()
                p = subprocess.run([sys.executable, "-c", WARM, WORKLOAD_OPS, INPUTS[name], name, json.dumps(options)],
                                   env=env, capture_output=True, text=True, timeout=300)
                print(f"warm-cache {mode} {name} process {attempt}: exit {p.returncode} in "
                      f"{time.perf_counter() - t0:.1f} s {p.stdout.strip()[-200:]}", flush=True)
                if p.returncode:
                    (out / f"warm_{mode}_{name}_{attempt}.txt").write_text(p.stderr)
                    print(p.stderr[-2500:], flush=True)


def variants(name: str, ns: dict[str, Any]) -> list[tuple[str, Any]]:
    fn = ns[name]
    out: list[tuple[str, Any]] = [("default", lambda: torch.compile(fn, dynamic=False))]
    if name == "gelu_bias":
        # The rewrite exactly as the built-in proposer makes it, defined under its own name.
        tree = ast.parse(WORKLOAD_OPS)
        source = next(ast.get_source_segment(WORKLOAD_OPS, f) for f in tree.body
                      if isinstance(f, ast.FunctionDef) and f.name == name)
        rewritten = sigmoid_tanh_source(source)
        assert rewritten is not None
        exec(rewritten.replace(f"def {name}(", "def gelu_sig(", 1), ns)
        sig = ns["gelu_sig"]
        out += [("sigmoid", lambda: torch.compile(sig, dynamic=False)),
                ("sigmoid+coordinate descent", lambda: torch.compile(sig, dynamic=False, options={
                    "coordinate_descent_tuning": True})),
                ("sigmoid+max-autotune+coordinate descent", lambda: torch.compile(sig, dynamic=False, options={
                    **TUNED, "coordinate_descent_tuning": True})),
                ("sigmoid+max-autotune", lambda: torch.compile(sig, dynamic=False, options=TUNED))]
    else:
        out += [("multi-kernel 1", lambda: torch.compile(fn, dynamic=False, options=MULTI_KERNEL)),
                ("persistent (multi-kernel 2)", lambda: torch.compile(fn, dynamic=False, options={
                    "triton.multi_kernel": 2})),
                ("persistent+coordinate descent", lambda: torch.compile(fn, dynamic=False, options={
                    "triton.multi_kernel": 2, "coordinate_descent_tuning": True})),
                ("no online softmax", lambda: torch.compile(fn, dynamic=False, options={"online_softmax": False})),
                ("coordinate descent", lambda: torch.compile(fn, dynamic=False, options={
                    "coordinate_descent_tuning": True}))]
    return out


def main(out: Path, seconds: float) -> int:
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.perf_counter() + seconds
    warm_cache(out)
    timer, bw = Timer(), copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    rows = []
    for name in ("softmax_naive", "gelu_bias", "rmsnorm"):
        ns: dict[str, Any] = {}
        exec(WORKLOAD_OPS + INPUTS[name], ns)
        args = ns["make_inputs"](1)
        ref = ns[name](*args).float()
        moved = nbytes(args) + nbytes(ref) // 2
        for label, make in variants(name, ns):
            if time.perf_counter() > deadline:
                print(f"{name} {label}: skipped (time)", flush=True)
                continue
            torch._dynamo.reset()
            t0 = time.perf_counter()
            try:
                fn = make()
                err = (fn(*args).float() - ref).abs().max().item()
                t, spread = timer.repeats(fn, args, n=3)
            except Exception as exc:  # a setting inductor rejects is a row, not the end of the study
                print(f"{name} {label}: failed {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                continue
            row = {"op": name, "variant": label, "us": t * 1e6, "bw_share": moved / t / bw, "spread": spread,
                   "max_abs_err": err, "setup_s": time.perf_counter() - t0}
            rows.append(row)
            print(f"{name:14} {label:42} {t * 1e6:8.1f} us {moved / t / bw:6.1%} of copy BW  spread {spread:.1%}  "
                  f"max err {err:.3g}  ({row['setup_s']:.0f} s)", flush=True)
            (out / "bench_gpu_variants.json").write_text(json.dumps({"copy_bandwidth_Bps": bw, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "/tmp")),
                  float(sys.argv[2]) if len(sys.argv) > 2 else 240))
