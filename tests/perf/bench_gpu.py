"""Benchmark (device only): eager, torch.compile and redline's built-in winner on the H200.

Run on the GPU machine: python3 tests/perf/bench_gpu.py [workload|kernelbench|all|NAME,NAME...] [OUT_DIR] [SEARCH_S]
- workload: `gelu_bias`, `rmsnorm`, `softmax_naive` of tests/fixtures/gpu/workload, 16384x8192 bf16;
- kernelbench: three KernelBench-style problems (class Model, get_inputs, get_init_inputs) below.
For each: the bench times eager and torch.compile(default) itself (CUDA events, L2 flushed before
every call, median of 5 repeats of 200 calls), runs `redline optimise --device cuda` with the
built-in proposers through the real CLI, loads the winner's code and times it the same way.
Printed side by side: times, winner / torch.compile, share of the measured copy bandwidth
(bytes of inputs and output per call / time), repeat-to-repeat spread, and redline's own reported
speedup with its interval and energy per call. Targets: winner / torch.compile geomean
>= 1.0, >= 85% of copy bandwidth on the memory-bound ops, spread <= 1%.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import types
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]

WORKLOAD_OPS = '''
import torch


def gelu_bias(x, b):
    y = x + b
    return 0.5 * y * (1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


def rmsnorm(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def softmax_naive(x):
    xf = x.float()
    e = torch.exp(xf - xf.max(-1, keepdim=True).values)
    return (e / e.sum(-1, keepdim=True)).to(x.dtype)


def _rows(seed, *shapes):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(*s, device="cuda", dtype=torch.bfloat16, generator=g) for s in shapes]
'''

INPUTS = {
    "gelu_bias": "def make_inputs(seed):\n    return tuple(_rows(seed, (16384, 8192), (8192,)))\n",
    "rmsnorm": "def make_inputs(seed):\n    return tuple(_rows(seed, (16384, 8192), (8192,)))\n",
    "softmax_naive": "def make_inputs(seed):\n    return tuple(_rows(seed, (16384, 8192)))\n",
}

KERNELBENCH = {
    "kb_swish_residual": ('''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Swish of x, scaled, plus a residual (memory-bound, three eager kernels)."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, r):
        return x * torch.sigmoid(x) * self.scale + r


def get_inputs():
    return [torch.randn(16384, 8192, dtype=torch.bfloat16), torch.randn(16384, 8192, dtype=torch.bfloat16)]


def get_init_inputs():
    return [1.5]
''', True),
    "kb_layernorm_naive": ('''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer norm written out in fp32 (memory-bound, a reduction per row)."""

    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n, dtype=torch.bfloat16) + 0.1 * torch.randn(n, dtype=torch.bfloat16))
        self.bias = nn.Parameter(0.1 * torch.randn(n, dtype=torch.bfloat16))

    def forward(self, x):
        xf = x.float()
        mean = xf.mean(-1, keepdim=True)
        var = ((xf - mean) ** 2).mean(-1, keepdim=True)
        y = (xf - mean) / torch.sqrt(var + 1e-5)
        return (y * self.weight.float() + self.bias.float()).to(x.dtype)


def get_inputs():
    return [torch.randn(16384, 8192, dtype=torch.bfloat16)]


def get_init_inputs():
    return [8192]
''', True),
    "kb_linear_gelu": ('''
import torch
import torch.nn as nn


