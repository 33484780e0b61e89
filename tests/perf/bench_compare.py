"""Benchmark: comparing a large half-precision output in the harness, chunked against whole-array.

Run: .venv/bin/python tests/perf/bench_compare.py
A 2048x2048 bf16 output of a fused kernel (float32 intermediates) against eager bf16: the plain
comparison fails on eager's rounding, and the float32 oracle then accepts it. Timed side by side in
one run: redline's comparison in 64K-element chunks, and the same code with one chunk for the whole
array (whole-array float64 temporaries, like the harness before chunking; not that old code
itself). The ratio is the figure.
"""

from __future__ import annotations

import statistics
import time

import redline.evaluator.compare as cmp
import torch
from redline.evaluator.sandbox.redline_worker.codec import encode


def timed(fn: object, n: int = 7) -> tuple[float, float]:
    """(the first call, the median of `n`): the first pays for faulting in fresh pages, as a harness
    call does when other work ran in between; the later ones reuse what the allocator kept."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return times[0], statistics.median(times)


def main() -> int:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 2048, generator=g).bfloat16()
    r = torch.randn(2048, 2048, generator=g).bfloat16()
    eager = x * torch.sigmoid(x) * 1.5 + r
    exact = x.float() * torch.sigmoid(x.float()) * 1.5 + r.float()
    a, b, o = encode(eager), encode(exact.bfloat16()), encode(exact)
    chunk = cmp._CHUNK
    rows = []
    for name, ora in (("plain (eager vs eager)", None), ("with the float32 oracle", o)):
        ref = a if ora is not None else encode(eager.clone())
        results = {}
        for label, size in (("chunked", chunk), ("whole", 1 << 30)):
            cmp._CHUNK = size
            results[label] = timed(lambda ref=ref, ora=ora: cmp.compare(ref, b if ora is not None else ref,
                                                                         oracle=ora))
        cmp._CHUNK = chunk
        rows.append((name, results["whole"], results["chunked"]))
    print(f"{'4,194,304 bf16 elements: first / median':40} {'whole':>17} {'chunked':>17} {'ratio':>13}")
    for name, whole, chunked in rows:
        print(f"{name:40} {whole[0] * 1e3:7.1f}/{whole[1] * 1e3:5.1f}ms {chunked[0] * 1e3:7.1f}/"
              f"{chunked[1] * 1e3:5.1f}ms {whole[0] / chunked[0]:5.2f}x/{whole[1] / chunked[1]:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
