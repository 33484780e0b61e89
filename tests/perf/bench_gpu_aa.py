"""A/A study (device only): how far apart identical code measures in different processes.

redline times a candidate and its baseline in two processes; if each process carries a fixed offset
of its own (placement of its buffers, say), an exact copy of the reference can look faster by more
than the interval computed within the two processes admits. This starts K processes running the same
eager tanh-GELU (bf16, as tests/gpu/ops.py) and times them in interleaved rounds, like the harness,
with and without a random-sized allocation made before each batch's inputs (which moves where the
batch's buffers land, within one process).

Run on the GPU machine: python3 tests/perf/bench_gpu_aa.py [K] [ROUNDS] [ROWS]
Prints, per mode, each process's median over all its rounds, the spread of those medians (max/min),
and the median spread of the per-round medians within a process.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
from typing import Any

CHILD = r'''
import json, random, statistics, sys, time
import torch

rows = int(sys.argv[1])
flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, dtype=torch.float32, device="cuda")

def gelu_bias(x, b):
    y = x + b
    return 0.5 * y * (1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))

def inputs(seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(rows, 4096, device="cuda", dtype=torch.bfloat16, generator=g),
            torch.randn(4096, device="cuda", dtype=torch.bfloat16, generator=g))

s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
torch.cuda._sleep(1_000_000); s.record(); torch.cuda._sleep(1_000_000); e.record(); torch.cuda.synchronize()
hz = 1_000_000 / (s.elapsed_time(e) * 1e-3)
ahead = 50e-6
print("ready", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    pad = None
    if req["pad"]:
        pad = torch.empty(random.randrange(1, 256) * (2 << 20) + random.randrange(0, 2 << 20), dtype=torch.uint8,
                          device="cuda")
    prepared = [inputs(random.randrange(1 << 30)) for _ in range(req["n"])]
    torch.cuda.synchronize()
    times = []
    for args in prepared:
        flush.zero_()
        torch.cuda._sleep(int(ahead * hz))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        out = gelu_bias(*args)
        ahead = min(1.5 * (time.perf_counter() - t0) + 20e-6, 5e-3)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    del prepared, pad, out
    print(json.dumps({"median": statistics.median(times)}), flush=True)
'''


def study(k: int, rounds: int, rows: int, pad: bool) -> dict[str, Any]:
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(rows)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) for _ in range(k)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    per: list[list[float]] = [[] for _ in procs]
    for _ in range(rounds + 2):  # the first two rounds warm up
        order = list(range(k))
        random.shuffle(order)
        for i in order:
            p = procs[i]
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(json.dumps({"n": 50, "pad": pad}) + "\n")
            p.stdin.flush()
            per[i].append(json.loads(p.stdout.readline())["median"])
    for p in procs:
        assert p.stdin is not None
        p.stdin.close()
        p.wait()
    per = [r[2:] for r in per]
    meds = [statistics.median(r) for r in per]
    within = statistics.median((max(r) - min(r)) / statistics.median(r) for r in per)
    return {"rows": rows, "pad": pad, "process_medians_us": [round(m * 1e6, 2) for m in meds],
            "between_spread": max(meds) / min(meds) - 1, "within_round_spread": within}


def main() -> int:
    k = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 2048
    for pad in (False, True):
        r = study(k, rounds, rows, pad)
        print(json.dumps(r), flush=True)
        print(f"rows={rows} pad={pad}: {k} processes, medians {r['process_medians_us']} us; between processes "
              f"max/min - 1 = {r['between_spread']:.1%}; within a process, rounds max/min - 1 = "
              f"{r['within_round_spread']:.1%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
