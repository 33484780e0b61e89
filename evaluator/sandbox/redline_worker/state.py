"""What every part of the worker shares, bound when the worker starts, before any user code is
imported: the originals of the functions the harness relies on (a candidate that replaces
`time.perf_counter` later changes nothing here, and `watched` reports it), and the run's state."""

from __future__ import annotations

import base64
import gc
import json
import random
import time
from typing import Any

_perf = time.perf_counter_ns
_sleep = time.sleep
_type = type
_isinstance = isinstance
_len = len
_json_dumps = json.dumps
_b64 = base64.b64encode
_Random = random.Random

# Functions a candidate must not replace: (module, attribute) -> the original.
watched: dict[tuple[str, str], object] = {
    ("time", "perf_counter"): time.perf_counter, ("time", "perf_counter_ns"): time.perf_counter_ns,
    ("time", "monotonic"): time.monotonic, ("time", "monotonic_ns"): time.monotonic_ns,
    ("time", "process_time"): time.process_time, ("time", "time"): time.time,
    ("gc", "collect"): gc.collect, ("json", "dumps"): json.dumps}
violations: list[str] = []  # what the audit hook blocked, in the words the reply carries
sample_seed = [0]  # where large arrays are sampled: the harness sends it with each request
candidate_threads = [0]  # threads the candidate's own code started that are still running
late_threads = [0]  # of those, how many ended after the checked call they were started in had returned


class State:
    hook_on = False  # the audit hook judges events only once the candidate's code is about to run
    candidate_file = "<candidate>"  # the file the candidate's code runs from, once written
    scratch = ""
    writable: tuple[str, ...] = ()  # the scratch directory and, for trusted workers, the shared compiler cache
    allow_processes = False
    cuda: Any = None  # the harness's handles on CUDA (cuda.Cuda) when the spec asks for the GPU
    in_call = False  # a checked call is running (cleared the moment it returns: see ops.checked_call)
    thread_delay_s = 0.0  # how long threads a checked call starts wait before running (see ops.checked_call)


state = State()
