"""The evaluator of one run: the target probed once in the sandbox, then each candidate through the
stages (stages.py) on fresh workers (workers.py), and the checks of the one offered (offered.py).

Reference and candidate run in separate sandboxed processes, so a candidate can neither read
the reference's results nor slow the reference down; the harness compares their encoded
outputs itself and measures wall and CPU time from outside.
"""

from __future__ import annotations

import ast
import functools
import os
import platform
import shutil
import sys
import textwrap
import time
from dataclasses import replace
from typing import Any

from .config import ConfigError, load_config
from .contention import pool_threads
from .gate import Gate, checked, indistinct
from .inputs.plan import InputPlan, fresh_seeds
from .models import CandidateResult, EvalSettings, Job, KernelProfile
from .offered import Offered
from .proposers.compiled import compiled_by_redline, python_of
from .protocol import Locals, Reproduce, Time
from .sandbox import ExecutionBackend, LocalBackend, WorkerDied, WorkerTimeout, default_python
from .stages import Stages, decided
from .target import Target, TargetError, UnsupportedTarget, check_candidate, raw_memory_use
from .timing import bound_of
from .verdict import Channel, Rejected, error_line
from .workers import Workers


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
    """The interpreter the target's workers run with where it is not redline's: the project's `python`
    in redline.toml, else that of the program the target's calls were captured from, where it still
    exists. So the target imports what the program's environment has (a package installed there only)
    at the program's Python version (cloudpickled code objects are version-specific). The worker needs
    only the standard library (and cloudpickle, lent)."""
    try:
        configured = load_config(target.project_root).python
    except ConfigError as exc:
        raise TargetError(str(exc))
    if configured is not None:
        return configured if configured != sys.executable else None
    manifest = target.inputs.manifest
    exe = manifest.interpreter if manifest is not None else ""
    if not exe or exe == sys.executable or not os.access(exe, os.X_OK):
        return None
    return exe

