"""One candidate through the stages: load, first-seen timing (captured inputs), correctness gate,
interleaved timing, verdict.

Reference and candidate run in separate sandboxed processes, so a candidate can neither read
the reference's results nor slow the reference down; the harness compares their encoded
outputs itself and measures wall and CPU time from outside.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import os
import platform
import shutil
import socket
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from .contention import pool_threads
from .gate import Gate, checked, indistinct
from .inputs.plan import InputPlan, fresh_seeds
from .kernel_profile import ncu_path, ncu_prefix, read_report, summarise
from .models import CandidateResult, EvalSettings, KernelProfile
from .protocol import Profile, Reproduce, Time
from .sandbox import ExecutionBackend, LocalBackend, Worker, WorkerDied, WorkerTimeout, default_python
from .sanitizer import prefix as sanitizer_prefix
from .sanitizer import read_log, sanitizer_path, tools_for
from .target import Target, TargetError, UnsupportedTarget, check_candidate, imports_of, raw_memory_use
from .timing import (
    FirstSeen,
    Timing,
    Verdict,
    bound_of,
    lower_of_pairs,
    remembered,
    with_first_seen,
    worth_a_second_look,
)
from .verdict import Channel, Rejected, died_hint, error_line

HOST = socket.gethostname()


@functools.cache
def cpu_model() -> str:
    """This host's CPU model (what a CPU timing was measured on)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine() or "unknown CPU"


def same_code(code: str, reference: str | None) -> bool:
    """Whether `code` is the reference's code up to formatting, comments and docstrings (the same syntax
    tree)."""
    if reference is None:
        return False
    try:
        a, b = ast.parse(code), ast.parse(reference)
    except SyntaxError:
        return False
    for tree in (a, b):
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) and body and \
                    isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and \
                    isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.dump(a) == ast.dump(b)



def program_python(target: Target) -> str | None:
    """The interpreter of the program the target's calls were captured from, where it is not redline's
    and still exists: the workers run with it, so the target imports what the program's environment
    has (a package installed there only) at the program's Python version (cloudpickled code objects
    are version-specific). The worker needs only the standard library (and cloudpickle, lent)."""
    manifest = target.inputs.manifest
    exe = manifest.interpreter if manifest is not None else ""
    if not exe or exe == sys.executable or not os.access(exe, os.X_OK):
        return None
    return exe

class Pair(Protocol):
    """Starts a fresh candidate worker and a fresh baseline worker; `first_seen`: the candidate's on a
    build of its own (see Evaluator._build)."""

    def __call__(self, first_seen: bool = False) -> tuple[Channel, Channel]: ...


