"""The machine's other load, read before CPU timing starts.

Thread pools that spin while they wait (OpenMP in torch and inductor's C++ kernels, OpenBLAS) fall
apart when they hold more threads than there are free cores: a thread that waits at a barrier for a
partner the scheduler has parked burns its slice, and a call that takes 0.3 ms alone takes up to 75 ms.
Timing in that state measures the scheduler, not the code. So where other processes keep cores busy,
the workers' pools are sized to the cores left (OMP_NUM_THREADS, which torch, OpenMP and the BLAS
libraries read), the same for both sides, and the report says so.
"""

from __future__ import annotations

import os
import time

WINDOW_S = 0.3  # how long the machine's CPU counters are watched


def _cpu_counters() -> tuple[int, int] | None:
    """Busy and total jiffies of all the machine's CPUs (the first line of /proc/stat)."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 5:
        return None
    total = sum(fields[:8])
    idle = fields[3] + fields[4]  # idle and iowait
    return total - idle, total


def busy_cores(window_s: float = WINDOW_S) -> float | None:
    """How many of the machine's cores other processes kept busy over `window_s`; None where the
    kernel's counters cannot be read."""
    before, own_before = _cpu_counters(), time.process_time()
    time.sleep(window_s)
    after, own = _cpu_counters(), time.process_time() - own_before
    if before is None or after is None or after[1] <= before[1]:
        return None
    cpus = os.cpu_count() or 1
    busy = (after[0] - before[0]) / (after[1] - before[1]) * cpus
    return max(0.0, busy - own / window_s)


def thread_cap(cores: int, busy: float | None) -> int | None:
    """The thread count for the workers' pools given `cores` this process may use and `busy` cores
    taken by others: the cores left (at least one) where others hold at least 0.6 of a core, else
    None (the pools' own default)."""
    if busy is None:
        return None
    taken = int(busy + 0.4)
    return max(1, cores - taken) if taken >= 1 else None


def pool_threads() -> tuple[int | None, str]:
    """The workers' thread count for CPU timing on this machine now, and the report's note on it;
    (None, "") where OMP_NUM_THREADS is set already (by the user, or by Ray for its workers), or
    nothing else is running."""
    if "OMP_NUM_THREADS" in os.environ:
        return None, ""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    busy = busy_cores()
    cap = thread_cap(cores, busy)
    if cap is None or busy is None:
        return None, ""
    return cap, (f"other processes kept {busy:.1f} of this machine's cores busy when timing began: the workers ran "
                 f"with OMP_NUM_THREADS={cap} (both sides), so that spinning thread pools were not timed waiting "
                 "for a core")
