"""`redline profile`: record a command with py-spy, keeping the command's exit status."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


class RecordError(Exception):
    """py-spy is missing or could not sample the command."""


def py_spy() -> str:
    """Path of the py-spy executable: beside this interpreter first (a venv's bin), then PATH."""
    local = Path(sys.executable).with_name("py-spy")
    if local.exists():
        return str(local)
    found = shutil.which("py-spy")
    if found is None:
        raise RecordError("py-spy is not installed: pip install py-spy")
    return found


def child_stdio(to_stderr: bool) -> dict[str, Any]:
    """The standard streams of a program a server runs for the user: no stdin, and its stdout joined to
    the server's stderr, which editors show in the server's output channel. A language or MCP server
    speaks its protocol on stdout: one line the program printed there would corrupt the stream."""
    return {"stdin": subprocess.DEVNULL, "stdout": sys.stderr.fileno()} if to_stderr else {}


def redline_dir(root: Path) -> Path:
    """`root/.redline`, made private to the user (0700) and ignoring itself in git (a `.gitignore` of
    `*` inside it, as pytest's and ruff's caches do): it holds traces, captured calls (the program's
    real data) and run logs, one `git add -A` away from a commit otherwise."""
    folder = root / ".redline"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# redline's traces, captured calls and run logs: never committed\n*\n")
    return folder


def default_output(fmt: str, root: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    ext = "speedscope.json" if fmt == "speedscope" else "txt"
    return redline_dir(root) / f"profile-{stamp}.{ext}"


def record(cmd: list[str], output: Path, fmt: str = "speedscope", rate: int = 100, subprocesses: bool = False,
           native: bool = False, idle: bool = False, stdio_to_stderr: bool = False) -> int:
    """Run `cmd` under py-spy and write the trace to `output`; returns the command's exit status.

    The command is started by redline and py-spy attaches to it by pid, so the command's own
    exit status is known (py-spy's `record -- CMD` exits 0 whatever the command did). With
    `stdio_to_stderr`, the command gets no stdin and writes its stdout to this process's stderr (a
    server's stdout is its protocol).
    """
    exe = py_spy()
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        child = subprocess.Popen(cmd, **child_stdio(stdio_to_stderr))
    except OSError as exc:
        raise RecordError(f"cannot start {cmd[0]}: {exc.strerror}")
    args = [exe, "record", "--pid", str(child.pid), "--output", str(output), "--format", fmt, "--rate", str(rate),
            "--nonblocking"]
    if subprocesses:
        args.append("--subprocesses")
    if native:
        args.append("--native")
    if idle:
        args.append("--idle")
    sampler_rc, err = 0, b""
    for _ in range(20):  # the interpreter may not be initialised yet when py-spy first looks
        sampler = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, err = sampler.communicate()
        sampler_rc = sampler.returncode
        if sampler_rc == 0 or child.poll() is not None:
            break
        time.sleep(0.05)
    rc = child.wait()
    if not output.exists():
        msg = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise RecordError(f"py-spy wrote no trace (exit {sampler_rc}: {msg[0]})")
    return rc if rc >= 0 else 128 - rc

