"""Study (device only, not yet run): can a head start keep other streams' kernels from starting early?

The worker's head start is `torch.cuda._sleep`, one thread on one SM, so a candidate's kernels on a
stream that does not wait for the calling stream start at once and run during it: the known hole in
docs/trust-model.md. This compares two holds of about 300 µs on the calling stream: `_sleep`, and a
Triton spin kernel with two 1024-thread blocks per SM (every thread slot of every SM, so no block of
another kernel can be resident until they exit). Right after each hold is enqueued, a memory-bound
kernel is launched on an independent stream; events on both streams (elapsed_time works across the
streams of one device) say when it finished relative to the hold's end. A hold that closes the hole
shows the side kernel finishing about its own duration after the hold, never before.

Run on the GPU machine: python3 tests/perf/bench_gpu_hold.py
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch
import triton
import triton.language as tl


@triton.jit
def _spin(out_ptr, iters):
    pid = tl.program_id(0)
    offs = tl.arange(0, 1024)
    x = offs.to(tl.float32) * 1e-3 + pid
    for _ in range(iters):  # a dependent chain: one FMA latency per iteration
        x = x * 0.999999 + 1e-6
    tl.store(out_ptr + pid * 1024 + offs, x)


def event() -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=True)


def timed(fn: Callable[[], None]) -> float:
    """GPU milliseconds of `fn` on the current stream (median of 5)."""
    out = []
    for _ in range(5):
        a, b = event(), event()
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def main() -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    blocks = 2 * sms
    scratch = torch.empty(blocks * 1024, device="cuda")
    x = torch.randn(64 << 20, device="cuda")  # 256 MB of float32: a side kernel of roughly 120 µs
    y = torch.empty_like(x)
    side = torch.cuda.Stream()

    def spin(iters: int) -> None:
        _spin[(blocks,)](scratch, iters, num_warps=32)

    spin(10)
    per_iter_ms = timed(lambda: spin(20_000)) / 20_000
    iters = max(1, int(0.3 / per_iter_ms))
    sleep_cycles = int(1_000_000 * 0.3 / timed(lambda: torch.cuda._sleep(1_000_000)))
    holds: dict[str, Callable[[], None]] = {
        "torch.cuda._sleep (1 thread)": lambda: torch.cuda._sleep(sleep_cycles),
        f"Triton spin ({blocks} blocks x 1024 threads)": lambda: spin(iters),
    }
    side_alone = timed(lambda: torch.mul(x, 2.0, out=y))
    print(f"{sms} SMs; side kernel alone {side_alone * 1e3:.1f} us")
    for name, hold in holds.items():
        ends, lengths = [], []
        for _ in range(7):
            torch.cuda.synchronize()
            h0, h1, s1 = event(), event(), event()
            h0.record()
            hold()
            h1.record()
            with torch.cuda.stream(side):
                torch.mul(x, 2.0, out=y)
                s1.record(side)
            torch.cuda.synchronize()
            lengths.append(h0.elapsed_time(h1))
            ends.append(h0.elapsed_time(s1) - h0.elapsed_time(h1))
        print(f"{name:45} hold {statistics.median(lengths) * 1e3:7.1f} us; side kernel ends "
              f"{statistics.median(ends) * 1e3:+8.1f} us after the hold's end (min {min(ends) * 1e3:+.1f})")


if __name__ == "__main__":
    main()
