"""The sandbox's policy inside the worker: an audit hook that user code cannot remove, which
records and blocks what candidates must not do; the check for patched harness functions; and the
count of threads the candidate's own code starts."""

from __future__ import annotations

import _thread
import os
import sys
import sysconfig
import threading
import types
from typing import Any

from .state import _isinstance, _sleep, candidate_threads, late_threads, state, violations, watched

HARNESS_DIR = os.path.dirname(os.path.abspath(__file__))  # every file of the worker is the harness's
_in_hook = False
_SECRET_PARTS = ("/.ssh", "/.aws", "/.gnupg", "/.netrc", "/.config/gcloud", "/.docker/config", "/.git-credentials",
                 "/etc/shadow", "/.env", "/.pypirc", "/.kube/config")


def _violation(msg: str) -> None:
    if msg not in violations:
        violations.append(msg)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    global _in_hook
    if not state.hook_on or _in_hook:
        return
    _in_hook = True
    try:
        _check(event, args)
    finally:
        _in_hook = False


_STDLIB = tuple({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})


def _called_from_candidate() -> bool:
    """Whether the candidate's own code caused the current event.

    Walking out from the event, standard-library frames (subprocess, os) are passed over; the
    first other frame decides: the candidate's code, or an installed library acting for it (Triton
    starting ptxas, numba loading its runtime), which may.
    """
    return _candidate_frame(sys._getframe(3))  # 0: here, 1: _check, 2: _audit, 3: what raised it


def _candidate_frame(frame: types.FrameType | None) -> bool:
    while frame is not None:
        name = frame.f_code.co_filename
        if name == state.candidate_file:
            return True
        if not (name.startswith(_STDLIB) and "site-packages" not in name) and not _harness(name):
            return False
        frame = frame.f_back
    return False


def _check(event: str, args: tuple[Any, ...]) -> None:
    if event == "open":
        path, mode, flags = args[0], args[1], args[2]
        if _isinstance(path, int):
            return
        p = os.fsdecode(path) if _isinstance(path, (str, bytes)) else str(path)
        full = os.path.abspath(p)
        writing = (mode and any(c in str(mode) for c in "wax+")) or (flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        if any(part in full for part in _SECRET_PARTS):
            _violation(f"read a secrets file ({full})")
            raise PermissionError(f"redline sandbox: {full} is off limits")
        if writing and not (any(full == w or full.startswith(w + os.sep) for w in state.writable)
                            or full.startswith("/dev/")):
            _violation(f"wrote outside the scratch directory ({full})")
            raise PermissionError(f"redline sandbox: writing {full} is not allowed")
    elif event in ("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"):
        _violation("tried to reach the network")
        raise PermissionError("redline sandbox: no network")
    elif event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                   "os.forkpty") and not state.allow_processes and _called_from_candidate():
        _violation(f"started a process ({event})")
        raise PermissionError("redline sandbox: starting processes is not allowed")
    elif event in ("ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.string_at", "ctypes.wstring_at",
                   "ctypes.addressof", "ctypes.call_function") and not state.allow_processes \
            and _called_from_candidate():
        _violation(f"used ctypes to reach raw memory or native code ({event})")
        raise PermissionError("redline sandbox: ctypes is not allowed in candidates")
    elif event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
        _violation(f"inspected the garbage collector ({event})")
        raise PermissionError("redline sandbox: gc introspection is not allowed")
    elif event == "sys._getframe":
        frame = args[0] if args else None
        code = getattr(frame, "f_code", None)
        if code is not None and _harness(code.co_filename):
            _violation("inspected the harness's stack frames")
            raise PermissionError("redline sandbox: the harness's frames are off limits")




def _harness(filename: str) -> bool:
    return os.path.dirname(os.path.abspath(filename)) == HARNESS_DIR


def tamper() -> list[str]:
    out = []
    for (mod, attr), orig in watched.items():
        m = sys.modules.get(mod)
        if m is not None and getattr(m, attr, None) is not orig:
            out.append(f"patched {mod}.{attr}")
    return out


# Threads the candidate's own code starts, counted while they run: one still running when the
# call has returned is finishing the work outside it.
_thread_lock = _thread.allocate_lock()
_real_start_new_thread = _thread.start_new_thread


def _counting_start_new_thread(function: Any, args: Any = (), kwargs: Any = None) -> Any:
    if not (state.hook_on and _candidate_frame(sys._getframe(1))):
        return _real_start_new_thread(function, args, kwargs or {})

    started_in_call = state.in_call
    if started_in_call and state.thread_delay_s:
        _delay_target(function, state.thread_delay_s)

    def run(*a: Any, **k: Any) -> Any:
        try:
            return function(*a, **k)
        finally:
            with _thread_lock:
                candidate_threads[0] -= 1
                if started_in_call and not state.in_call:
                    late_threads[0] += 1  # still working after the call it was started in returned

    with _thread_lock:
        candidate_threads[0] += 1
    return _real_start_new_thread(run, args, kwargs or {})


def _delay_target(bootstrap: Any, seconds: float) -> None:
    """Make a thread wait `seconds` before its target runs: after it has told `Thread.start` that it
    started (so the caller goes on), before any of its work."""
    thread: Any = getattr(bootstrap, "__self__", None)
    if not _isinstance(thread, threading.Thread):
        return
    target = thread.run

    def run_later() -> None:
        _sleep(seconds)
        target()

    thread.run = run_later


def install() -> None:
    """The audit hook, and thread counting, for this process (the worker's only)."""
    sys.addaudithook(_audit)
    _thread.start_new_thread = _counting_start_new_thread
    if hasattr(threading, "_start_new_thread"):
        threading._start_new_thread = _counting_start_new_thread


