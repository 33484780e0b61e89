"""Benchmark (device only): what the evaluator's conditions cost a torch.compile call on the GPU.

Run on the GPU machine: python3 tests/perf/bench_gpu_call.py
The KernelBench swish-residual model (16384x8192 bf16) compiled with torch.compile, timed with CUDA
events around each call after an L2 flush (median of 60 calls), side by side under the conditions the
evaluator's worker adds one at a time: fresh inputs per call, a fresh model per call (KernelBench
targets are built per seed), and a Python audit hook (the worker's sandbox). Eager under the same
conditions for comparison. Ratios are against the first row.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def _eager(self, x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x) * self.scale + r

    forward = torch.compile(_eager, dynamic=False)


def inputs() -> list[torch.Tensor]:
    return [torch.randn(16384, 8192, dtype=torch.bfloat16, device="cuda") for _ in range(2)]


flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, dtype=torch.float32, device="cuda")


def timed(calls: list[tuple[object, list[torch.Tensor]]], method: str) -> float:
    times = []
    for model, args in calls:
        flush.zero_()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        getattr(model, method)(*args)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main() -> None:
    calls = 60
    fixed, same = Model(1.5), inputs()
    for _ in range(5):
        fixed.forward(*same)
    t_end = time.perf_counter() + 1.0  # clocks up before anything is timed
    while time.perf_counter() < t_end:
        fixed.forward(*same)
    torch.cuda.synchronize()
    rows = []
    for method in ("forward", "_eager"):
        rows.append((f"{method}: same model, same inputs", timed([(fixed, same)] * calls, method)))
        rows.append((f"{method}: same model, fresh inputs", timed([(fixed, inputs()) for _ in range(4)] * (calls // 4), method)))
        rows.append((f"{method}: fresh model, fresh inputs",
                     timed([(Model(1.5), inputs()) for _ in range(4)] * (calls // 4), method)))
    sys.addaudithook(lambda event, args: None)
    for method in ("forward", "_eager"):
        rows.append((f"{method}: fresh model, fresh inputs, audit hook",
                     timed([(Model(1.5), inputs()) for _ in range(4)] * (calls // 4), method)))
    base = rows[0][1]
    for name, us in rows:
        print(f"{name:50} {us:8.1f} us  {us / base:5.2f}x")
    print("recompiles:", torch._dynamo.utils.counters["stats"].get("unique_graphs"),
          dict(torch._dynamo.utils.counters["recompiles"]) if "recompiles" in torch._dynamo.utils.counters else "")


if __name__ == "__main__":
    main()
