"""Running untrusted code: one execution-backend interface, and the local subprocess backend.

Each worker runs in its own session and process group, in a scratch directory, with rlimits and
a secrets-free environment. Where bubblewrap (`bwrap`) exists, the worker also gets its own
network namespace (no network), PID namespace (everything it starts dies with it, setsid or
not) and a read-only view of the filesystem except its scratch directory. Requests have
wall-clock deadlines; at a deadline the whole process group is killed.
"""

from __future__ import annotations

import json
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from ..models import Limits

WORKER = Path(__file__).with_name("redline_worker") / "__main__.py"
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|^OPENAI_|^ANTHROPIC_|^AWS_|"
                     r"^AZURE_|^GOOGLE_|^GH_|^GITHUB_|^HF_|^HUGGING", re.I)


class WorkerDied(Exception):
    """The worker exited (or was killed) before replying."""

    def __init__(self, message: str, returncode: int | None, stderr_tail: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class WorkerTimeout(Exception):
    """A request passed its deadline; the worker's process group has been killed."""


def compiler_caches(root: str) -> dict[str, str]:
    """The environment that puts inductor's, Triton's (with its autotuners' choices), torch's inline
    extensions' and the Cython proposer's build caches under `root`."""
    return {"TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor"), "TRITON_CACHE_DIR": os.path.join(root, "triton"),
            "TRITON_CACHE_AUTOTUNING": "1", "TORCH_EXTENSIONS_DIR": os.path.join(root, "torch_extensions"),
            "REDLINE_CYTHON_CACHE": os.path.join(root, "cython")}


def clean_env(extra: dict[str, str] | None = None, scratch: str = "/tmp") -> dict[str, str]:
    """The parent's environment without anything that looks like a secret."""
    env = {k: v for k, v in os.environ.items() if not _SECRET.search(k)}
    env.update({"HOME": scratch, "TMPDIR": scratch, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
                "PYTHONHASHSEED": "0", "NUMBA_CACHE_DIR": scratch,
                # Compiler caches live in the worker's scratch: never the user's (a parent that ran
                # torch.compile exports its cache directory), never shared between candidates.
                **compiler_caches(scratch)})
    env.pop("PYTHONSTARTUP", None)
    env.update(extra or {})
    return env


def bwrap_path() -> str | None:
    path = shutil.which("bwrap")
    if path is None:
        return None
    probe = subprocess.run([path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net",
                            "--unshare-pid", "--die-with-parent", "true"], capture_output=True, timeout=10)
    return path if probe.returncode == 0 else None


def isolation_line(backend: str = "local") -> str:
    """What a run says when it starts: the sandbox its candidates will run in."""
    if backend == "ray":
        return "sandbox: on the Ray cluster's workers (the report's `isolation` says which)"
    if bwrap_path():
        return "sandbox: bubblewrap (no network, own pid and mount namespaces, read-only filesystem)"
    return ("sandbox: process isolation only, no bubblewrap here (candidates can reach the network and files); "
            "`redline doctor` says how to fix it")


def _descendants(pid: int) -> list[int]:
    """`pid` and every process below it, from /proc."""
    out: list[int] = []
    stack = [pid]
    while stack:
        p = stack.pop()
        if p in out:
            continue
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                stack.extend(int(k) for k in Path(f"/proc/{p}/task/{task}/children").read_text().split())
        except (OSError, ValueError):
            continue
    return out


