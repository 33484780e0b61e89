"""Shared test helpers: paths, the real CLI, real py-spy recordings."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

TESTS = Path(__file__).parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
GPU = FIXTURES / "gpu"
WORKLOAD = GPU / "workload"


def redline(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the real `redline` console script."""
    exe = Path(sys.executable).with_name("redline")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "redline.cli"]
    return subprocess.run([*cmd, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def py_spy_record(script: Path, out: Path, fmt: str, rate: int = 200, extra: tuple[str, ...] = ()) -> Path:
    """Record a real program with py-spy."""
    exe = Path(sys.executable).with_name("py-spy")
    spy = str(exe) if exe.exists() else shutil.which("py-spy")
    assert spy, "py-spy is a dev dependency"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([spy, "record", "--rate", str(rate), "--format", fmt, "--output", str(out), *extra, "--",
                    sys.executable, str(script)], check=True, capture_output=True, timeout=300)
    return out


def descends(pid: int, root: int) -> bool:
    while pid > 1:
        if pid == root:
            return True
        try:
            pid = int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
    return False


def sandboxed_workers(under: int | None = None) -> set[int]:
    """PIDs of live sandboxed worker processes (REDLINE_SANDBOXED=1 in their environment), only those
    below process `under` where given."""
    pids = set()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"REDLINE_SANDBOXED=1" in (proc / "environ").read_bytes() and \
                    "\nState:\tZ" not in (proc / "status").read_text() and \
                    (under is None or descends(int(proc.name), under)):
                pids.add(int(proc.name))
        except OSError:
            continue
    return pids


def wait_for_spinning(count: int = 1, cpu_s: float = 1.0, timeout: float = 120, under: int | None = None) -> None:
    """Wait until `count` sandboxed workers, started below process `under` where given, have each used
    `cpu_s` of CPU: candidates are running their calls. A condition polled, not a guessed delay; with
    `under`, other runs on the machine do not count."""
    import time

    tick = os.sysconf("SC_CLK_TCK")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = 0
        for pid in sandboxed_workers(under):
            try:
                fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            busy += (int(fields[11]) + int(fields[12])) / tick >= cpu_s
        if busy >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {count} candidate workers started running their calls")


def plain(value: Any) -> Any:
    """pygls hands custom notifications' params over as named tuples; make them plain data again."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


# Each adversarial candidate (tests/adversarial/candidates) -> the statuses it may get and words its reason holds.
ADVERSARIAL_EXPECT: dict[str, tuple[set[str], tuple[str, ...]]] = {
    "honest_vectorised.py": ({"ok"}, ("faster",)),
    "exact_copy.py": ({"not_faster"}, ("threshold",)),
    "cache_by_shape.py": ({"incorrect"}, ("wrong result",)),
    "import_time_precompute.py": ({"incorrect"}, ("wrong result",)),
    "skip_some_calls.py": ({"incorrect"}, ("wrong result",)),
    "warmup_then_cheap.py": ({"incorrect"}, ("timed call",)),
    "lazy_proxy.py": ({"incorrect"}, ("Lazy", "numpy.ndarray")),
    "background_thread.py": ({"rejected_exploit"}, ("background threads",)),
    "daemon_thread.py": ({"rejected_exploit"}, ("background threads",)),
    "threads_joined.py": ({"ok", "not_faster"}, ("95% CI",)),  # timed to the end: no rule turned it away
    "fake_equality.py": ({"incorrect"}, ("AlwaysEqual",)),
    "patched_timer.py": ({"rejected_exploit"}, ("patched time.perf_counter",)),
    "patched_comparison.py": ({"incorrect"}, ("wrong result",)),
    "caller_frames.py": ({"rejected_exploit"}, ("harness's stack frames",)),
    "garbage_collector.py": ({"rejected_exploit"}, ("garbage collector",)),
    "mutates_inputs.py": ({"incorrect"}, ("aliases an input",)),
    "mutates_only.py": ({"incorrect"}, ("mutates its inputs",)),
    "precision_dropped.py": ({"incorrect"}, ("float64 tolerance",)),
    "nondeterministic.py": ({"incorrect"}, ("tolerance",)),
    "crashes.py": ({"crashed"}, ("ValueError", "candidate blew up")),
    "os_exit.py": ({"crashed"}, ("exited with code 0",)),
    "hang_at_import.py": ({"timeout"}, ("hangs at import",)),
    "hang_at_call.py": ({"timeout"}, ("did not finish",)),
    "setsid_escape.py": ({"rejected_exploit"}, ("started a process",)),
    "memory_blowup.py": ({"crashed"}, ("MemoryError",)),
    "network.py": ({"rejected_exploit"}, ("network",)),
    "reads_secrets.py": ({"rejected_exploit"}, ("secrets file",)),
    "secret_env.py": ({"not_faster"}, ("threshold",)),
    "writes_workspace.py": ({"rejected_exploit"}, ("outside the scratch directory",)),
    "write_past_end.py": ({"rejected_exploit"}, ("ctypes",)),
    "garbage_reply.md": ({"build_error"}, ("does not define affine",)),
}


def toml_workspace(root: Path) -> Path:
    """A user's project made of real third-party code: tomli's pure-Python sources (from the installed
    tomli, pinned in the dev extra) in `root/tomli/`, and the workload that uses it as `root/work.py`."""
    import tomli

    src = Path(tomli.__file__).parent
    (root / "tomli").mkdir(parents=True, exist_ok=True)
    for f in src.glob("*.py"):
        shutil.copy(f, root / "tomli" / f.name)
    shutil.copy(TESTS / "workloads" / "toml_work.py", root / "work.py")
    (root / "redline.toml").write_text("")
    return root


class Service:
    """tests/workloads/json_service.py, started and loaded by a client thread until stopped."""

    def __init__(self, cwd: Path) -> None:
        shutil.copy(TESTS / "workloads" / "json_service.py", cwd / "json_service.py")
        self.proc = subprocess.Popen([sys.executable, "json_service.py"], cwd=cwd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the service says when it accepts connections
        assert line.startswith("listening "), line
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/report/"
        self.served = 0
        self.more = threading.Condition()
        self.stop = threading.Event()
        self.client = threading.Thread(target=self._load, daemon=True)
        self.client.start()

    def _load(self) -> None:
        while not self.stop.is_set():
            with urllib.request.urlopen(self.url + "400", timeout=30) as reply:
                json.loads(reply.read())
            with self.more:
                self.served += 1
                self.more.notify_all()

    def wait_served(self, n: int) -> None:
        with self.more:
            target = self.served + n
            assert self.more.wait_for(lambda: self.served >= target, timeout=120)

    def close(self) -> None:
        self.stop.set()
        self.client.join(timeout=30)
        self.proc.terminate()
        self.proc.wait(timeout=30)
