"""`redline doctor`: what this machine gives redline, each part checked, with the command that fixes it."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from redline import __version__


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok", "limited" (works, with less), "missing" (redline cannot profile without it)
    detail: str
    fix: str = ""  # the one command (or step) that fixes it; empty when ok


def sandbox() -> Check:
    from redline.evaluator.sandbox import bwrap_path

    if bwrap_path():
        return Check("sandbox", "ok", "bubblewrap: candidates run with no network, their own pid and mount "
                     "namespaces and a read-only filesystem")
    found = shutil.which("bwrap")
    why = "bwrap is installed but cannot create namespaces here" if found else "bubblewrap is not installed"
    fix = ("allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), or run in a "
           "container started with --privileged" if found else "sudo apt-get install bubblewrap  (or: sh scripts/system-deps.sh)")
    return Check("sandbox", "limited", f"{why}: candidates run with process isolation only (own session, "
                 "rlimits, an audit hook; network and filesystem reachable)", fix)


def sampling() -> Check:
    from redline.profilers.record import RecordError, attach_denied, py_spy

    try:
        exe = py_spy()
    except RecordError as exc:
        return Check("py-spy", "missing", str(exc), "pip install py-spy")
    child = subprocess.Popen([sys.executable, "-c", "import sys, time\nprint(flush=True)\ntime.sleep(30)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        child.stdout.readline()  # running Python code: the interpreter is initialised
        dump = subprocess.run([exe, "dump", "--pid", str(child.pid)], capture_output=True, text=True, timeout=30)
    finally:
        child.kill()
        child.wait()
    if dump.returncode == 0:
        return Check("py-spy", "ok", f"{exe} samples and attaches to processes (redline profile, --pid)")
    text = (dump.stderr + dump.stdout).lower()
    if "permission denied" in text or "operation not permitted" in text:
        return Check("py-spy", "missing", attach_denied(child.pid).replace(f"process {child.pid}'s", "a process's"),
                     "sudo env \"PATH=$PATH\" redline ...  (or allow ptrace, see the detail)")
    last = (dump.stderr or dump.stdout).strip().splitlines()[:1] or ["no output"]
    return Check("py-spy", "missing", f"py-spy could not read a Python process: {last[0]}", "pip install -U py-spy")


def compiler() -> Check:
    from redline.evaluator.proposers.compiled import c_compiler

    cc = c_compiler()
    headers = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    if cc is None:
        return Check("C compiler", "limited", "no C compiler: the Cython and mypyc proposers and torch's inline extensions "
                     "are skipped", "sudo apt-get install gcc")
    if not os.path.exists(headers):
        return Check("C compiler", "limited", f"{cc} found, but not Python's headers ({headers}): the Cython and mypyc proposers are skipped",
                     f"sudo apt-get install python{sys.version_info.major}.{sys.version_info.minor}-dev")
    return Check("C compiler", "ok", f"{cc} and Python's headers")


def module(name: str, purpose: str, fix: str) -> Callable[[], Check]:
    def check() -> Check:
        if importlib.util.find_spec(name) is not None:
            return Check(name, "ok", purpose)
        return Check(name, "limited", f"not installed: {purpose} is skipped", fix)
    return check


def gpu_tools() -> list[Check]:
    """nvcc, Nsight Compute and compute-sanitizer, where there is an NVIDIA GPU."""
    if shutil.which("nvidia-smi") is None and not Path("/dev/nvidia0").exists():
        return [Check("GPU", "ok", "no NVIDIA GPU here: the GPU checks do not apply")]
    out = []
    for tool, purpose in (("nvcc", "torch's inline CUDA extensions"),
                          ("ncu", "Nsight Compute profiles of the offered kernel"),
                          ("compute-sanitizer", "memcheck and racecheck of the offered kernel")):
        path = shutil.which(tool)
        out.append(Check(tool, "ok", f"{path}: {purpose}") if path else Check(
            tool, "limited", f"not on PATH: {purpose} is skipped", "install the CUDA toolkit and put its bin/ on PATH"))
    return out


def interpreter() -> Check:
    return Check("interpreter", "ok", f"{sys.executable} (Python {sys.version.split()[0]}, redline {__version__}); "
                 "point the editor's redline.interpreter setting here to use this install")


def checks() -> list[Check]:
    found = [interpreter(), sandbox(), sampling(), compiler(),
             module("Cython", "the Cython proposer", "pip install 'redline[compile]'")(),
             module("mypyc", "the mypyc proposer", "pip install 'redline[compile]'")(),
             module("numba", "the numba proposer", "pip install numba")(),
             module("torch", "the torch proposers (torch.compile, idioms, CUDA graphs)", "pip install 'redline[gpu]'")()]
    return found + gpu_tools()


def main(as_json: bool) -> int:
    """Print each check; exit 0 when nothing is missing, 1 otherwise. `limited` (a sandbox of process
    isolation only, an optional tool absent) works, with less, and does not fail."""
    started = time.monotonic()
    found = checks()
    if as_json:
        print(json.dumps({"checks": [asdict(c) for c in found]}, indent=2))
    else:
        width = max(len(c.name) for c in found)
        for c in found:
            print(f"{c.status:>7}  {c.name:<{width}}  {c.detail}")
            if c.fix:
                print(f"{'':>7}  {'':<{width}}  fix: {c.fix}")
        print(f"({time.monotonic() - started:.1f} s)")
    return 1 if any(c.status == "missing" for c in found) else 0



def from_args(args: argparse.Namespace) -> int:
    return main(args.json)
