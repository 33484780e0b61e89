"""The worker's request loop: read the spec, load the subject, then answer one JSON reply per request."""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

from . import policy
from .codec import describe
from .cuda import hardware
from .ops import _error, op_check, op_locals, op_oracle, op_profile, op_reproduce, op_variants
from .policy import tamper
from .state import _json_dumps, _perf, _type, sample_seed, state, violations
from .subject import Subject
from .timing import op_energy, op_time


def main() -> None:
    spec = json.loads(sys.stdin.readline())
    out = os.fdopen(spec["reply_fd"], "w", buffering=1)
    state.scratch = os.path.abspath(spec["scratch"])
    state.writable = (state.scratch, *([os.path.abspath(spec["compile_cache"])] if spec.get("compile_cache") else []))
    state.allow_processes = bool(spec.get("allow_processes"))
    for key, value in spec.get("env", {}).items():
        os.environ.setdefault(key, value)  # before any user code imports what reads it
    policy.install()
    os.chdir(state.scratch)

    def reply(obj: dict[str, Any]) -> None:
        obj["violations"] = list(violations)
        out.write(_json_dumps(obj) + "\n")

    try:
        subject = Subject(spec)
    except BaseException as exc:
        reply({"op": "load", "ok": False, "error": {"type": f"{_type(exc).__qualname__}", "message": str(exc)[:500],
                                                    "tb": traceback.format_exc(limit=8)[-3000:]}})
        return
    if spec.get("build_only"):
        reply(_built(subject))
        return
    info: dict[str, Any] = {}
    if spec.get("describe"):  # the trusted probe: what the prompt says about inputs and hardware
        try:
            args, kwargs, _ = subject.inputs(subject.first_key())
            info = {"inputs": [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in kwargs.items()]}
        except Exception as exc:
            info = {"inputs": [f"make_inputs failed: {_type(exc).__name__}: {str(exc)[:200]}"]}
        info["hardware"] = hardware()
    reply({"op": "load", "ok": True, "tamper": tamper(), **info,
           **({"gpu": {**state.cuda.state(), "copy_bandwidth_Bps": state.cuda.bandwidth}} if state.cuda is not None else {})})
    for line in sys.stdin:
        t_req = _perf()
        req = json.loads(line)
        sample_seed[0] = int(req["sample_seed"])
        try:
            result = {"check": op_check, "time": op_time, "profile": op_profile, "oracle": op_oracle,
                      "energy": op_energy, "reproduce": op_reproduce, "locals": op_locals,
                      "variants": op_variants}[req["op"]](
                subject, req)
            result["ok"] = True
        except BaseException as exc:
            result = {"ok": False, "error": {"type": _type(exc).__qualname__, "message": str(exc)[:500],
                                             "tb": traceback.format_exc(limit=8)[-3000:]}}
        result["op"] = req["op"]
        result["worker_s"] = (_perf() - t_req) * 1e-9
        result["tamper"] = sorted(set(result.get("tamper", [])) | set(tamper()))
        reply(result)


def _built(subject: Subject) -> dict[str, Any]:
    """A build worker's one reply: every function the candidate compiles with redline's compile decorators,
    built into the evaluation's compiler cache (a method was built as its class gave it to the subject).
    The timed workers then load those builds; none of them may start the processes a build needs."""
    namespace = sys.modules.get(subject.module.__name__ + "__candidate")
    found = [v for v in [subject.fn, *(vars(namespace).values() if namespace else ())]
             if _type(v).__name__ in ("_RedlineCython", "_RedlineMypyc") and hasattr(v, "load")]  # compiled.py's _DECORATORS
    try:
        for value in found:
            if value.compiled is None:
                value.load()
    except BaseException as exc:
        return {"op": "load", "ok": False, "error": _error(exc)}
    return {"op": "load", "ok": True, "tamper": tamper()}