class Evaluator:
    """Holds what a run's evaluations share (the target, its inputs, the sandbox, the trusted workers'
    compiler caches) and evaluates candidates against a fresh baseline worker each."""

    def __init__(self, target: Target, settings: EvalSettings, backend: ExecutionBackend | None = None,
                 python: str | None = None, probe: bool = True) -> None:
        self.target = target
        self.settings = settings
        self.backend = backend or LocalBackend(settings.isolation)
        self.python = python or program_python(target) or default_python()
        self._lent: list[str] = []  # folders appended to a foreign interpreter's path (see _lend)
        self.baseline_times: list[float] = []  # every baseline call timed by this evaluator
        self.inputs: list[str] = []
        self.hardware = ""
        self.bound = ""  # on CUDA: launch-bound, memory-bound or compute-bound (see bound_of)
        self.notes: list[str] = []  # what the report should say about how the workers ran
        self.threads: int | None = None  # the workers' OMP_NUM_THREADS on a busy machine (set by probe)
        self.plan = InputPlan(target.inputs)
        self.gate = Gate(settings, self.plan)
        self._active: list[Worker] = []
        self._lock = threading.Lock()  # _active and _cancelled change together (see _track)
        self._cancelled = threading.Event()
        self._cache: str | None = None  # the trusted workers' compiler cache (see LocalBackend.start)
        self._leading = 0.0  # the best speedup verified so far (see evaluate: who gets Nsight Compute)
        self._builds: dict[str, str] = {}  # each verified candidate's build (see _build), by id
        # The reference as a candidate: each comparison's baseline worker is built exactly like the
        # candidate's (fresh process, code executed the same way, its globals a fresh copy of the
        # module's), so an identical copy measures 1: with the class's own method, a global lookup in the
        # module's older, larger dict made an identical copy of a small method 1.09x "faster". Methods are
        # compiled as if in their class's body (subject.py::in_class); a decorated method (a static or
        # class method, a property) keeps the class's own definition.
        self._reference_code = textwrap.dedent(target.function_source) \
            if "." not in target.qualname or not target.fn.decorators else None
        if probe:
            self.probe()

    @property
    def isolation(self) -> str:
        return self.backend.isolation

    # ------------------------------------------------------------ the target
    def probe(self) -> None:
        """Load the target once in the sandbox: it must load, its inputs and hardware are described, and
        captured calls are narrowed to those it reproduces. On the CPU the machine's other load is read
        first: every worker of the run gets the same thread pools (contention.py)."""
        if self.settings.device == "cpu":
            self.threads, note = pool_threads()
            self.notes += [note] if note else []
        probe = self.backend.start({**self._spec(None, trusted=True), "describe": True}, self.python,
                                   self.settings.limits)
        ch = Channel(probe, "the reference", self.settings.limits.wall_s)
        try:
            try:
                load = ch.load()
            except (WorkerDied, WorkerTimeout, Rejected) as exc:
                tail = getattr(exc, "stderr_tail", "").strip().splitlines()[-1:]
                raise TargetError(f"the target cannot be loaded in the sandbox: {exc}"
                                  + (f" ({tail[0]})" if tail else ""))
            if not load.ok:
                raise TargetError(f"the target cannot be loaded: {error_line(load.error)}")
            self.inputs, self.hardware = load.inputs, load.hardware
            if self.plan.captured:
                self._reproduce(ch)
            self._self_check(ch)
            if load.gpu is not None:
                self.bound = self._bound(ch, load.gpu)
        finally:
            probe.close()

    def _bound(self, ch: Channel, gpu: dict[str, Any]) -> str:
        """What limits the reference on the device (see bound_of), from a few timed calls; '' if they fail."""
        try:
            for _ in range(2):  # the first batch warms up
                reply = ch.ask(Time(seeds=self.plan.timing_keys(3)))
        except Rejected:
            return ""
        state = reply.gpu or {}
        return bound_of(state.get("gpu_time_s"), state.get("issue_s"), reply.bytes_moved, gpu.get("copy_bandwidth_Bps"))

    def _reproduce(self, ch: Channel) -> None:
        """Keep the captured calls whose recorded outcome the reference reproduces in the sandbox; the
        others (hidden state, randomness, time, a changed file) are excluded and counted."""
        try:
            reply = ch.ask(Reproduce(seeds=self.plan.keys))
        except Rejected as rej:
            raise TargetError(f"the target cannot be run on its captured calls: {rej.reason}")
        kept: list[int] = []
        excluded: dict[str, int] = {}
        lossy = indistinct(reply.reproduced)
        if lossy:
            raise UnsupportedTarget(lossy)
        for entry in reply.reproduced:
            try:
                why, first = self.gate.not_reproduced(entry)
            except Rejected as rej:  # unsupported: what the target returns cannot be compared
                raise UnsupportedTarget(rej.reason)
            if why:
                excluded[why] = excluded.get(why, 0) + 1
                self.plan.excluded_calls[entry.index] = first
            else:
                kept.append(entry.index)
        if not kept:
            reasons = "; ".join(f"{n} {why}" for why, n in excluded.items())
            one = next(iter(self.plan.excluded_calls.items()), None)
            detail = f"; call {one[0]}: {one[1]}" if one else ""
            raise TargetError(f"the target reproduces none of its {len(reply.reproduced)} captured calls "
                              f"({reasons}{detail}): capture again, or define make_inputs(seed)")
        try:
            self.plan.reproduced(kept, excluded)
        except ValueError as exc:
            raise TargetError(str(exc))

    def _self_check(self, ch: Channel) -> None:
        """Never verify blind: the reference against itself, twice on each input (every kept captured
        call, or fresh seeds), must compare equal, outputs and inputs after the call, before any
        candidate is judged, so that an identical copy can only be `not_faster`. A value that cannot be
        compared stops the run as `unsupported`; a captured call on which the reference differs from
        itself is excluded, with the first difference; fresh inputs on which it does stop the run."""
        seeds = self.plan.check_keys(self.settings.check_seeds)
        try:
            reply = checked(ch, seeds, repeat=2, sample=fresh_seeds(1)[0])
        except Rejected as rej:
            raise TargetError(f"the target cannot be run on its inputs: {rej.reason}")
        differs: dict[int, str] = {}
        for result in reply.results:
            try:
                self.gate.agree(result.runs[0], result.runs[1])
            except Rejected as rej:
                if rej.status == "unsupported":
                    raise UnsupportedTarget(rej.reason)
                differs[result.seed] = rej.reason
        if not differs:
            return
        first = next(iter(differs.values()))
        if not self.plan.captured:
            raise UnsupportedTarget(f"the target gives different results on the same input, so no candidate can "
                                    f"be checked against it: {first}")
        excluded = dict(self.plan.excluded)
        key = "differs from itself on the same call (hidden state, randomness or time)"
        excluded[key] = excluded.get(key, 0) + len(differs)
        self.plan.excluded_calls.update(differs)
        kept = [k for k in self.plan.keys if k not in differs]
        if not kept:
            raise UnsupportedTarget(f"the target differs from itself on every captured call ({first})")
        try:
            self.plan.reproduced(kept, excluded)
        except ValueError as exc:
            raise TargetError(str(exc))

    # ------------------------------------------------------------ the workers
    def _spec(self, candidate: str | None, trusted: bool, build: str | None = None) -> dict[str, Any]:
        """What a worker runs. Its compiler caches: the trusted code's shared one (_compile_cache), the
        candidate's `build` (the one evaluation's, see evaluate), or else the worker's own scratch."""
        t = self.target
        cache = self._compile_cache(candidate) if trusted else build
        # The file's own folder only for a module outside a package (a script and its siblings): inside a
        # package it would shadow the standard library with the package's own html.py or types.py.
        own = [] if (t.file.parent / "__init__.py").exists() else [str(t.file.parent)]
        module, sys_path = t.module_name, [str(t.project_root), *own]
        manifest = t.inputs.manifest
        if manifest is not None and manifest.module != "__main__":
            # The module under the name the captured program knew it by: its pickled objects refer to it.
            module, sys_path = manifest.module, [manifest.import_root, *sys_path]
        return {"file": str(t.file), "qualname": t.qualname, "module": module, "sys_path": sys_path,
                "fallback_path": self._lend(), "visible": [str(Path(self.python).parent.parent), *self._lend()],
                "inputs": self.plan.worker_spec(), "device": self.settings.device,
                "candidate": candidate, "allow_processes": trusted, "env": self._env(candidate),
                "preimport": imports_of(candidate) if candidate else [],
                **({"compile_cache": cache} if cache else {})}

    def _lend(self) -> list[str]:
        """For the program's own interpreter (program_python): a folder with redline's cloudpickle, which
        captured calls may need to unpickle, at the end of its path (the program's own copy comes first)."""
        if self.python == sys.executable or self._lent:
            return self._lent
        import cloudpickle

        lib = os.path.join(self._cache_dir("lent"), "lib")
        if not os.path.isdir(os.path.join(lib, "cloudpickle")):
            shutil.copytree(os.path.dirname(cloudpickle.__file__), os.path.join(lib, "cloudpickle"),
                            ignore=shutil.ignore_patterns("__pycache__"))
        self._lent = [lib]
        return self._lent

    def _compile_cache(self, candidate: str | None) -> str:
        """The compiler cache of one trusted code (the target's, or one built-in variant's): shared by
        the workers that run that same code (its timing, its Nsight Compute run, the head-to-head),
        never between variants: a variant's tuned artefacts must not reach the head-to-head's plain
        torch.compile. Code in inductor's multi-kernel mode gets a fresh cache for every worker:
        compiling it again from a warm cache makes inductor raise (the trust model's Sandbox)."""
        key = hashlib.sha256(candidate.encode()).hexdigest()[:16] if candidate is not None else "target"
        if candidate is not None and "multi_kernel" in candidate:
            key += "-" + uuid.uuid4().hex[:8]
        return self._cache_dir(key)

    def _build(self, code: str) -> str | None:
        """A candidate's build: the compiler caches (inductor, Triton with its autotuning choices,
        torch's inline extensions) that the workers of one evaluation of it share, at one path, so a
        kernel compiled and tuned in its first worker is loaded, not built again, by its second pair,
        compute-sanitizer's and Nsight Compute's workers. Never shared between candidates or with the
        reference, nor with a pair that times calls as first seen (see _first_seen_of); none for
        inductor's multi-kernel mode (see _compile_cache)."""
        return None if "multi_kernel" in code else self._cache_dir("build-" + uuid.uuid4().hex[:12])

    def _cache_dir(self, name: str) -> str:
        if self._cache is None:
            self._cache = tempfile.mkdtemp(prefix="redline-compile-")
        path = os.path.join(self._cache, name)
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    def _env(self, candidate: str | None) -> dict[str, str]:
        """Triton kernels on the CPU run in Triton's interpreter (set before triton is imported); thread
        pools sized to the free cores on a busy machine."""
        env = {"OMP_NUM_THREADS": str(self.threads)} if self.threads else {}
        # A Cython candidate that cannot build raises in the sandbox instead of running as plain Python.
        env["REDLINE_CYTHON_STRICT"] = "1"
        if self.settings.device == "cpu" and ("triton" in self.target.source or "triton" in (candidate or "")):
            env["TRITON_INTERPRET"] = "1"
        return env

    def _start(self, candidate: str | None, trusted: bool, who: str, build: str | None = None) -> Channel:
        worker = self._track(self.backend.start(self._spec(candidate, trusted, build), self.python,
                                                self.settings.limits))
        return Channel(worker, who, self.settings.limits.wall_s)

    def _track(self, worker: Worker) -> Worker:
        """Register a started worker for cancel(). cancel() and this meet under one lock, so a worker
        started while a cancel runs is either among those it kills or killed here: none escapes a
        cancel, however the two threads interleave."""
        with self._lock:
            self._active.append(worker)
            cancelled = self._cancelled.is_set()
        if cancelled:
            worker.kill()
        return worker

    def _untrack(self) -> list[Worker]:
        with self._lock:
            done, self._active = self._active, []
        return done

    def close(self) -> None:
        """Remove the trusted workers' compiler cache; no worker outlives a call to evaluate()."""
        if self._cache is not None:
            shutil.rmtree(self._cache, ignore_errors=True)
            self._cache = None

    def cancel(self) -> None:
        """Stop at once: kill the workers of the candidate being evaluated (safe from any thread)."""
        with self._lock:
            self._cancelled.set()
            active = list(self._active)
        for w in active:
            w.kill()

    # ------------------------------------------------------------ a candidate
    def evaluate(self, cid: str, code: str, origin: str, round_: int = 0, parent: str | None = None,
                 trusted: bool = False, approach: str = "", reference: str | None = None) -> CandidateResult:
        """Build, gate and time `code` against a fresh baseline worker (the target itself, or the
        trusted `reference` code, such as a torch.compile of the target, for a head-to-head)."""
        base: dict[str, Any] = dict(id=cid, origin=origin, round=round_, parent=parent, code=code, approach=approach)
        problem = check_candidate(code, self.target)
        if problem:
            return CandidateResult(status="build_error", reason=problem, **base)
        raw = None if trusted else raw_memory_use(code)
        if raw:
            return CandidateResult(status="rejected_exploit", reason=raw, **base)
        if self._cancelled.is_set():
            return CandidateResult(status="infra_error", reason="cancelled before it ran", **base)
        baseline = reference if reference is not None else self._reference_code
        started = time.perf_counter()
        build = None if trusted else self._build(code)
        try:
            result = self._stages(lambda first_seen=False: self._pair(code, trusted, baseline, None if first_seen else build),
                                  base, trusted)
            result.eval_s = time.perf_counter() - started
            result.host = HOST
            if result.status == "ok" and reference is None and same_code(code, baseline):
                # The same code cannot be faster: for a function of a few microseconds, per-process
                # differences drew 1.13x for an identical copy in both pairs of workers, once in four.
                result.status = "not_faster"
                result.reason = f"the same code as the target (up to formatting): {result.reason} is noise"
            if result.median_s is not None:
                result.hardware = str((result.gpu or {}).get("name") or cpu_model())
            if self._cancelled.is_set():
                return CandidateResult(status="infra_error", reason="cancelled while it ran", **base)
        finally:
            for w in self._untrack():
                w.close()
        # Nsight Compute on the leading candidates only: each verified one at least as fast as every one
        # before it against the target. The verdict stands without the profile where a cancel stops it.
        if result.status == "ok" and self.settings.profiles_kernels and self.settings.profile_leaders and \
                reference is None and (result.speedup or 0.0) >= self._leading:
            self._leading = result.speedup or 0.0
            result.kernel_profile = self.profile_kernels(code, trusted, build)
            result.eval_s = time.perf_counter() - started
        if build is not None and result.status == "ok":
            self._builds[cid] = build  # for compute-sanitizer and Nsight Compute, should it be offered
        elif build is not None:
            shutil.rmtree(build, ignore_errors=True)  # never offered: nothing will load it again
        return result

    def _pair(self, code: str, trusted: bool, baseline: str | None, build: str | None) -> tuple[Channel, Channel]:
        """A fresh candidate worker (on the candidate's `build`, where given) and a fresh baseline worker."""
        return self._start(code, trusted, "the candidate", build), self._start(baseline, True, "the reference")

    def _stages(self, pair: Pair, base: dict[str, Any],
                trusted: bool) -> CandidateResult:
        """The candidate's verdict, stage by stage; the first stage that rejects it decides. A winner by
        less than `confirm_below` is timed again in a second pair of fresh workers (below)."""
        cand, ref = pair()
        timings = [Timing(self.settings, self.plan, self.gate, trusted)]
        cands = [cand]
        try:
            gpu_info = self._load(cand, ref)
            first = self._first_seen(timings[0], cand, ref) if self.plan.captured else None
            checked = self.gate.check(cand, ref)
            if checked.device_fault:  # neither worker's CUDA context survives it: time in a fresh pair
                cand, ref = pair()
                cands.append(cand)
                self._load(cand, ref)
            verdict = timings[0].measure(cand, ref, gpu_info)
            if first is not None:
                verdict = with_first_seen(verdict, self._first_seen_of(timings[0], verdict, first, pair, cands),
                                          self.settings)
            if verdict.status == "ok" and verdict.fields["speedup"] < self.settings.confirm_below:
                # Two processes running the same code can differ by several percent for their whole
                # lives (where their memory lies, what ran in them before), which no number of rounds
                # within the pair averages out: a small win must hold in a second pair too.
                cand, ref = pair()
                cands.append(cand)
                timings.append(Timing(self.settings, self.plan, self.gate, trusted))
                self._load(cand, ref)
                verdict = lower_of_pairs(verdict, timings[1].measure(cand, ref, gpu_info), self.settings)
        except Rejected as rej:
            return CandidateResult(status=rej.status, reason=rej.reason, error_tail=rej.tail[-3000:],
                                   correct_only_at=rej.correct_at, cpu_s=sum(c.cpu_seconds() for c in cands), **base)
        finally:
            for timing in timings:
                self.baseline_times.extend(timing.baseline_times)
        return CandidateResult(status=verdict.status, reason=verdict.reason, shapes_checked=checked.shapes,
                               cpu_s=sum(c.cpu_seconds() for c in cands), **verdict.fields, **base)

    def _load(self, cand: Channel, ref: Channel) -> dict[str, Any] | None:
        """Both workers loaded: the reference's GPU description (None on the CPU). A candidate that does not
        load (hangs, crashes, raises, or trips the audit hook at import) is rejected here."""
        try:
            load = cand.load()
        except WorkerTimeout:
            raise Rejected("timeout", "hangs at import (killed at the deadline)")
        except WorkerDied as exc:
            raise Rejected("crashed", f"the candidate {exc} while loading" + died_hint(exc.returncode),
                           exc.stderr_tail)
        if load.violations:
            raise Rejected("rejected_exploit", "at import: " + "; ".join(load.violations))
        if not load.ok:
            raise Rejected("build_error", f"does not load: {error_line(load.error)}", load.error.tb if load.error else "")
        if load.tamper:
            raise Rejected("rejected_exploit", "at import: " + "; ".join(load.tamper))
        ref_load = ref.load()
        if not ref_load.ok:
            raise Rejected("infra_error", "the reference stopped loading: " + error_line(ref_load.error))
        return ref_load.gpu

    def _first_seen_of(self, timing: Timing, seen: Verdict, first: FirstSeen,
                       pair: Pair, cands: list[Channel]) -> FirstSeen:
        """The first-seen timing to judge by. One that would lower the verdict (FirstSeen.lowers) is taken
        again in a fresh pair of workers, since single calls on a busy machine can be slow by chance,
        and the higher of the two counts; the candidate `remembers` results only where both say so (see
        worth_a_second_look: only a win on repeated calls is judged so)."""
        if not worth_a_second_look(seen, first):
            return first
        cand, ref = pair(True)  # on a build of its own: nothing the first pair's calls left in one
        cands.append(cand)
        self._load(cand, ref)
        again = self._first_seen(timing, cand, ref)
        if first.remembers(seen) and again.remembers(seen):
            raise remembered(seen, [first, again])
        return max(first, again, key=lambda f: f.speedup[0])

    def _first_seen(self, timing: Timing, cand: Channel, ref: Channel) -> FirstSeen:
        try:
            return timing.first_seen(cand, ref)
        except Rejected as rej:
            if rej.status == "crashed":  # the gate says precisely where the candidate goes wrong
                self.gate.check(cand, ref)
            raise

    def check_memory(self, result: CandidateResult) -> tuple[str | None, str | None]:
        """compute-sanitizer on a verified candidate about to be offered (search.py runs it on the winner,
        after the search and outside its time limit): what ran, and the reason to reject it, if any.
        (None, None) where it does not apply: not on CUDA, or turned off."""
        if not self.settings.checks_memory:
            return None, None
        self._cancelled.clear()  # a search stopped by its time limit has cancelled the evaluator
        ran, unsafe = self.sanitize(result.code, result.origin.startswith("builtin:"), self._builds.get(result.id))
        return ran, unsafe.reason if unsafe is not None else None

    def profile_offered(self, result: CandidateResult) -> KernelProfile | None:
        """Nsight Compute on the verified candidate about to be offered (search.py, after the search, where
        no proposer read the leading candidates' profiles during it); None where it does not apply."""
        if not self.settings.profiles_kernels:
            return None
        self._cancelled.clear()  # as in check_memory
        return self.profile_kernels(result.code, result.origin.startswith("builtin:"), self._builds.get(result.id))

    def sanitize(self, code: str, trusted: bool, build: str | None = None) -> tuple[str, Rejected | None]:
        """compute-sanitizer's tools (sanitizer.py) on `code` in sandboxed workers, one fresh input each:
        what ran (or why nothing did), and the rejection a reported error means."""
        tool_path = sanitizer_path()
        if tool_path is None:
            return "not run: compute-sanitizer is not installed here", None
        passed = []
        for tool in tools_for(code):
            # Each tensor its own allocation: a write past a tensor inside one of the caching allocator's
            # blocks is invisible to the tool.
            with self._under(code, trusted, sanitizer_prefix(tool_path, tool), {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
                             build) \
                    as worker:
                try:
                    self._profiled(worker, f"the candidate under compute-sanitizer {tool}", 1)
                    finding = read_log(worker.scratch, tool)
                except (Rejected, WorkerDied, WorkerTimeout) as exc:
                    finding = read_log(worker.scratch, tool)  # a tool may stop the process at the first error
                    if finding is None or not finding.errors:
                        return f"not run: {tool} stopped ({exc})", None
            if finding is None:
                return f"not run: {tool} reported no summary", None
            if finding.errors:
                return f"{tool}: {finding.errors} error(s)", Rejected(
                    "incorrect", f"compute-sanitizer {tool} reports {finding.errors} error(s): {finding.first}")
            passed.append(tool)
        return f"{', '.join(passed)}: no errors", None

    def profile_kernels(self, code: str | None, trusted: bool, build: str | None = None) -> KernelProfile | None:
        """Nsight Compute on `code`'s kernels in a sandboxed worker; None where ncu is missing or fails."""
        ncu = ncu_path()
        if ncu is None or self._cancelled.is_set():
            return None
        with self._under(code, trusted, ncu_prefix(ncu), build=build) as worker:
            try:
                if not self._profiled(worker, "the candidate under ncu", 2):
                    return None
            except (Rejected, WorkerDied, WorkerTimeout):
                return None
            profile = read_report(worker.scratch)
            return summarise(profile) if profile is not None else None

    @contextlib.contextmanager
    def _under(self, code: str | None, trusted: bool, prefix: tuple[str, ...],
               env: dict[str, str] | None = None, build: str | None = None) -> Iterator[Worker]:
        """A sandboxed worker of `code` run under a tool (`prefix`: compute-sanitizer, ncu), closed after."""
        spec = self._spec(code, trusted, build)
        spec["env"] = {**spec["env"], **(env or {})}
        worker = self._track(self.backend.start(spec, self.python, self.settings.limits, prefix=prefix))
        try:
            yield worker
        finally:
            self._untrack()
            worker.close()

    def _profiled(self, worker: Worker, who: str, calls: int) -> bool:
        """`calls` calls on fresh inputs in a worker under a tool, then its exit (when the tool writes its
        report); False where the code did not load or the tool did not finish."""
        ch = Channel(worker, who, self.settings.limits.wall_s * 4)
        if not ch.load().ok:
            return False
        ch.ask(Profile(seeds=fresh_seeds(calls)))
        return worker.finish(timeout=self.settings.limits.wall_s * 4) is not None
