"""The operations the harness requests (other than timing): check calls on inputs, the float32
oracle, the reproduce check of captured calls, the types the reference's locals hold, and calls for
Nsight Compute to profile."""

from __future__ import annotations

import hashlib
import inspect
import io
import pickle
import sys
import traceback
from typing import Any, ClassVar

from .codec import encode
from .cuda import sync as _sync
from .memory import aliases, buffers
from .state import _isinstance, _len, _type, candidate_threads, late_threads, state, violations
from .subject import Subject, _Unpickler
from .variants import LAYOUT, derive
from .variants import apply as apply_variant


def call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
    try:
        return fn(*args, **kwargs), None
    except BaseException as exc:  # SystemExit, KeyboardInterrupt included: the candidate's to own
        return None, _error(exc)


def synced_call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
    """call(), with the device's queued work finished as part of it: on CUDA a kernel's error (a device-side
    assert, an illegal address) surfaces at the synchronisation, and it is the call's error."""
    out, err = call(fn, args, kwargs)
    if err is None:
        try:
            _sync()
        except BaseException as exc:
            return None, _error(exc)
    return out, err


def _error(exc: BaseException) -> dict[str, Any]:
    if _type(exc) is PermissionError and violations:
        return {"type": "PermissionError", "message": str(exc), "tb": ""}
    tb = traceback.format_exc(limit=8)
    return {"type": f"{_type(exc).__module__}.{_type(exc).__qualname__}", "message": str(exc)[:500], "tb": tb[-3000:]}




def _returned(frame: Any, event: str, arg: Any) -> None:
    """The profile function of a checked call: it clears `in_call` at the return of the outermost
    Python frame, synchronously in the calling thread, so no thread the call started can end
    "before the return" unless it really did (a count read after the return races the thread)."""
    if event == "call":
        _depth[0] += 1
    elif event == "return":
        _depth[0] -= 1
        if _depth[0] == 0:
            state.in_call = False


_depth = [0]


# Threads started by a second checked call wait this long before running: a call that does not wait for
# its threads has returned long before, whatever the scheduler does, so leaving work to them is caught
# every time; a call that joins them only takes longer (checked calls are not timed).
THREAD_DELAY_S = 0.02
# The device-side wait before the second checked call on CUDA: longer than the host takes to issue a
# call, so that work a candidate puts on a stream waiting for the calling stream starts only after the
# call has returned and its outputs' stream-ordered copies are enqueued.
HOLD_S = 2e-3


def checked_call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                 delay_threads: bool) -> tuple[Any, dict[str, Any] | None, int]:
    """A call as the gate makes it: its result or error, and how many threads it started that were
    still running when it returned (whether they ended before the harness looked or not)."""
    late_threads[0] = 0
    _depth[0] = 0
    state.thread_delay_s = THREAD_DELAY_S if delay_threads else 0.0
    state.in_call = True
    # On CUDA no profile hook: it slows the host's issuing of kernels past the device-side hold that
    # makes an unjoined stream's work start late (op_check), and a count read at return suffices for
    # threads that wait 20 ms before running.
    profiled = state.cuda is None
    if profiled:
        sys.setprofile(_returned)
    try:
        out, err = call(fn, args, kwargs)
    finally:
        if profiled:
            sys.setprofile(None)
        state.in_call = False
    return out, err, late_threads[0] + candidate_threads[0]