class Evaluator:
    """Holds what a run's evaluations share (the target, its inputs, the sandbox, the trusted workers'
    compiler caches) and evaluates candidates against a fresh baseline worker each."""

    def __init__(self, target: Target, settings: EvalSettings, backend: ExecutionBackend | None = None,
                 python: str | None = None, probe: bool = True) -> None:
        self.target = target
        self.settings = settings
        self.backend = backend or LocalBackend(settings.isolation)
        self.python = python or program_python(target) or default_python()
        self.inputs: list[str] = []
        self.hardware = ""
        self.bound = ""  # on CUDA: launch-bound, memory-bound or compute-bound (see bound_of)
        self.local_types: dict[str, list[str]] = {}  # on the CPU: what the reference's locals held (_locals)
        self.callee_types: dict[str, dict[str, list[str]]] = {}  # and the module's functions it calls, by name@line
        self.notes: list[str] = []  # what the report should say about how the workers ran
        self.plan = InputPlan(target.inputs)
        self.gate = Gate(settings, self.plan)
        self.workers = Workers(target, settings, self.backend, self.python, self.plan)
        self.stages = Stages(settings, self.plan, self.gate, self.workers.cancelled, measured_on)
        self.offered = Offered(settings, self.workers)
        self._leading = 0.0  # the best speedup verified so far (see evaluate: who gets Nsight Compute)
        self._builds: dict[str, str] = {}  # each verified candidate's build (see Workers.build), by id
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

    @property
    def baseline_times(self) -> list[float]:
        """Every baseline call this evaluator timed."""
        return self.stages.baseline_times

    # ------------------------------------------------------------ the target
    def probe(self) -> None:
        """Load the target once in the sandbox: it must load, its inputs and hardware are described, and
        captured calls are narrowed to those it reproduces. On the CPU the machine's other load is read
        first: every worker of the run gets the same thread pools (contention.py)."""
        if self.settings.device == "cpu":
            self.workers.threads, note = pool_threads()
            self.notes += [note] if note else []
        probe = self.backend.start({**self.workers.spec(None, trusted=True), "describe": True}, self.python,
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
            if self.settings.device == "cpu" and self.settings.trace_locals:
                self.local_types, self.callee_types = self._locals(ch)
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

    def _locals(self, ch: Channel) -> tuple[dict[str, list[str]], dict[str, dict[str, list[str]]]]:
        """The types the reference's local variables held on the calls the gate checks (for a compiler's
        declarations: one that a call contradicts fails that call), and those of the module's functions
        the calls reached; none where the traced calls fail."""
        try:
            reply = ch.ask(Locals(seeds=self.plan.check_keys(self.settings.check_seeds)))
        except Rejected:
            return {}, {}
        return reply.types, reply.callees

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
                              f"({reasons}{detail}): capture again, or define make_inputs(seed)" + self._redacted_note())
        try:
            self.plan.reproduced(kept, excluded)
        except ValueError as exc:
            raise TargetError(str(exc))

    def _redacted_note(self) -> str:
        """Why the captured calls may not reproduce where redaction changed them."""
        manifest = self.target.inputs.manifest
        n = sum(c.redacted for c in manifest.calls) if manifest is not None else 0
        if not n:
            return ""
        return (f"; {n} of the captured calls hold values redacted under secret names (redline.toml's `redact`): "
                "a call that depends on one does not reproduce; where a name such as `token` is not a secret in "
                "this code, set `redact` to the names that are and capture again")

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
        errors = [r.runs[0].error for r in reply.results]
        if not self.plan.captured and errors and all(errors):
            raise TargetError(f"the target raises on every input {self.plan.source.describe()} gives, so it cannot be "
                              f"timed: {error_line(errors[0])}")
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

    # ------------------------------------------------------------ a candidate
    def evaluate(self, cid: str, code: str, origin: str, round_: int = 0, parent: str | None = None,
                 trusted: bool = False, approach: str = "", reference: str | None = None) -> CandidateResult:
        """Build, gate and time `code` against a fresh baseline worker (the target itself, or the
        trusted `reference` code, such as a torch.compile of the target, for a head-to-head)."""
        return self.run(Job(cid, code, origin, round_, parent, trusted, approach, reference))

    def run(self, job: Job) -> CandidateResult:
        compiles = not job.trusted and compiled_by_redline(job.code)
        if compiles and not self.workers.builds_apart():
            # Its decorators build, starting processes, which an untrusted candidate's workers may not, and
            # no sandbox here ends every process a build worker starts: its Python is judged instead.
            job = replace(job, code=python_of(job.code), approach=(job.approach + "; " if job.approach else "")
                          + "judged as Python: redline's compile decorators taken out (an untrusted candidate "
                          "is compiled only in bubblewrap's sandbox)")
            compiles = False
        problem = check_candidate(job.code, self.target)
        if problem:
            return decided(job, "build_error", problem, "checks")
        raw = None if job.trusted else raw_memory_use(job.code)
        if raw:
            return decided(job, "rejected_exploit", raw, "checks")
        if self.workers.cancelled.is_set():
            return decided(job, "cancelled", "cancelled before it ran", None)
        baseline = job.reference if job.reference is not None else self._reference_code
        started = time.perf_counter()
        build = None if job.trusted else self.workers.build(job.code)
        try:
            failed = self.workers.prebuild(job.code, build) if compiles and build is not None else None
            if failed:
                result = decided(job, "build_error", f"its compiled code does not build: {failed}", "load",
                                 eval_s=time.perf_counter() - started)
            else:
                result = self.stages.run(
                    job, lambda first_seen=False: self.workers.pair(
                        job.code, job.trusted, baseline,
                        (self.workers.extensions(build) if compiles and build else None) if first_seen else build),
                    same_code=job.reference is None and same_code(job.code, baseline), started=started)
        finally:
            for w in self.workers.untrack():
                w.close()
        # Nsight Compute on the leading candidates only: each verified one at least as fast as every one
        # before it against the target. The verdict stands without the profile where a cancel stops it.
        if result.status == "ok" and self.settings.profiles_kernels and self.settings.profile_leaders and \
                job.reference is None and (result.speedup or 0.0) >= self._leading:
            self._leading = result.speedup or 0.0
            profile = self.profile_kernels(job.code, job.trusted, build)
            result = result.model_copy(update=dict(kernel_profile=profile, eval_s=time.perf_counter() - started))
        if build is not None and result.status == "ok":
            self._builds[job.id] = build  # for compute-sanitizer and Nsight Compute, should it be offered
        elif build is not None:
            shutil.rmtree(build, ignore_errors=True)  # never offered: nothing will load it again
        return result

    # ------------------------------------------------------------ the candidate offered
    def check_memory(self, result: CandidateResult) -> tuple[str | None, str | None]:
        """compute-sanitizer on a verified candidate about to be offered (search.py runs it on the winner,
        after the search and outside its time limit): what ran, and the reason to reject it, if any.
        (None, None) where it does not apply: not on CUDA, or turned off."""
        if not self.settings.checks_memory:
            return None, None
        self.workers.cancelled.clear()  # a search stopped by its time limit has cancelled the evaluator
        ran, unsafe = self.offered.sanitize(result.code, result.trusted, self._builds.get(result.id))
        return ran, unsafe.reason if unsafe is not None else None

    def profile_offered(self, result: CandidateResult) -> KernelProfile | None:
        """Nsight Compute on the verified candidate about to be offered (search.py, after the search, where
        no proposer read the leading candidates' profiles during it); None where it does not apply."""
        if not self.settings.profiles_kernels:
            return None
        self.workers.cancelled.clear()  # as in check_memory
        return self.profile_kernels(result.code, result.trusted, self._builds.get(result.id))

    def profile_kernels(self, code: str | None, trusted: bool, build: str | None = None) -> KernelProfile | None:
        """Nsight Compute on `code`'s kernels (offered.py); None where ncu is missing or fails."""
        return self.offered.profile_kernels(code, trusted, build)

    def cancel(self) -> None:
        """Stop at once: kill the workers of the candidate being evaluated (safe from any thread)."""
        self.workers.cancel()

    def close(self) -> None:
        """Remove the trusted workers' compiler cache; no worker outlives a call to evaluate()."""
        self.workers.close()


def measured_on(gpu: dict[str, Any] | None) -> str:
    """What a timing was measured on: the GPU it names, or this host's CPU model."""
    return str((gpu or {}).get("name") or cpu_model())