def process_cpu_seconds(pid: int, stat_path: str = "") -> float:
    """User + system CPU time of one process (all its threads, ended ones included), read from /proc; or
    of one thread, from its `stat_path`."""
    try:
        stat = Path(stat_path or f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and all its descendants, read from /proc."""
    return sum(process_cpu_seconds(p) for p in _descendants(pid))


class Worker:
    """A running sandboxed worker: send a request, get its validated JSON reply."""

    def __init__(self, proc: subprocess.Popen[bytes], reply_fd: int, scratch: Path, stderr_path: Path,
                 isolation: str) -> None:
        self.proc = proc
        self._reply_fd = reply_fd
        self._buf = b""
        self.scratch = scratch
        self.stderr_path = stderr_path
        self.isolation = isolation
        self._worker_pid: int | None = None  # the worker's own process (under bwrap, below bwrap's)

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.proc.pid)

    def own_cpu_seconds(self) -> float:
        """CPU time of the worker process itself (the candidate's code and the threads it starts), not of
        the processes below it, which only libraries may start for it (a compiler's workers)."""
        return process_cpu_seconds(self._worker())

    def main_thread_cpu_seconds(self) -> float:
        """CPU time of the worker's main thread, the one that answers requests: the kernel's count, which
        no code in the worker can change, and never more than the wall time that passed."""
        pid = self._worker()
        return process_cpu_seconds(pid, f"/proc/{pid}/task/{pid}/stat")

    def _worker(self) -> int:
        """The worker's own PID (below bwrap where it runs in a sandbox)."""
        if self._worker_pid is None:
            for pid in _descendants(self.proc.pid):
                try:
                    if b"redline_worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        self._worker_pid = pid
                        break
                except OSError:
                    continue
        return self._worker_pid or self.proc.pid

    def stderr_tail(self, n: int = 3000) -> str:
        try:
            data = self.stderr_path.read_bytes()[-n:]
        except OSError:
            return ""
        return data.decode("utf-8", "replace")

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # reported by read_reply as a dead worker

    def read_reply(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerTimeout(f"no reply within {timeout:.1f}s")
            ready, _, _ = select.select([self._reply_fd], [], [], min(left, 0.5))
            if not ready:
                if self.proc.poll() is not None:
                    self._died()
                continue
            chunk = os.read(self._reply_fd, 1 << 20)
            if not chunk:
                self._died()
            self._buf += chunk
            if len(self._buf) > 512 << 20:
                self.kill()
                raise WorkerDied("reply larger than 512 MiB", None, "")
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            self.kill()
            raise WorkerDied("the worker's reply channel carried something that is not a reply", None,
                             self.stderr_tail())
        if not isinstance(reply, dict):
            raise WorkerDied("malformed reply", None, self.stderr_tail())
        return reply

    def request(self, obj: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.send(obj)
        return self.read_reply(timeout)

    def finish(self, timeout: float) -> int | None:
        """Close the worker's input so that it exits on its own (a profiler around it then writes its
        report); its exit code, or None if it had to be killed at `timeout`."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def _died(self) -> None:
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        self.kill()
        raise WorkerDied(f"exited with code {rc} before replying", rc, self.stderr_tail())

    def kill(self) -> None:
        """Kill the worker's whole process group (and, under bwrap, its PID namespace)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group outlives its leader: kill it regardless
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        _LIVE.discard(self.proc.pid)
        _reap_orphans()

    def close(self) -> None:
        self.kill()
        try:
            os.close(self._reply_fd)
        except OSError:
            pass
        shutil.rmtree(self.scratch, ignore_errors=True)


_LIVE: set[int] = set()  # pids of the workers this process started and has not closed
_SUBREAPER = False


def _reap_orphans() -> None:
    """As a child subreaper, processes that escaped a worker's group become ours: kill and reap them."""
    if not _SUBREAPER:
        return
    try:
        kids = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
    except OSError:
        return
    for k in kids:
        pid = int(k)
        if pid in _LIVE:
            continue
        try:
            cmd = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if b"REDLINE_SANDBOXED=1" in cmd:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError, PermissionError):
                pass


def _become_subreaper() -> None:
    global _SUBREAPER
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        _SUBREAPER = libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _die_with_parent() -> None:
    """SIGKILL this process when the harness that started it dies (a Ray task force-cancelled, say)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _no_aslr() -> None:
    """Fixed address-space layout for workers: the reference and the candidate then get the same
    layout, which removes a few percent of run-to-run bias between two processes of one program."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        current = libc.personality(0xFFFFFFFF)
        libc.personality(current | 0x0040000)  # ADDR_NO_RANDOMIZE
    except (OSError, AttributeError):
        pass


class ExecutionBackend(ABC):
    """Where workers run. The local backend is below; a Ray backend plugs in behind the same calls."""

    isolation: str

    @abstractmethod
    def start(self, spec: dict[str, Any], python: str, limits: Limits, prefix: tuple[str, ...] = ()) -> Worker:
        """Start a worker process for `spec` (see redline_worker/) and return its handle. `prefix` runs
        the worker under another program (a profiler); `{scratch}` in it names the worker's scratch."""

    @abstractmethod
    def run(self, cmd: list[str], scratch: Path, cwd: Path, python: str, limits: Limits,
            timeout: float) -> tuple[int | None, str]:
        """Run a plain command with the same isolation; (exit code, or None on timeout; output tail)."""


class LocalBackend(ExecutionBackend):
    """Workers as local subprocesses, under bwrap when it works here."""

    def __init__(self, isolation: str = "auto") -> None:
        self._bwrap = bwrap_path() if isolation in ("auto", "bwrap") else None
        if isolation == "bwrap" and self._bwrap is None:
            raise RuntimeError("bubblewrap (bwrap) was asked for but does not work here")
        self.isolation = "bwrap (net, pid, mount namespaces; read-only filesystem)" if self._bwrap else \
            "process (own session and process group, rlimits, audit hook; no network namespace)"
        if self._bwrap is None:
            _become_subreaper()

    def _wrap(self, cmd: list[str], scratch: Path, python: str, visible: set[str], cwd: Path | None = None,
              gpu: bool = False, writable: tuple[str, ...] = ()) -> list[str]:
        """`cmd` under bwrap: read-only filesystem, private /tmp with `visible` bound back read-only
        (projects and interpreters may live under /tmp), `scratch` writable, no network."""
        if not self._bwrap:
            return cmd
        wanted = set(visible) | {sys.prefix, sys.base_prefix, str(WORKER.parent.parent), str(Path(python).resolve().parent)}
        wanted |= {p for p in sys.path if p and os.path.isdir(p)}
        binds = []
        for path in sorted(p for p in wanted if p.startswith("/tmp/")):
            binds += ["--ro-bind-try", path, path]
        # A GPU worker needs the host's device nodes (/dev/nvidia*); others get a minimal /dev.
        dev = ["--dev-bind", "/dev", "/dev"] if gpu else ["--dev", "/dev"]
        return [self._bwrap, "--ro-bind", "/", "/", *dev, "--proc", "/proc", "--tmpfs", "/tmp",
                *binds, "--bind", str(scratch), str(scratch), *(a for w in writable for a in ("--bind", w, w)),
                "--unshare-net", "--unshare-pid", "--unshare-ipc",
                "--die-with-parent", "--chdir", str(cwd or scratch), *cmd]

    def _popen(self, cmd: list[str], scratch: Path, limits: Limits, cwd: Path, stdout: Any, stderr: Any,
               pass_fds: tuple[int, ...] = (), gpu: bool = False,
               env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        def limit() -> None:
            _no_aslr()
            _die_with_parent()
            resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))
            if not gpu:  # a CUDA context reserves far more address space than any sane limit
                mem = limits.memory_mb << 20
                resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            fsize = limits.file_mb << 20
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if os.getuid() != 0:
                resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))

        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=stdout, stderr=stderr, pass_fds=pass_fds, cwd=cwd,
                                env=clean_env({"REDLINE_SANDBOXED": "1", **(env or {})}, str(scratch)),
                                start_new_session=True,
                                preexec_fn=limit)
        _LIVE.add(proc.pid)
        return proc

    def start(self, spec: dict[str, Any], python: str, limits: Limits, prefix: tuple[str, ...] = ()) -> Worker:
        scratch = Path(tempfile.mkdtemp(prefix="redline-cand-"))
        read_fd, write_fd = os.pipe()
        spec = {**spec, "reply_fd": write_fd, "scratch": str(scratch)}
        stderr_path = scratch / ".stderr"
        visible = {str(Path(p)) for p in [*spec.get("sys_path", []), *spec.get("visible", [])]} | {
            str(Path(spec["file"]).parent)}
        gpu = spec.get("device") == "cuda"
        # The compiler caches shared by the workers of one trusted code (the reference, a built-in
        # variant) or of one evaluation of a candidate (Evaluator._build), at one path, so what the
        # first compiled and tuned the next ones load; else the worker's own scratch (clean_env).
        cache = spec.get("compile_cache")
        writable: tuple[str, ...] = ()
        env: dict[str, str] = {}
        if cache:
            os.makedirs(cache, mode=0o700, exist_ok=True)
            writable = (cache,)
            env = compiler_caches(cache)
        cmd = self._wrap([*(a.replace("{scratch}", str(scratch)) for a in prefix), python, "-X", "utf8", str(WORKER)],
                         scratch, python, visible, gpu=gpu, writable=writable)
        with open(stderr_path, "wb") as err, open(scratch / ".stdout", "wb") as out:
            proc = self._popen(cmd, scratch, limits, scratch, out, err, (write_fd,), gpu=gpu, env=env)
        os.close(write_fd)
        worker = Worker(proc, read_fd, scratch, stderr_path, self.isolation)
        worker.send(spec)
        return worker

    def run(self, cmd: list[str], scratch: Path, cwd: Path, python: str, limits: Limits,
            timeout: float) -> tuple[int | None, str]:
        """Run a plain command in the sandbox with `scratch` writable; (exit code or None on timeout, output tail)."""
        log = scratch / ".run-output"
        with open(log, "wb") as out:
            proc = self._popen(self._wrap(cmd, scratch, python, set(), cwd), scratch, limits, cwd, out,
                               subprocess.STDOUT)
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                rc: int | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
                _LIVE.discard(proc.pid)
                _reap_orphans()
        return rc, log.read_bytes()[-4000:].decode("utf-8", "replace")


def default_python() -> str:
    """The interpreter that runs targets: this one (the user's, when redline is installed in it)."""
    return sys.executable