def op_check(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    results = []
    for seed in req["seeds"]:
        runs = []
        key = ""
        for rep in range(req["repeat"]):
            args, kwargs, fn = subject.inputs(seed)
            if rep == 0:
                key = subject.call_key(fn, args, kwargs)
            if state.cuda is not None:
                state.cuda.sync()
                if rep % 2:  # the second call behind a device-side wait: side streams that join it start late
                    state.cuda.hold(HOLD_S)
            out, err, left = checked_call(fn, args, kwargs, delay_threads=rep % 2 == 1)
            snaps = state.cuda.snapshot(out) if state.cuda is not None and err is None else []
            _sync()
            entry: dict[str, Any] = {"error": err}
            if snaps and state.cuda is not None:
                entry["unordered"] = state.cuda.unordered(snaps)
                del snaps
            if err is None:
                entry["output"] = encode(out)
                entry["aliases_input"] = aliases(out, (*args, *kwargs.values()))
            entry["inputs_after"] = encode([list(args), kwargs], digest=True) if req["inputs_after"] \
                else None
            entry["threads_left"] = left
            runs.append(entry)
        result: dict[str, Any] = {"seed": seed, "runs": runs, "key": key}
        if req["oracle"] and runs[0]["error"] is None and _has_half(out):
            result["oracle"] = _oracle(subject, seed)
        results.append(result)
    return {"results": results}


def op_variants(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    """Each input's edge variants (variants.py): listed (their shapes), or those named in `only` called
    one by one, with what each returned or raised, whether a layout variant's result differs from the
    same values' contiguous result (for the reference: outside its domain, a layout it assumes without
    checking), and for half-precision outputs the float32 oracle. Both sides do the same work, so
    neither process leaves the gate in another state than the other."""
    runs = []
    for seed in req["seeds"][:req["inputs"]]:
        if req["only"] is not None:  # the variants asked for, each on inputs made for it alone
            runs += [_variant(subject, seed, index) for index in req["only"]]
            continue
        args, kwargs, fn = subject.inputs(seed)
        base, found = derive(args, kwargs, fn)
        runs += [{"seed": seed, "index": index, "base": base, "label": label}
                 for index, (label, _transform) in enumerate(found)]
    return {"variants": runs}


def _variant(subject: Subject, seed: int, index: int) -> dict[str, Any]:
    args, kwargs, fn = subject.inputs(seed)  # fresh objects for every variant
    base, found = derive(args, kwargs, fn)
    label, transform = found[index]
    vargs, vkwargs = apply_variant(transform, args, kwargs)
    out, err = synced_call(fn, vargs, vkwargs)
    entry: dict[str, Any] = {"seed": seed, "index": index, "base": base, "label": label, "error": err}
    if err is not None:
        return entry
    entry["output"] = encode(out)
    if label.endswith(LAYOUT):
        args, kwargs, fn = subject.inputs(seed)
        same, _ = synced_call(fn, args, kwargs)
        entry["layout_dependent"] = encode(same) != entry["output"]
    if _has_half(out):
        entry["oracle"] = _oracle_of(fn, vargs, vkwargs)
    return entry


def op_oracle(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    """The float32 results (see _oracle) for the given seeds, and nothing else: asked for after a timed
    round whose half-precision outputs missed the candidate's."""
    return {"oracles": [_oracle(subject, seed) for seed in req["seeds"]]}


def op_reproduce(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    """The reference on each captured call, with what the capture recorded next to what it does now."""
    calls = []
    for index in req["seeds"]:
        recorded = subject.recorded(index)["outcome"]
        args, kwargs, fn = subject.inputs(index)
        out, err = call(fn, args, kwargs)
        entry: dict[str, Any] = {"index": index, "error": err, "raises": recorded.get("type")}
        if recorded["kind"] == "return":
            if recorded.get("value") is not None:
                value = _Unpickler(subject).loads(recorded["value"]) if recorded.get("yielded") is None \
                    else _Unpickler(subject).loads_items(recorded["value"], recorded["yielded"])
                entry["recorded"] = encode(value)
                entry["fingerprint"] = fingerprint(value)
            else:
                entry["recorded_type"] = recorded.get("unpicklable", "")
            if err is None:
                entry["actual"] = encode(_as_recorded(out, subject))
                entry["actual_type"] = f"{_type(out).__module__}.{_type(out).__qualname__}"
        calls.append(entry)
    return {"reproduced": calls}


# How many line events op_locals reads per function and call: a long loop's first iterations show its
# locals' types, and every call's are read (a type one call gives a local, declared, fails another call).
LOCALS_LINES = 2000


def op_locals(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    """The types each of the reference's variables (its parameters too, which its code may rebind; not
    those its inner functions share) held on the given calls, read at each line its own frames run and
    at their return: a type name per value's exact type (`builtins.str`, `mod.Class`). The same for the
    other functions of its module the calls reach (`callees`, each by `name@line`, the line its code
    starts on), which a compiler may build with it."""
    fn = getattr(subject.original, "__func__", subject.original)
    code = getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None
    if code is None:
        return {"types": {}, "callees": {}}
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    files = {code.co_filename, getattr(module, "__file__", None)}
    seen: dict[Any, dict[str, set[str]]] = {}
    lines: dict[Any, int] = {}

    def read(frame: Any, event: str, arg: Any) -> Any:
        co = frame.f_code
        if event in ("line", "return"):
            lines[co] = lines.get(co, 0) + 1
            held = seen[co]
            for name, value in frame.f_locals.items():
                if name in held:
                    t = _type(value)
                    held[name].add(f"{t.__module__}.{t.__qualname__}")
        return read if lines[co] < LOCALS_LINES else None  # seen enough of this function on this call

    def calls(frame: Any, event: str, arg: Any) -> Any:
        co = frame.f_code
        if (co is not code and (co.co_filename not in files or co.co_name.startswith("<"))) \
                or lines.get(co, 0) >= LOCALS_LINES:
            return None
        if co not in seen:
            seen[co] = {name: set() for name in set(co.co_varnames) - set(co.co_cellvars)}
        lines.setdefault(co, 0)
        return read

    for index in req["seeds"]:
        args, kwargs, target = subject.inputs(index)
        lines.clear()
        sys.settrace(calls)
        try:
            call(target, args, kwargs)
        finally:
            sys.settrace(None)

    def held(co: Any) -> dict[str, list[str]]:
        return {name: sorted(types) for name, types in sorted(seen.get(co, {}).items()) if types}
    return {"types": held(code), "callees": {f"{co.co_name}@{co.co_firstlineno}": held(co) for co in seen if co is not code}}


class _Canonical(pickle._Pickler):
    """pickle (the pure-Python pickler, whose dispatch can be changed) in a canonical form: sets in the
    order of their members' own canonical pickles, instances' attributes in sorted order. Two equal
    values built in another order pickle alike, as they encode alike."""

    dispatch: ClassVar[dict[type, Any]] = dict(pickle._Pickler.dispatch)
    dispatch[set] = lambda self, obj: self.save_reduce(set, (_members(obj),), obj=obj)
    dispatch[frozenset] = lambda self, obj: self.save_reduce(frozenset, (_members(obj),), obj=obj)

    def reducer_override(self, obj: Any) -> Any:
        t = _type(obj)
        # Only instances of classes written in Python, with the default reduce: their state is a dict.
        if t in self.dispatch or not t.__flags__ & _HEAPTYPE or t.__reduce_ex__ is not object.__reduce_ex__:
            return NotImplemented
        try:
            rv = obj.__reduce_ex__(4)
        except Exception:
            return NotImplemented
        if _isinstance(rv, str) or _len(rv) < 3:
            return rv
        state = rv[2]
        if _type(state) is dict:
            state = dict(sorted(state.items()))
        elif _type(state) is tuple and _len(state) == 2:
            state = tuple(dict(sorted(s.items())) if _type(s) is dict else s for s in state)
        return (*rv[:2], state, *rv[3:])


_HEAPTYPE = 1 << 9


def _members(s: Any) -> list[Any]:
    """A set's members in the order of their own canonical pickles."""
    return sorted(s, key=_canonical_bytes)


def _canonical_bytes(value: Any) -> bytes:
    buf = io.BytesIO()
    p = _Canonical(buf, protocol=4)
    p.fast = True  # no memo: sharing of equal atoms does not count; recursive values raise
    p.dump(value)
    return buf.getvalue()


def fingerprint(value: Any) -> str | None:
    """The digest of a value's canonical pickle, made without the encoder: two recorded outcomes that
    differ here but encode alike show the encoding loses something. None where it cannot be pickled so
    (a value with cycles, say)."""
    try:
        return hashlib.sha256(_canonical_bytes(value)).hexdigest()
    except Exception:
        return None


def _as_recorded(value: Any, subject: Subject) -> Any:
    """`value` after the round trip through pickle that the recorded outcome made: a class whose own
    pickle keeps only part of its state (a slot its __setstate__ leaves unset) is then compared on what
    survives in both. The live value where it cannot be pickled."""
    try:
        return _Unpickler(subject).loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:
        return value


_HALF = ("torch.bfloat16", "torch.float16")


def _has_half(value: Any) -> bool:
    return any(str(getattr(b, "dtype", "")) in _HALF for b in buffers(value))


def _upcast(value: Any) -> Any:
    """The same value with its bf16/fp16 tensors (and a module's parameters) in float32."""
    torch = sys.modules["torch"]
    t = _type(value)
    if t in (list, tuple):
        return t(_upcast(v) for v in value)
    if t is dict:
        return {k: _upcast(v) for k, v in value.items()}
    if t is torch.Tensor and str(value.dtype) in _HALF:
        return value.float()
    if _isinstance(value, torch.nn.Module):
        return value.float()
    return value


def _oracle(subject: Subject, seed: int) -> Any:
    """The reference's output on the same input computed in float32: how far eager's own half-precision
    rounding of intermediates lies from the exact result (the harness accepts a candidate at least that
    close to it). None when the reference does not run in float32."""
    if "torch" not in sys.modules:
        return None
    args, kwargs, fn = subject.inputs(seed)
    return _oracle_of(fn, args, kwargs)


def _oracle_of(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    owner = getattr(fn, "__self__", None)
    if owner is not None and _isinstance(owner, torch.nn.Module):
        owner.float()
    elif _isinstance(fn, torch.nn.Module):
        fn.float()
    out, err = call(fn, tuple(_upcast(list(args))), _upcast(kwargs))
    _sync()
    if err is not None:
        return None
    try:
        return encode(out)
    except Exception:
        return None


def op_profile(subject: Subject, req: dict[str, Any]) -> dict[str, Any]:
    """Calls on fresh inputs inside an NVTX range `redline_call`, for Nsight Compute to profile
    (only the kernels launched inside the range: not the inputs' creation, not the harness's)."""
    nvtx = state.cuda.torch.cuda.nvtx if state.cuda is not None else None
    for seed in req["seeds"]:
        args, kwargs, fn = subject.inputs(seed)
        _sync()
        if nvtx is not None:
            nvtx.range_push("redline_call")
        _out, err = call(fn, args, kwargs)
        _sync()
        if nvtx is not None:
            nvtx.range_pop()
        if err is not None:
            return {"batch_error": f"{err['type']}: {err['message']}"}
    return {}


