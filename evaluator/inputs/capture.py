"""`redline capture`: run a program and keep real calls of its hot functions as inputs.

The recorder (recorder/_redline_capture.py) runs inside the program; this side plans the capture,
runs the command, and merges what each of the program's processes kept into one store per target,
choosing the calls that cover the argument signatures seen rather than the first ones.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import pickle
import platform
import random
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...profilers.record import child_stdio, redline_dir
from .store import (
    CapturedCall,
    Manifest,
    SignatureCount,
    is_bookkeeping,
    private_folder,
    store_dir,
    write_private,
)

if TYPE_CHECKING:
    from ..target import Located

RECORDER = Path(__file__).with_name("recorder")
_PYTHON = re.compile(r"^python[\d.]*$")


class CaptureError(Exception):
    """The capture cannot start (bad target, no command); CLI exit 2."""


@dataclass(frozen=True)
class CaptureTarget:
    file: Path  # absolute
    qualname: str
    project_root: Path
    module_name: str  # as the project names it (the store's folder)

    @property
    def spec(self) -> str:
        return f"{self.file.relative_to(self.project_root).as_posix()}::{self.qualname}" \
            if self.file.is_relative_to(self.project_root) else f"{self.file}::{self.qualname}"


@dataclass
class CaptureResult:
    exit_code: int
    manifests: list[tuple[CaptureTarget, Manifest, Path]]
    stopped: bool = False  # the command ran for the whole `duration` and was stopped (SIGTERM)


def capture_target(spec: str) -> CaptureTarget:
    """Parse FILE::QUALNAME for capture; the function must exist in the file."""
    from ..target import TargetError, locate

    try:
        return _target_of(locate(spec), spec)
    except TargetError as exc:
        raise CaptureError(str(exc))


def _target_of(found: Located, spec: str) -> CaptureTarget:
    from ..target import module_name_of, project_root

    if "<locals>" in found.qualname:
        raise CaptureError(f"{spec}: a function defined inside another function cannot be captured")
    root = project_root(found.file)
    return CaptureTarget(found.file, found.qualname, root, module_name_of(found.file, root))


def script_command(cmd: list[str]) -> list[str]:
    """`python [OPTIONS] SCRIPT ARGS…` runs SCRIPT through the recorder (so its own functions can be
    targets); any other command is left as it is (imported modules are recorded either way)."""
    if not cmd or not _PYTHON.match(Path(cmd[0]).name):
        return cmd
    i = 1
    while i < len(cmd):
        arg = cmd[i]
        if arg in ("-m", "-c", "-") or arg.startswith(("-m", "-c")):
            return cmd
        if arg in ("-X", "-W", "-Q"):
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            return [*cmd[:i], str(RECORDER / "_redline_capture.py"), *cmd[i:]]
    return cmd


def _redaction(targets: list[CaptureTarget]) -> list[str]:
    """The name patterns whose values capture does not store (redline.toml's `redact`)."""
    from ..config import ConfigError, load_config

    try:
        return load_config(targets[0].project_root).redact if targets else []
    except ConfigError as exc:
        raise CaptureError(str(exc))


def run_capture(targets: list[CaptureTarget], cmd: list[str], cwd: Path, calls: int = 64,
                max_mb: float = 256.0, cancel: threading.Event | None = None,
                stdio_to_stderr: bool = False, duration: float | None = None,
                stop: threading.Event | None = None,
                progress: Callable[[int, int], None] | None = None) -> CaptureResult:
    """Run `cmd` with the recorder and write each target's store; returns CMD's exit code and the manifests.
    Setting `cancel` kills the command's process group; what it had kept is not written. With
    `duration` (a service, which does not end by itself), the command's process group is sent SIGTERM
    after that many seconds, as a service manager stops it, and what it kept is written. With
    `stdio_to_stderr` (see child_stdio), nothing the command writes reaches this process's stdout.
    Setting `stop` ends the command as `duration` does, at once (an editor's Stop). `progress(seen,
    kept)` is called about every second with the calls the program's processes have flushed so far."""
    if duration is not None and duration <= 0:
        raise CaptureError("--duration must be more than 0 seconds")
    if calls < 1:
        raise CaptureError("--calls must be at least 1")
    work = Path(tempfile.mkdtemp(prefix="redline-capture-"))
    try:
        cache = private_folder(redline_dir(targets[0].project_root) / "cache" / "capture",
                               targets[0].project_root) if targets else None
        plan = {"out": str(work), "calls": calls, "max_bytes": int(max_mb * (1 << 20)),
                "targets": [{"file": str(t.file), "qualname": t.qualname} for t in targets],
                "redact": _redaction(targets),
                "cache": str(cache) if cache else ""}
        (work / "plan.json").write_text(json.dumps(plan))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(RECORDER), _lend_cloudpickle(work),
                                                         env.get("PYTHONPATH", "")) if p)
        env["REDLINE_CAPTURE"] = str(work / "plan.json")
        started = datetime.datetime.now(datetime.timezone.utc)
        stopped = threading.Event()
        watch = _Watch(cancel, duration, stop, stopped,
                       (lambda: progress(*_so_far(work))) if progress is not None else None)
        rc = _run(script_command(cmd), cwd, env, stdio_to_stderr, watch)
        processes = _read_processes(work)
        if cache is not None:
            _prune_code_cache(cache)
        out = []
        for t in targets:
            manifest, folder = _write_store(t, processes, calls, max_mb, cmd, cwd, started, rc)
            out.append((t, manifest, folder))
        return CaptureResult(rc, out, stopped.is_set())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _prune_code_cache(folder: Path, keep: int = 100) -> None:
    """Keep the `keep` most recently used modules the recorder compiled (see recorder's transformed_code)."""
    entries = sorted(folder.glob("*.code"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[keep:]:
        old.unlink(missing_ok=True)


def _lend_cloudpickle(work: Path) -> str:
    """A folder holding redline's own cloudpickle, for the program's path: the recorder snapshots
    closures, lambdas and local classes with it, whether or not the program's environment has it (the
    folder holds nothing else, so the program imports nothing more of redline's)."""
    import cloudpickle

    lib = work / "lib"
    shutil.copytree(Path(cloudpickle.__file__).parent, lib / "cloudpickle",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return str(lib)


@dataclass
class _Watch:
    """What ends a captured command besides itself: a cancel (killed, nothing kept), `duration` seconds
    or a `stop` (SIGTERM to its group, as a service manager stops it: its calls are kept, and `stopped`
    says so); and what is told about it while it runs (`tick`, about every second)."""

    cancel: threading.Event | None = None
    duration: float | None = None
    stop: threading.Event | None = None
    stopped: threading.Event = field(default_factory=threading.Event)
    tick: Callable[[], None] | None = None

    @property
    def active(self) -> bool:
        return any(x is not None for x in (self.cancel, self.duration, self.stop, self.tick))


def _run(cmd: list[str], cwd: Path, env: dict[str, str], to_stderr: bool, watch: _Watch) -> int:
    watched = watch.active
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, start_new_session=watched, **child_stdio(to_stderr))
    except OSError as exc:
        raise CaptureError(f"cannot start {cmd[0]}: {exc.strerror}")
    stop_at = time.monotonic() + watch.duration if watch.duration is not None else None
    next_tick = time.monotonic() + 1.0
    with _forwarding(proc):
        try:
            while True:
                try:
                    rc = proc.wait(timeout=0.2 if watched else None)
                    break
                except subprocess.TimeoutExpired:
                    if watch.cancel is not None and watch.cancel.is_set():
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                        raise CaptureError("capture cancelled")
                    now = time.monotonic()
                    asked = watch.stop is not None and watch.stop.is_set()
                    if not watch.stopped.is_set() and (asked or (stop_at is not None and now >= stop_at)):
                        watch.stopped.set()  # once: the program's own handlers finish the job (the recorder flushes)
                        os.killpg(proc.pid, signal.SIGTERM)
                    if watch.tick is not None and now >= next_tick:
                        next_tick = now + 1.0
                        watch.tick()
        except KeyboardInterrupt:
            if watched:  # in a session of its own, it did not get the Ctrl-C: pass it on
                os.killpg(proc.pid, signal.SIGINT)
            proc.wait()  # the command got the same Ctrl-C; what it kept before is still written
            rc = proc.returncode
    return rc if rc >= 0 else 128 - rc


def _so_far(work: Path) -> tuple[int, int]:
    """Calls seen and kept so far, from the counts each of the program's processes writes next to its
    store file when it flushes (replaced whole; the snapshots are not read)."""
    seen = kept = 0
    for f in work.glob("process-*.counts"):
        try:
            counts = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        seen, kept = seen + int(counts["seen"]), kept + int(counts["kept"])
    return seen, kept


@contextlib.contextmanager
def _forwarding(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """SIGTERM and SIGHUP to `redline capture` (a service manager stopping it, alone or with its
    process group) are passed to the command, which ends as it would without redline; redline waits
    for it and then writes the stores. Only the main thread can hold signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    def forward(signum: int, frame: Any) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)
    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _read_processes(work: Path) -> list[dict[str, Any]]:
    out = []
    for f in sorted(work.glob("process-*.pkl")):
        with f.open("rb") as fh:
            out.append(pickle.load(fh))  # written by the recorder in the program's own processes
    return out


def _write_store(t: CaptureTarget, processes: list[dict[str, Any]], calls: int, max_mb: float, cmd: list[str],
                 cwd: Path, started: datetime.datetime, rc: int) -> tuple[Manifest, Path]:
    key = f"{os.path.realpath(t.file)}::{t.qualname}"
    seen: dict[str, int] = {}
    kept: dict[str, list[dict[str, Any]]] = {}
    unrecordable: dict[str, int] = {}
    dropped: dict[str, int] = {}
    module = ""
    examined = 0
    for proc in processes:
        for rec in proc["targets"]:
            if rec["key"] != key:
                continue
            module = module or rec["module"]
            examined += rec["examined"]
            for sig, n in rec["seen"].items():
                seen[sig] = seen.get(sig, 0) + n
            for sig, bucket in rec["kept"].items():
                kept.setdefault(sig, []).extend(bucket)
            for table, part in ((unrecordable, rec["unrecordable"]), (dropped, rec["dropped"])):
                for why, n in part.items():
                    table[why] = table.get(why, 0) + n
    chosen = _cover(kept, seen, calls, int(max_mb * (1 << 20)), dropped)
    folder = store_dir(t.project_root, t.module_name, t.qualname)
    if folder.exists():
        shutil.rmtree(folder)
    private_folder(folder / "calls", t.project_root)
    entries = []
    for i, (sig, record) in enumerate(chosen):
        name = f"calls/{i:04d}.pkl"
        write_private(folder / name, pickle.dumps({"call": record["call"], "streams": record.get("streams", []),
                                                   "outcome": record["outcome"]}, protocol=pickle.HIGHEST_PROTOCOL))
        outcome = record["outcome"]
        entries.append(CapturedCall(file=name, signature=sig, bytes=record["bytes"], outcome=outcome["kind"],
                                    raises=outcome.get("type", ""), redacted=record.get("redacted", False)))
    kept_by_sig: dict[str, int] = {}
    for sig, _ in chosen:
        kept_by_sig[sig] = kept_by_sig.get(sig, 0) + 1
    module = module or t.module_name
    manifest = Manifest(
        target=t.spec, file=str(t.file), qualname=t.qualname, module=module,
        import_root=str(_import_root(t.file, module)), command=list(cmd), cwd=str(cwd),
        captured_at=started.isoformat(timespec="seconds"),
        python=next((p["version"] for p in processes if p.get("version")), platform.python_version()),
        interpreter=next((p["executable"] for p in processes if p.get("executable")), ""), exit_code=rc,
        processes=len(processes), calls_seen=sum(seen.values()), calls_examined=examined, calls_kept=len(chosen),
        signatures=[SignatureCount(signature=s, seen=n, kept=kept_by_sig.get(s, 0))
                    for s, n in sorted(seen.items(), key=lambda kv: -kv[1])],
        calls=entries, unrecordable=unrecordable, dropped=dropped)
    write_private(folder / "manifest.json", manifest.model_dump_json(indent=2).encode())
    return manifest, folder


def _cover(kept: dict[str, list[dict[str, Any]]], seen: dict[str, int], calls: int, max_bytes: int,
           dropped: dict[str, int]) -> list[tuple[str, dict[str, Any]]]:
    """Up to `calls` calls, one signature at a time in turn (most seen first), within `max_bytes`."""
    rng = random.Random(0)
    queues = []
    for sig in sorted(kept, key=lambda s: -seen.get(s, 0)):
        bucket = list(kept[sig])
        rng.shuffle(bucket)
        queues.append((sig, bucket))
    chosen: list[tuple[str, dict[str, Any]]] = []
    total = 0
    while len(chosen) < calls and any(b for _, b in queues):
        for sig, bucket in queues:
            if not bucket or len(chosen) >= calls:
                continue
            record = bucket.pop()
            if total + record["bytes"] > max_bytes:
                dropped["over the --max-mb limit"] = dropped.get("over the --max-mb limit", 0) + 1
                continue
            chosen.append((sig, record))
            total += record["bytes"]
    return chosen


def _import_root(file: Path, module: str) -> Path:
    """The folder that `module` is imported from (its file's folder for a script)."""
    if module == "__main__":
        return file.parent
    depth = module.count(".") + (1 if file.name == "__init__.py" else 0)
    root = file.parent
    for _ in range(depth):
        root = root.parent
    return root


def latest_trace(root: Path) -> Path | None:
    """The newest trace `redline profile` wrote under `root/.redline/`."""
    folder = root / ".redline"
    traces = [p for p in folder.glob("*") if p.is_file() and p.name.endswith((".speedscope.json", ".txt", ".json"))
              and not is_bookkeeping(p, root)] if folder.is_dir() else []
    return max(traces, key=lambda p: p.stat().st_mtime) if traces else None


# Decorators that make a def something the recorder does not wrap (it records plain functions, methods
# and static methods; a class method's calls carry the class, a property's are attribute reads, and a
# memoised function's calls mostly never reach its code).
_UNRECORDED = ("classmethod", "property", "functools.cached_property", "cached_property", "functools.lru_cache",
               "lru_cache", "functools.cache", "cache")


def _not_recorded(found: Located) -> bool:
    return any(d.split("(")[0].strip() in _UNRECORDED or d.endswith(".setter") for d in found.fn.decorators)


def hot_targets(root: Path, top: int) -> tuple[Path, list[CaptureTarget]]:
    """The `top` hottest functions of the workspace's own code in the latest trace, by what a change to
    each can reach (module_fraction): its own time, the libraries it calls and, outside the program's
    script, the functions it calls that the compilers compile with it (a parser's entry point whose time
    is spread over its helpers). Only functions whose calls the recorder can keep (not class methods,
    properties or memoised functions)."""
    from redline.profilers import ParseError, report

    from ..target import TargetError, locate

    trace = latest_trace(root)
    if trace is None:
        raise CaptureError(f"no trace under {root / '.redline'}: run `redline profile -- CMD` first, or name the "
                           "functions with --target FILE::QUALNAME")
    try:
        spots = report([trace], root).hotspots
    except ParseError as exc:
        raise CaptureError(str(exc))
    out: list[CaptureTarget] = []
    for h in sorted((h for h in spots if h.kind == "cpu" and h.file and not Path(h.file).is_absolute()),
                    key=lambda h: -h.module_fraction):
        if len(out) >= top or h.module_fraction <= 0:
            break
        if h.function.startswith("__") and "." not in h.function:
            continue  # a module's own hook (__getattr__ importing lazily), not code a user optimises
        spec = f"{root / h.file}::{h.function}"
        try:
            found = locate(spec)
            t = _target_of(found, spec)
        except (TargetError, CaptureError):
            continue  # a frame that is not a function of the file (module level, a lambda)
        if _not_recorded(found):
            continue  # the next hottest instead: `--top N` keeps calls of N functions where it can
        if t not in out:
            out.append(t)
    if not out:
        raise CaptureError(f"{trace}: no function of the workspace's own code is hot in it")
    return trace, out
