"""`redline profile`: record a command with py-spy, keeping the command's exit status."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class RecordError(Exception):
    """py-spy is missing or could not sample the command."""


class AttachError(RecordError):
    """The process to attach to does not exist, or redline may not read it; the message says how to fix it."""


@dataclass(frozen=True)
class Sampling:
    """How py-spy samples. Blocking by default: py-spy pauses the process for each sample, so a stack is
    never read while the program changes it (a torn stack puts time under a caller that never called
    it); `nonblocking` samples without pausing, for programs that must not be paused."""

    fmt: str = "speedscope"
    rate: int = 100
    subprocesses: bool = False
    native: bool = False
    idle: bool = False
    nonblocking: bool = False

    def args(self, exe: str, pid: int, output: Path) -> list[str]:
        args = [exe, "record", "--pid", str(pid), "--output", str(output), "--format", self.fmt, "--rate",
                str(self.rate)]
        flags = {"--subprocesses": self.subprocesses, "--native": self.native, "--idle": self.idle,
                 "--nonblocking": self.nonblocking}
        return args + [flag for flag, on in flags.items() if on]


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


def record(cmd: list[str], output: Path, how: Sampling = Sampling(), stdio_to_stderr: bool = False,
           cwd: Path | None = None) -> int:
    """Run `cmd` under py-spy and write the trace to `output`; returns the command's exit status.

    The command is started by redline and py-spy attaches to it by pid, so the command's own
    exit status is known (py-spy's `record -- CMD` exits 0 whatever the command did). With
    `stdio_to_stderr`, the command gets no stdin and writes its stdout to this process's stderr (a
    server's stdout is its protocol). `cwd`: where the command runs (default: here).
    """
    exe = py_spy()
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        child = subprocess.Popen(cmd, cwd=cwd, **child_stdio(stdio_to_stderr))
    except OSError as exc:
        raise RecordError(f"cannot start {cmd[0]}: {exc.strerror}")
    args = how.args(exe, child.pid, output)
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



# What py-spy prints (any case) when the kernel refuses it the process's memory.
_DENIED = ("permission denied", "operation not permitted")


def attach(pid: int, output: Path, how: Sampling = Sampling(), duration: float | None = None) -> int:
    """Sample the running process `pid` into `output` until Ctrl-C or `duration` seconds; returns 0.

    Ctrl-C reaches py-spy too (one process group), which then writes what it sampled; this waits for it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise AttachError(f"no process {pid}")
    except PermissionError:
        pass  # another user's: py-spy says whether it may read it
    exe = py_spy()
    output.parent.mkdir(parents=True, exist_ok=True)
    args = how.args(exe, pid, output)
    if duration is not None:
        args += ["--duration", str(max(1, round(duration)))]
    sampler = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    assert sampler.stdout is not None
    lines: list[str] = []
    try:
        for line in sampler.stdout:  # py-spy's own progress ("py-spy> Sampling process ...") as it comes
            lines.append(line)
            if line.startswith("py-spy>"):
                print(line, end="", file=sys.stderr, flush=True)
        sampler.wait()
    except KeyboardInterrupt:  # py-spy has it too: it writes what it sampled
        lines += sampler.stdout.readlines()
        sampler.wait()
    text = "".join(lines)
    if any(marker in text.lower() for marker in _DENIED):
        raise AttachError(attach_denied(pid))
    if not output.exists():
        first = next((line.strip() for line in lines if line.startswith("Error")), text.strip()[-200:] or "no output")
        raise RecordError(f"py-spy wrote no trace for process {pid} (exit {sampler.returncode}: {first})")
    return 0


def command_of(pid: int) -> tuple[list[str], Path] | None:
    """A running process's command line and working directory (None where it is gone or not readable)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None
    return [a.decode("utf-8", "replace") for a in argv if a], cwd


def process_running(command: list[str]) -> int | None:
    """The newest running process whose command line is `command` (a service started again since)."""
    found = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and int(p.name) != os.getpid()
             and (c := command_of(int(p.name))) is not None and c[0] == command]
    return max(found) if found else None


def attach_denied(pid: int) -> str:
    """Why reading another process is refused here, and the ways to allow it."""
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    level = scope.read_text().strip() if scope.exists() else ""
    fixes = ["run redline as root (sudo env \"PATH=$PATH\" redline profile --pid ...)"]
    if level and level != "0":
        fixes.append(f"allow reading your own processes: echo 0 | sudo tee {scope} (it is {level})")
    fixes.append("in a container, start it with --cap-add SYS_PTRACE (docker) or the SYS_PTRACE capability "
                 "(Kubernetes securityContext)")
    return f"not allowed to read process {pid}'s memory; " + "; or ".join(fixes)