class Model(nn.Module):
    """A linear layer with a tanh-GELU epilogue and a scale (compute-bound GEMM)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.lin = nn.Linear(n_in, n_out, dtype=torch.bfloat16)

    def forward(self, x):
        return torch.nn.functional.gelu(self.lin(x), approximate="tanh") * 0.5


def get_inputs():
    return [torch.randn(8192, 4096, dtype=torch.bfloat16)]


def get_init_inputs():
    return [4096, 4096]
''', False),
}


class Timer:
    """CUDA events around each call, as redline's worker times it: the L2 flushed before each call (a
    2x-L2 buffer written), then a device-side wait a little longer than the call's launch time, so the
    events time the GPU's work and not an idle device's launch latency; median of repeats."""

    def __init__(self) -> None:
        props = torch.cuda.get_device_properties(0)
        self.flush = torch.empty(2 * int(getattr(props, "L2_cache_size", 64 << 20)) // 4, dtype=torch.float32,
                                 device="cuda")
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1_000_000)
        start.record()
        torch.cuda._sleep(1_000_000)
        end.record()
        torch.cuda.synchronize()
        self.spin_hz = 1_000_000 / (start.elapsed_time(end) * 1e-3)
        self.ahead_s = 50e-6

    def once(self, fn: Any, args: tuple[Any, ...], calls: int = 200, head_start: bool = True) -> float:
        """Median GPU time of `calls` calls. `head_start=False` is the earlier timer, for comparison:
        each call launched on an idle device (flush, synchronize, start event), so its launch latency
        is inside the events."""
        times = []
        for _ in range(calls):
            self.flush.zero_()
            if head_start:
                torch.cuda._sleep(int(self.ahead_s * self.spin_hz))
            else:
                torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            t0 = time.perf_counter()
            fn(*args)
            if head_start:
                self.ahead_s = min(1.5 * (time.perf_counter() - t0) + 20e-6, 5e-3)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        return statistics.median(times)

    def repeats(self, fn: Any, args: tuple[Any, ...], n: int = 5) -> tuple[float, float]:
        for _ in range(3):
            fn(*args)  # compile and warm up outside the timing
        torch.cuda.synchronize()
        until = time.perf_counter() + 1.0  # and a second of calls: clocks ramp up from idle (345 MHz seen)
        while time.perf_counter() < until:
            fn(*args)
            torch.cuda.synchronize()
        meds = [self.once(fn, args) for _ in range(n)]
        return statistics.median(meds), (max(meds) - min(meds)) / statistics.median(meds)


def copy_bandwidth() -> float:
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        dst.copy_(src)
    torch.cuda.synchronize()
    return 2 * src.numel() * 20 / (time.perf_counter() - t0)


def nbytes(values: Any) -> int:
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(nbytes(v) for v in values)
    return 0


def run_redline(spec: str, work: Path, out: Path, name: str, time_limit: int) -> dict[str, Any] | None:
    """`redline optimise` through the real CLI; its output goes line by line, timestamped, to
    bench_gpu_NAME.log under `out` (kept when the run is cut short), with the run's candidate log."""
    report = out / f"bench_gpu_{name}.json"
    cmd = [sys.executable, "-m", "redline.cli", "optimise", spec, "--device", "cuda", "--budget", "4",
           "--time-limit", str(time_limit), "--timeout", "240", "--json", str(report)]
    t0 = time.perf_counter()
    with open(out / f"bench_gpu_{name}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(f"[{time.perf_counter() - t0:7.1f}s] {line}")
            log.flush()
        rc = proc.wait()
    logs = list((work / ".redline" / "runs").glob("*/results.jsonl"))  # every op's run: this one is the newest
    if logs:
        (out / f"bench_gpu_{name}_results.jsonl").write_text(max(logs, key=lambda p: p.stat().st_mtime).read_text())
    print(f"  redline optimise {name}: exit {rc} in {time.perf_counter() - t0:.0f} s", flush=True)
    return json.loads(report.read_text()) if report.exists() else None


def winner_fn(doc: dict[str, Any], module: types.ModuleType, qualname: str) -> Any | None:
    if not doc or not doc.get("winner"):
        return None
    code = next(c["code"] for c in doc["candidates"] if c["id"] == doc["winner"]["id"])
    ns = dict(module.__dict__)
    exec(compile(code, f"<winner {qualname}>", "exec"), ns)
    return ns[qualname.rsplit(".", 1)[-1]]


def load(path: Path, name: str) -> types.ModuleType:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main(which: str, out: Path, time_limit: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-gpu-"))
    (work / "pyproject.toml").write_text("[project]\nname = 'bench'\nversion = '0'\n")
    timer = Timer()
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: measured copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    rows = []
    cases: list[tuple[str, str, str, bool]] = []  # (name, file, qualname, memory-bound)
    names = set(which.split(",")) if "," in which or which in {**INPUTS, **KERNELBENCH} else None
    if which in ("workload", "all") or names:
        for name, inputs in INPUTS.items():
            if names and name not in names:
                continue
            (work / f"{name}.py").write_text(WORKLOAD_OPS + "\n\n" + inputs)
            cases.append((name, f"{name}.py", name, True))
    if which in ("kernelbench", "all") or names:
        for name, (src, memory_bound) in KERNELBENCH.items():
            if names and name not in names:
                continue
            (work / f"{name}.py").write_text(textwrap.dedent(src))
            cases.append((name, f"{name}.py", "Model.forward", memory_bound))
    for name, file, qual, memory_bound in cases:
        mod = load(work / file, f"bench_{name}")
        torch.manual_seed(0)
        model = None
        if qual == "Model.forward":
            model = mod.Model(*mod.get_init_inputs()).cuda()
            args = tuple(a.cuda() for a in mod.get_inputs())
            eager = model.forward
        else:
            args = mod.make_inputs(1)
            eager = getattr(mod, qual)
        moved = nbytes(args) + nbytes(eager(*args))
        t_eager, s_eager = timer.repeats(eager, args)
        compiled = torch.compile(eager)
        t_compile, s_compile = timer.repeats(compiled, args)
        # The same compiled call under the earlier idle-device timer and under Triton's do_bench (no
        # synchronisation between calls, its own L2 flush), side by side with the timer above.
        from triton.testing import do_bench

        t_compile_idle = timer.once(compiled, args, head_start=False)
        t_compile_do_bench = do_bench(lambda _f=compiled, _a=args: _f(*_a), warmup=25, rep=200, return_mode="median") * 1e-3
        doc = run_redline(f"{work / file}::{qual}", work, out, name, time_limit)
        fn = winner_fn(doc, mod, qual) if doc else None
        row: dict[str, Any] = {"op": name, "eager_us": t_eager * 1e6, "compile_us": t_compile * 1e6,
                               "spread_eager": s_eager, "spread_compile": s_compile, "memory_bound": memory_bound,
                               "compile_idle_start_us": t_compile_idle * 1e6,
                               "compile_do_bench_us": t_compile_do_bench * 1e6,
                               "bytes": moved}
        if fn is not None:
            call = (lambda *a, _f=fn, _m=model: _f(_m, *a)) if qual == "Model.forward" else fn
            t_win, s_win = timer.repeats(call, args)
            w = doc["winner"]  # type: ignore[index]
            cand = next(c for c in doc["candidates"] if c["id"] == w["id"])  # type: ignore[index]
            row.update(winner_us=t_win * 1e6, spread_winner=s_win, winner_vs_compile=t_compile / t_win,
                       winner_bw_share=moved / t_win / bw, approach=cand.get("approach"),
                       redline_speedup=w["speedup"], redline_ci95=w["speedup_ci95"],
                       redline_vs_compile=w.get("vs_compile_speedup"), stronger=w.get("stronger_baseline"),
                       energy_j=cand.get("energy_j_per_call"), baseline_energy_j=cand.get("baseline_energy_j_per_call"),
                       gpu=cand.get("gpu"), kernel_profile=cand.get("kernel_profile"))
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "kernel_profile"}), flush=True)
        (out / f"bench_gpu_{which.replace(',', '_').strip('_')}.json").write_text(  # kept if a later op runs out of time
            json.dumps({"copy_bandwidth_Bps": bw, "rows": rows}, indent=2))
    print(f"\n{'op':20} {'eager us':>9} {'compile':>9} {'winner':>9} {'win/comp':>8} {'bw share':>8} {'spread':>7}  "
          "redline speedup (95% CI), vs compile, J/call winner/eager")
    ratios = []
    for r in rows:
        print(f"{r['op']:20} torch.compile by timer: head start {r['compile_us']:.1f} us, idle device "
              f"{r['compile_idle_start_us']:.1f} us, do_bench {r['compile_do_bench_us']:.1f} us")
    for r in rows:
        if "winner_us" not in r:
            print(f"{r['op']:20} {r['eager_us']:9.1f} {r['compile_us']:9.1f}   (no verified winner)")
            continue
        ratios.append(r["winner_vs_compile"])
        energy = (f"{r['energy_j']:.4f}/{r['baseline_energy_j']:.4f}" if r.get("energy_j") else "n/a")
        vs = f"{r['redline_vs_compile']:.2f}x" if r.get("redline_vs_compile") else "n/a"
        print(f"{r['op']:20} {r['eager_us']:9.1f} {r['compile_us']:9.1f} {r['winner_us']:9.1f} "
              f"{r['winner_vs_compile']:7.2f}x {r['winner_bw_share']:7.0%} {r['spread_winner']:6.1%}  "
              f"{r['redline_speedup']:.2f}x ({r['redline_ci95'][0]:.2f}-{r['redline_ci95'][1]:.2f}), {vs}, {energy}"
              f"  [{r['approach']}]")
    if ratios:
        print(f"geomean winner / torch.compile: {math.exp(sum(math.log(x) for x in ratios) / len(ratios)):.3f}x "
              f"over {len(ratios)} ops (target >= 1.0)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "all",
                  Path(sys.argv[2] if len(sys.argv) > 2 else os.environ.get("OUT", "/tmp/bench_gpu")),
                  int(sys.argv[3]) if len(sys.argv) > 3 else 300))
