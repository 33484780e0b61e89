"""Timed calls: a batch of calls on inputs prepared before it, each timed on its own (CPU: the bound
perf_counter; CUDA: events behind a head start), with the checks only a timed call can give; and
NVML energy over a window of back-to-back calls."""

from __future__ import annotations

import keyword
import os
import traceback
from typing import Any

from .codec import encode
from .cuda import sync
from .memory import buffers, flip_bits, nbytes, shares, tensor_storages
from .policy import tamper
from .state import _perf, _type, candidate_threads, state
from .subject import Subject


def op_energy(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    """NVML's energy counter over back-to-back calls on the prepared inputs for at least `min_s`
    (the counter moves in steps of milliseconds: a window of a few calls reads mostly noise). No L2
    flush, no output checks inside the window: joules of the calls themselves."""
    cuda = state.cuda
    prepared = [subject.inputs(s) for s in req["seeds"]]
    if cuda is None or cuda.energy_j() is None or not prepared:
        return {"energy_j": None, "calls": 0}
    for args, kwargs, fn in prepared:
        fn(*args, **kwargs)
    cuda.sync()
    calls, deadline = 0, _perf() + int(req["min_s"] * 1e9)
    energy0 = cuda.energy_j()
    while calls < 3 or _perf() < deadline:
        args, kwargs, fn = prepared[calls % len(prepared)]
        fn(*args, **kwargs)
        calls += 1
        if calls % len(prepared) == 0:
            cuda.sync()  # bounded queue: the window ends when the work does
    cuda.sync()
    energy1 = cuda.energy_j()
    return {"energy_j": energy1 - energy0 if energy0 is not None and energy1 is not None else None, "calls": calls,
            "tamper": tamper()}




def move_to_core(slot: int | None) -> None:
    """Start a timed batch on the core the harness chose for its round, the same for both sides: on a
    virtual machine one core can run a process markedly slower than another for minutes, and a process
    stays on the core it last ran on, so two workers that settled on different cores would measure the
    cores. The calling thread is moved there and then allowed every core again, so threads the code
    starts are not confined to one."""
    if slot is None or not hasattr(os, "sched_setaffinity"):
        return
    allowed = sorted(os.sched_getaffinity(0))
    try:
        os.sched_setaffinity(0, {allowed[slot % len(allowed)]})
        os.sched_setaffinity(0, allowed)
    except OSError:
        pass  # a core taken away meanwhile: the batch runs where it is


_CALLERS: dict[tuple[int, tuple[str, ...]], Any] = {}


def timed_call(positional: int, names: tuple[str, ...]) -> Any:
    """`call(fn, args, kwargs, clock) -> (out, start, end)` for calls of that many positional arguments and
    those keywords: the call spelled out as a program's code makes it, `fn(a, b, key=c)`, a CALL in whose
    frame CPython runs a Python function's body, as it does in the program. `fn(*args, **kwargs)` is a
    CALL_FUNCTION_EX, which enters a new evaluation loop for a Python function and not for a compiled
    one: on CPython 3.11, 150 ns more a call for the reference than the program pays, enough to make a
    compiled copy of a function of 200 ns look faster while it slows its program down. Keywords that
    are not identifiers are passed as `**`."""
    key = (positional, names)
    if key not in _CALLERS:
        spelled = [k for k in names if k.isidentifier() and not keyword.iskeyword(k)]
        rest = [k for k in names if k not in spelled]
        params = [f"_a{i}" for i in range(positional)]
        lines = ["def call(_fn, _args, _kwargs, _clock):"]
        if params:
            lines.append(f"    {', '.join(params)}, = _args")
        lines += [f"    _k{j} = _kwargs[{k!r}]" for j, k in enumerate(spelled)]
        if rest:
            lines.append(f"    _rest = {{k: _kwargs[k] for k in {rest!r}}}")
        passed = [*params, *(f"{k}=_k{j}" for j, k in enumerate(spelled)), *(["**_rest"] if rest else [])]
        lines += ["    _start = _clock()", f"    _out = _fn({', '.join(passed)})", "    return _out, _start, _clock()"]
        namespace: dict[str, Any] = {}
        exec(compile("\n".join(lines) + "\n", "<redline timed call>", "exec"), namespace)
        _CALLERS[key] = namespace["call"]
    return _CALLERS[key]


def op_time(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    seeds = req["seeds"]
    keep = set(req["keep"])
    prepared = [subject.inputs(s) for s in seeds]
    callers = [timed_call(len(args), tuple(kwargs)) for args, kwargs, _ in prepared]
    sync()
    cuda = state.cuda
    ready = _held_back(prepared) if cuda is not None else [[] for _ in prepared]
    times: list[float] = []
    parts: list[tuple[float, float, float]] = []  # CUDA: (GPU time on the calling stream, issue time, final wait)
    kept: dict[str, Any] = {}
    errors: str | None = None
    error_tb = ""
    reused = False
    threads_left = 0
    prev_out: Any = None
    if cuda is not None:
        # The head start is the harness's to choose, the same for both sides (from the reference's own
        # time to issue a call): host work a call needs beyond it is charged as idle GPU time.
        cuda.ahead_s = float(req["ahead_s"] if req["ahead_s"] is not None else cuda.ahead_s)
        cuda.measure_overhead()
    energy0 = cuda.energy_j() if cuda else None
    move_to_core(req["core"])
    start = _perf()
    for i, (args, kwargs, fn) in enumerate(prepared):
        events = cuda.begin(ready[i]) if cuda is not None else None  # a cold L2 for every timed call
        try:
            out, t0, t1 = callers[i](fn, args, kwargs, _perf)
            drain_s = cuda.end(events[1], events[2]) if cuda is not None and events is not None else 0.0
        except BaseException as exc:
            errors = f"{_type(exc).__name__}: {exc}"[:500]
            error_tb = traceback.format_exc(limit=7)[-2000:]
            break
        threads_left = max(threads_left, candidate_threads[0])
        host_s = (t1 - t0) * 1e-9
        if cuda is not None and events is not None:
            gpu_s = cuda.elapsed_ms(events[0], events[1]) * 1e-3
            times.append(cuda.call_s(gpu_s, drain_s))
            parts.append((gpu_s, host_s, drain_s))
        else:
            times.append(host_s)
        if prev_out is not None and any(shares(a, b) for a in buffers(out) for b in buffers(prev_out)):
            reused = True
        if i in keep:
            kept[str(i)] = encode(out)  # encoded at once: work finishing later is not seen
        prev_out = out
    total = (_perf() - start) * 1e-9
    first = [*prepared[0][0], *prepared[0][1].values()] if prepared else []
    extra: dict[str, Any] = {"bytes_moved": nbytes(first) + (nbytes(prev_out) if prev_out is not None else 0)
                             if prepared else 0}
    if cuda is not None:
        energy1 = cuda.energy_j()
        extra.update(gpu=_gpu_state(cuda, parts),
                     energy_j=(energy1 - energy0) if energy0 is not None and energy1 is not None else None)
    return {"times": times, "batch_s": total, "outputs": kept, "batch_error": errors, "batch_traceback": error_tb,
            "reused_buffer": reused,
            "threads_left": threads_left, "tamper": tamper(), **extra}


def _held_back(prepared: list[tuple[tuple[Any, ...], dict[str, Any], Any]]) -> list[list[Any]]:
    """On CUDA each call's inputs are kept with their bits inverted until the calling stream reaches
    that call (see Cuda.begin): the storages each call restores (one shared by several calls is
    restored at its first)."""
    ready: list[list[Any]] = []
    seen: set[int] = set()
    for args, kwargs, _fn in prepared:
        mine = []
        for st in tensor_storages([*args, *kwargs.values()]):
            if st.device.type == "cuda" and st.data_ptr() not in seen and flip_bits(st):
                mine.append(st)
            seen.add(st.data_ptr())
        ready.append(mine)
    return ready


def _gpu_state(cuda: Any, parts: list[tuple[float, float, float]]) -> dict[str, Any]:
    """The device's state, and the batch's median GPU time on the calling stream, issue time and final wait."""
    mid = [sorted(col)[len(col) // 2] for col in zip(*parts, strict=True)] if parts else []
    return {**cuda.state(), **({"gpu_time_s": mid[0], "issue_s": mid[1], "drain_s": mid[2]} if mid else {})}


