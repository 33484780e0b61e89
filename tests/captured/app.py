"""A small program for the capture tests: a script whose own functions are the targets.

`scale` is sometimes called with a lock (which cannot be snapshotted); `weighted` reads a module
setting that the program changes halfway, so the calls made after the change are not reproduced by
the function on its own; `main` keeps busy for the seconds given (so a profiler sees it), then exits with the status given.
"""

import sys
import threading
import time

MODE = "plain"


def scale(values, factor, lock=None):
    if lock is not None:
        with lock:
            return [v * factor for v in values]
    return [v * factor for v in values]


def weighted(values):
    total = 0.0
    for i, v in enumerate(values):
        total += v * (i + 1) if MODE == "plain" else v
    return total


def main(status, busy_s):
    global MODE
    lock = threading.Lock()
    for i in range(30):
        scale(list(range(i)), 2, lock if i % 3 == 0 else None)
    for i in range(40):
        if i == 20:
            MODE = "flat"
        weighted([float(j) for j in range(i + 1)])
    end = time.perf_counter() + busy_s
    while time.perf_counter() < end:
        pass
    sys.exit(status)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 0, float(sys.argv[2]) if len(sys.argv) > 2 else 0.0)
