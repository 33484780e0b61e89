"""One candidate through the stages: build, correctness gate, interleaved timing.

Reference and candidate run in separate sandboxed processes, so a candidate can neither read
the reference's results nor slow the reference down; the harness compares their encoded
outputs itself and measures wall and CPU time from outside.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import random
import shutil
import socket
import tempfile
import textwrap
import threading
import time
import uuid
from typing import Any

from pydantic import ValidationError

from .compare import Mismatch, compare, has_half
from .inputs.plan import InputPlan, fresh_seeds
from .kernel_profile import ncu_path, ncu_prefix, read_report, summarise
from .models import CandidateResult, EvalSettings, KernelProfile, Status
from .protocol import Encoded, ErrorInfo, Reply, Reproduced
from .sandbox import ExecutionBackend, LocalBackend, Worker, WorkerDied, WorkerTimeout, default_python
from .stats import median, median_ci, speedup_ci, total_ratio_ci
from .target import Target, TargetError, check_candidate, imports_of, raw_memory_use

_rng = random.SystemRandom()
HOST = socket.gethostname()
ENERGY_S = 0.3  # seconds of back-to-back calls over which each side's energy per call is read
BATCH_BYTES = 2 << 30  # most bytes of inputs (and one output) prepared for one timed batch


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


class Rejected(Exception):
    def __init__(self, status: Status, reason: str, tail: str = "") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.tail = tail


def _error_line(err: ErrorInfo | None) -> str:
    return f"{err.type}: {err.message}".strip() if err else "unknown error"


def _validated(raw: dict[str, Any], who: str) -> Reply:
    try:
        return Reply.model_validate(raw)
    except ValidationError as exc:
        raise Rejected("crashed", f"{who} sent a malformed reply ({exc.errors()[0]['msg']} at "
                       f"{'.'.join(str(x) for x in exc.errors()[0]['loc'])})")


class Evaluator:
    """Holds the baseline worker for a run and evaluates candidates against it."""

    def __init__(self, target: Target, settings: EvalSettings, backend: ExecutionBackend | None = None,
                 python: str | None = None, probe: bool = True) -> None:
        self.target = target
        self.settings = settings
        self.backend = backend or LocalBackend(settings.isolation)
        self.python = python or default_python()
        self.baseline_times: list[float] = []  # every baseline call timed by this evaluator
        self.inputs: list[str] = []
        self.hardware = ""
        self.plan = InputPlan(target.inputs)
        self._active: list[Worker] = []
        self._trusted = False
        self._cancelled = threading.Event()
        self._cache: str | None = None  # the trusted workers' compiler cache (see LocalBackend.start)
        self._leading = 0.0  # the best speedup verified so far (see evaluate: who gets Nsight Compute)
        # The reference as a candidate: each comparison's baseline worker is built exactly like the
        # candidate's (fresh process, code executed the same way), so an identical copy measures 1.
        # Methods keep the class's own definition (super() and name mangling need the class body).
        self._reference_code = textwrap.dedent(target.function_source) if "." not in target.qualname else None
        if probe:
            self.probe()

    def probe(self) -> None:
        """Load the target once in the sandbox: it must load, and its inputs and hardware are described."""
        probe = self.backend.start({**self._spec(None, trusted=True), "describe": True}, self.python,
                                   self.settings.limits)
        try:
            try:
                load = _validated(probe.read_reply(self.settings.limits.wall_s), "the reference")
            except (WorkerDied, WorkerTimeout, Rejected) as exc:
                tail = getattr(exc, "stderr_tail", "").strip().splitlines()[-1:]
                raise TargetError(f"the target cannot be loaded in the sandbox: {exc}"
                                  + (f" ({tail[0]})" if tail else ""))
            if not load.ok:
                raise TargetError(f"the target cannot be loaded: {_error_line(load.error)}")
            self.inputs, self.hardware = load.inputs, load.hardware
            if self.plan.captured:
                self._reproduce(probe)
        finally:
            probe.close()

    def _reproduce(self, probe: Worker) -> None:
        """Keep the captured calls whose recorded outcome the reference reproduces in the sandbox; the
        others (hidden state, randomness, time, a changed file) are excluded and counted."""
        try:
            reply = self._ask(probe, {"op": "reproduce", "seeds": self.plan.keys}, "the reference")
        except Rejected as rej:
            raise TargetError(f"the target cannot be run on its captured calls: {rej.reason}")
        kept: list[int] = []
        excluded: dict[str, int] = {}
        for entry in reply.reproduced:
            why = self._not_reproduced(entry)
            if why:
                excluded[why] = excluded.get(why, 0) + 1
            else:
                kept.append(entry.index)
        if not kept:
            reasons = "; ".join(f"{n} {why}" for why, n in excluded.items())
            raise TargetError(f"the target reproduces none of its {len(reply.reproduced)} captured calls "
                              f"({reasons}): capture again, or define make_inputs(seed)")
        try:
            self.plan.reproduced(kept, excluded)
        except ValueError as exc:
            raise TargetError(str(exc))

    def _not_reproduced(self, entry: Reproduced) -> str:
        """Why the reference's outcome on a captured call differs from the recorded one ('' if it does not)."""
        if entry.raises:
            if entry.error is None:
                return f"returns where the recorded call raised {entry.raises}"
            return "" if entry.error.type == entry.raises else \
                f"raises {entry.error.type} where the recorded call raised {entry.raises}"
        if entry.error is not None:
            return f"raises {entry.error.type} where the recorded call returned"
        if entry.recorded is None:
            return "" if entry.recorded_type in ("", entry.actual_type) else \
                f"returns {entry.actual_type} where the recorded call returned {entry.recorded_type}"
        try:
            self._same(entry.recorded, entry.actual, "result", "")
        except Rejected:
            return "returns another result than the recorded call (hidden state, randomness or time)"
        return ""

    @property
    def isolation(self) -> str:
        return self.backend.isolation

    def _spec(self, candidate: str | None, trusted: bool) -> dict[str, Any]:
        t = self.target
        module, sys_path = t.module_name, [str(t.project_root), str(t.file.parent)]
        manifest = t.inputs.manifest
        if manifest is not None and manifest.module != "__main__":
            # The module under the name the captured program knew it by: its pickled objects refer to it.
            module, sys_path = manifest.module, [manifest.import_root, *sys_path]
        return {"file": str(t.file), "qualname": t.qualname, "module": module, "sys_path": sys_path,
                "inputs": self.plan.worker_spec(), "device": self.settings.device,
                "candidate": candidate, "allow_processes": trusted, "env": self._env(candidate),
                "preimport": imports_of(candidate) if candidate else [],
                **({"compile_cache": self._compile_cache(candidate)} if trusted else {})}

    def _compile_cache(self, candidate: str | None) -> str:
        """The compiler cache of one trusted code (the target's, or one built-in variant's): shared by
        the workers that run that same code (its timing, its Nsight Compute run, the head-to-head),
        never between variants: a variant's tuned artefacts must not reach the head-to-head's plain
        torch.compile. Code in inductor's multi-kernel mode gets a fresh cache for every worker:
        compiling it again from a warm cache makes inductor raise (the trust model's Sandbox)."""
        if self._cache is None:
            self._cache = tempfile.mkdtemp(prefix="redline-compile-")
        key = hashlib.sha256(candidate.encode()).hexdigest()[:16] if candidate is not None else "target"
        if candidate is not None and "multi_kernel" in candidate:
            key += "-" + uuid.uuid4().hex[:8]
        path = os.path.join(self._cache, key)
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    def _env(self, candidate: str | None) -> dict[str, str]:
        """Triton kernels on the CPU run in Triton's interpreter (set before triton is imported)."""
        if self.settings.device == "cpu" and ("triton" in self.target.source or "triton" in (candidate or "")):
            return {"TRITON_INTERPRET": "1"}
        return {}

    def _start(self, candidate: str | None, trusted: bool) -> Worker:
        return self.backend.start(self._spec(candidate, trusted), self.python, self.settings.limits)

    def close(self) -> None:
        """Remove the trusted workers' compiler cache; no worker outlives a call to evaluate()."""
        if self._cache is not None:
            shutil.rmtree(self._cache, ignore_errors=True)
            self._cache = None

    def _ask(self, worker: Worker, req: dict[str, Any], who: str) -> Reply:
        try:
            reply = _validated(worker.request(req, self.settings.limits.wall_s), who)
        except WorkerTimeout:
            raise Rejected("timeout", f"{who} did not finish within {self.settings.limits.wall_s:g}s (killed)")
        except WorkerDied as exc:
            raise Rejected("crashed", f"{who} {exc}" + _died_hint(exc.returncode), exc.stderr_tail)
        if reply.violations:
            raise Rejected("rejected_exploit", f"{who} " + "; ".join(reply.violations))
        if reply.tamper:
            raise Rejected("rejected_exploit", f"{who} " + "; ".join(reply.tamper) + " (the harness's timer and "
                           "checks are bound before candidate code runs)")
        if not reply.ok:
            raise Rejected("crashed", f"{who} failed: {_error_line(reply.error)}", reply.error.tb if reply.error else "")
        return reply

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
        self._trusted = trusted
        started = time.perf_counter()
        worker = self._start(code, trusted)
        baseline = self._start(reference if reference is not None else self._reference_code, trusted=True)
        self._active = [worker, baseline]
        try:
            result = self._run(worker, baseline, base)
            result.cpu_s = worker.cpu_seconds()
            result.eval_s = time.perf_counter() - started
            result.host = HOST
            if result.median_s is not None:
                result.hardware = str((result.gpu or {}).get("name") or cpu_model())
            if self._cancelled.is_set():
                return CandidateResult(status="infra_error", reason="cancelled while it ran", **base)
        finally:
            self._active = []
            worker.close()
            baseline.close()
        # Nsight Compute on the leading candidates only: each verified one at least as fast as every one
        # before it against the target (a head-to-head's speedup is against another baseline).
        if result.status == "ok" and self.settings.device == "cuda" and self.settings.kernel_profile and \
                reference is None and (result.speedup or 0.0) >= self._leading:
            self._leading = result.speedup or 0.0
            result.kernel_profile = self.profile_kernels(code, trusted)
            result.eval_s = time.perf_counter() - started
        return result

    def profile_kernels(self, code: str | None, trusted: bool) -> KernelProfile | None:
        """Nsight Compute on `code`'s kernels in a sandboxed worker; None where ncu is missing or fails."""
        ncu = ncu_path()
        if ncu is None:
            return None
        worker = self.backend.start(self._spec(code, trusted), self.python, self.settings.limits,
                                    prefix=ncu_prefix(ncu))
        self._active = [worker]
        try:
            load = _validated(worker.read_reply(self.settings.limits.wall_s * 4), "the candidate under ncu")
            if not load.ok:
                return None
            self._ask(worker, {"op": "profile", "seeds": fresh_seeds(2)}, "the candidate under ncu")
            if worker.finish(timeout=self.settings.limits.wall_s * 4) is None:
                return None
            profile = read_report(worker.scratch)
            return summarise(profile) if profile is not None else None
        except (Rejected, WorkerDied, WorkerTimeout):
            return None
        finally:
            self._active = []
            worker.close()

    def cancel(self) -> None:
        """Stop at once: kill the workers of the candidate being evaluated (safe from any thread)."""
        self._cancelled.set()
        for w in list(self._active):
            w.kill()

    def _run(self, worker: Worker, reference: Worker, base: dict[str, Any]) -> CandidateResult:
        try:
            try:
                load = _validated(worker.read_reply(self.settings.limits.wall_s), "the candidate")
            except WorkerTimeout:
                return CandidateResult(status="timeout", reason="hangs at import (killed at the deadline)", **base)
            except WorkerDied as exc:
                return CandidateResult(status="crashed", reason=f"the candidate {exc} while loading"
                                       + _died_hint(exc.returncode), error_tail=exc.stderr_tail, **base)
            if load.violations:
                return CandidateResult(status="rejected_exploit", reason="at import: " + "; ".join(load.violations),
                                       **base)
            if not load.ok:
                return CandidateResult(status="build_error", reason=f"does not load: {_error_line(load.error)}",
                                       error_tail=load.error.tb if load.error else "", **base)
            if load.tamper:
                return CandidateResult(status="rejected_exploit", reason="at import: " + "; ".join(load.tamper),
                                       **base)
            ref_load = _validated(reference.read_reply(self.settings.limits.wall_s), "the reference")
            if not ref_load.ok:
                return CandidateResult(status="infra_error", reason="the reference stopped loading: "
                                       + _error_line(ref_load.error), **base)
            try:
                first = self._first_seen(worker, reference) if self.plan.captured else None
            except Rejected as rej:
                if rej.status == "crashed":  # the gate says precisely where the candidate goes wrong
                    self._gate(worker, reference)
                raise
            self._gate(worker, reference)
            return self._time(worker, reference, base, ref_load.gpu, first)
        except Rejected as rej:
            return CandidateResult(status=rej.status, reason=rej.reason, error_tail=rej.tail[-3000:], **base)

    def _first_seen(self, cand: Worker, reference: Worker) -> tuple[list[float], list[float], list[float]]:
        """Captured calls repeat, so a candidate could remember results by its arguments. Before it has
        seen them all (before the gate), each side is warmed up on half of the calls and then timed
        once on each call of the other half, which neither process has seen: (reference, candidate)
        times of those first-seen calls and their weights in the mix, set against the repeated calls'
        speedup in _time."""
        warm, fresh = self.plan.first_seen_split()
        for who, worker in (("candidate", cand), ("reference", reference)):
            if warm:
                self._batch(worker, warm, [], f"the {who}")
        got, _, _ = self._batch(cand, fresh, [], "the candidate")
        ref, _, _ = self._batch(reference, fresh, [], "the reference")
        return ref.times, got.times, [self.plan.weight(k) for k in fresh]

    # ------------------------------------------------------------------ gate
    def _gate(self, worker: Worker, reference: Worker) -> None:
        seeds = self.plan.check_keys(self.settings.check_seeds)
        # The candidate runs first: nothing the reference computes exists yet when it runs.
        sample = fresh_seeds(1)[0]  # where large outputs are sampled: the same for both, unknown before
        got = self._ask(worker, {"op": "check", "seeds": seeds, "repeat": 2, "sample_seed": sample}, "the candidate")
        ref = self._ask(reference, {"op": "check", "seeds": seeds, "repeat": 1, "sample_seed": sample,
                                       "oracle": True}, "the reference")
        if len(ref.results) != len(seeds) or len(got.results) != len(seeds) or \
                any(len(g.runs) != 2 for g in got.results) or [g.seed for g in got.results] != seeds:
            raise Rejected("crashed", "the candidate's check reply does not match the request")
        what = "a captured call" if self.plan.captured else "a fresh input"
        for r, g in zip(ref.results, got.results, strict=True):
            rr, g1, g2 = r.runs[0], g.runs[0], g.runs[1]
            for run in (g1, g2):
                if run.threads_left > 0:
                    raise Rejected("rejected_exploit", "left background threads running after returning "
                                   "(work finishing outside the call)")
                if run.unordered:
                    raise Rejected("rejected_exploit", "returned while its output was still being written on "
                                   "another CUDA stream that the calling stream never waits for (a caller "
                                   "reading it in stream order sees unfinished values)")
            if rr.error is not None:
                if g1.error is None or g1.error.type != rr.error.type:
                    raise Rejected("incorrect", f"the reference raises {_error_line(rr.error)} for "
                                   f"{'captured call' if self.plan.captured else 'seed'} {r.seed}, "
                                   f"the candidate {'returns' if g1.error is None else 'raises ' + g1.error.type}",
                                   rr.error.tb)
                continue
            if g1.error is not None:
                raise Rejected("crashed", f"raised {_error_line(g1.error)}", g1.error.tb)
            self._same(rr.output, g1.output, "output", f"wrong result for {what}: ", oracle=r.oracle)
            if g2.error is not None:
                raise Rejected("incorrect", f"nondeterministic: a second call on the same input raised "
                               f"{_error_line(g2.error)}")
            self._same(g1.output, g2.output, "output", "nondeterministic: two calls on the same input differ: ")
            if g1.aliases_input and not rr.aliases_input:
                raise Rejected("incorrect", "the output aliases an input (the reference returns new memory)")
            self._same(rr.inputs_after, g1.inputs_after, "input", "mutates its inputs unlike the reference: ", exact=True)

    def _same(self, ref: Encoded | None, got: Encoded | None, where: str, prefix: str, exact: bool = False,
              oracle: Encoded | None = None) -> None:
        """Raise `incorrect` with `prefix` and the mismatch unless `got` matches `ref` (or, for a
        half-precision output, the float32 `oracle` at least as closely as `ref` does)."""
        s = self.settings
        try:
            if ref is None or got is None:
                raise Mismatch(f"{where} is missing")
            compare(ref, got, where, 0.0 if exact else s.rtol, 0.0 if exact else s.atol, oracle=oracle)
        except Mismatch as exc:
            raise Rejected("incorrect", f"{prefix}{exc}")
        except (KeyError, TypeError, ValueError) as exc:
            raise Rejected("incorrect", f"{prefix}{where} is not a well-formed value ({exc.__class__.__name__})")

    def _oracles(self, reference: Worker, seeds: list[int], sample: int) -> list[Encoded | None]:
        """The reference's outputs for `seeds` computed in float32 (None for one without half-precision
        output or that does not run in float32), sampled like the timed outputs."""
        reply = self._ask(reference, {"op": "oracle", "seeds": seeds, "sample_seed": sample}, "the reference")
        return reply.oracles if len(reply.oracles) == len(seeds) else [None] * len(seeds)

    # ---------------------------------------------------------------- timing
    def _batch(self, worker: Worker, seeds: list[int], keep: list[int], who: str,
               sample: int = 0, ahead_s: float | None = None) -> tuple[Reply, float, float]:
        cpu_before = worker.cpu_seconds()
        t0 = time.perf_counter()
        req: dict[str, Any] = {"op": "time", "seeds": seeds, "keep": keep, "sample_seed": sample}
        if ahead_s is not None:
            req["ahead_s"] = ahead_s
        reply = self._ask(worker, req, who)
        wall = time.perf_counter() - t0
        if reply.batch_error:
            raise Rejected("crashed", f"{who} raised during timed calls", reply.batch_error)
        if reply.threads_left > 0:
            raise Rejected("rejected_exploit", f"{who} left background threads running after returning")
        if len(reply.times) != len(seeds) or any(not t >= 0 for t in reply.times):
            raise Rejected("rejected_exploit", f"{who} reported {len(reply.times)} call times for {len(seeds)} calls")
        return reply, wall, cpu_before

    def _energy(self, cand: Worker, reference: Worker, seeds: list[int]) -> tuple[float, float] | None:
        """Joules per call of the candidate and the reference from NVML's energy counter over
        back-to-back calls (each side at least ENERGY_S), in their own window after the timing."""
        per_call = []
        for who, worker in (("candidate", cand), ("reference", reference)):
            reply = self._ask(worker, {"op": "energy", "seeds": seeds, "min_s": ENERGY_S}, f"the {who}")
            if reply.energy_j is None or reply.calls <= 0:
                return None
            per_call.append(reply.energy_j / reply.calls)
        return per_call[0], per_call[1]

    def _time(self, cand: Worker, reference: Worker, base: dict[str, Any],
              gpu_info: dict[str, Any] | None = None,
              first: tuple[list[float], list[float], list[float]] | None = None) -> CandidateResult:
        s = self.settings
        # Warm-up (JIT compilation, caches) on both sides until per-call times settle.
        est = {}
        per_call_bytes = 0
        ahead: float | None = None  # CUDA: the timed calls' head start (see below)
        for who, worker in (("reference", reference), ("candidate", cand)):
            prev = None
            for _ in range(6):
                reply, _, _ = self._batch(worker, self.plan.timing_keys(3), [], f"the {who}", ahead_s=ahead)
                per_call_bytes = max(per_call_bytes, reply.bytes_moved)
                m = median(reply.times)
                if prev is not None and abs(m - prev) <= 0.1 * max(prev, 1e-9):
                    break
                prev = m
            est[who] = m
            if who == "reference" and reply.gpu and isinstance(reply.gpu.get("issue_s"), float):
                # On CUDA each timed call starts behind a device-side wait of 1.5x the time the reference
                # takes to issue a call, the same for both sides: the GPU's work is timed, not an idle
                # device's launch latency, and a candidate's host work beyond what the reference needs
                # leaves the GPU idle inside its events, so it is charged.
                ahead = min(1.5 * reply.gpu["issue_s"] + 20e-6, 5e-3)
        per_call = max(est.values())
        n = max(1, min(500, int(s.batch_s / max(per_call, 1e-7))))
        # A batch's fresh inputs are made before it is timed: keep them within BATCH_BYTES.
        n = max(2, min(n, BATCH_BYTES // max(per_call_bytes, 1)))
        base_rounds: list[list[float]] = []
        cand_rounds: list[list[float]] = []
        energy: dict[str, list[float]] = {"candidate": [], "reference": []}
        bytes_moved = 0
        gpu_state: dict[str, Any] | None = None
        ref_state: dict[str, Any] = {}
        start = time.perf_counter()
        last_cand_cpu_end: float | None = None
        # A captured mix is judged by its total time, as the recorded run would see it; fresh seeds of one
        # shape by the median call.
        center = sum if self.plan.captured else median
        while True:
            seeds = self.plan.timing_keys(n)
            sample = fresh_seeds(1)[0]
            keep = sorted(_rng.sample(range(n), min(n, 2)))
            order = [("candidate", cand), ("reference", reference)]
            if len(base_rounds) % 2:
                order.reverse()
            replies: dict[str, Reply] = {}
            for who, worker in order:
                reply, wall, cpu_before = self._batch(worker, seeds, keep, f"the {who}", sample, ahead)
                if who == "candidate":
                    # Built-ins are trusted to compile in the background (torch.compile's workers).
                    if last_cand_cpu_end is not None and not self._trusted:
                        idle_cpu = cpu_before - last_cand_cpu_end
                        batch_cpu = max(cand.cpu_seconds() - cpu_before, 0.0)
                        if idle_cpu > max(0.05, 0.5 * batch_cpu):
                            raise Rejected("rejected_exploit", f"kept working between timed calls ({idle_cpu:.3f}s "
                                           "of CPU while idle): work done outside the timed region")
                    last_cand_cpu_end = cand.cpu_seconds()
                    if reply.worker_s < 0.5 * wall - 0.01 or reply.batch_s > reply.worker_s + 0.01:
                        raise Rejected("rejected_exploit", f"its timer reports {reply.worker_s:.4f}s for a request the "
                                       f"harness measured at {wall:.4f}s (patched timer)")
                replies[who] = reply
            cr, rr = replies["candidate"], replies["reference"]
            for who, r in (("candidate", cr), ("reference", rr)):
                if r.energy_j is not None:
                    energy[who].append(r.energy_j)
            bytes_moved = max(bytes_moved, rr.bytes_moved)
            gpu_state = cr.gpu or gpu_state
            ref_state = rr.gpu or {}
            if replies["candidate"].reused_buffer and not replies["reference"].reused_buffer:
                raise Rejected("rejected_exploit", "returns the same buffer from different calls (cached output)")
            why = "wrong result on a timed call after passing the first checks (correct only on some calls, work " \
                "skipped, or on CUDA inputs read before the calling stream made them ready): "
            missed = []
            for k, ref_out in rr.outputs.items():
                try:
                    self._same(ref_out, cr.outputs.get(k), f"output of timed call {k}", why)
                except Rejected:
                    if not has_half(ref_out):
                        raise
                    missed.append(k)
            if missed:
                # A half-precision miss may be eager's own rounding: ask the reference for the float32
                # results of those calls only now, outside the timed rounds, and judge against them.
                oracles = self._oracles(reference, [seeds[int(k)] for k in missed], sample)
                for k, oracle in zip(missed, oracles, strict=True):
                    self._same(rr.outputs[k], cr.outputs.get(k), f"output of timed call {k}", why, oracle=oracle)
            base_rounds.append(replies["reference"].times)
            cand_rounds.append(replies["candidate"].times)
            elapsed = time.perf_counter() - start
            if len(base_rounds) >= s.min_rounds:
                if elapsed >= s.time_budget_s or len(base_rounds) >= 400:
                    break
                # Stop early once the interval settles the verdict either way.
                _, (lo, hi) = speedup_ci(base_rounds, cand_rounds, resamples=300, center=center)
                if hi < 1 + s.threshold or lo > 1 + s.threshold:
                    break
        speedup, ci = speedup_ci(base_rounds, cand_rounds, center=center)
        cand_times = [t for r in cand_rounds for t in r]
        base_times = [t for r in base_rounds for t in r]
        self.baseline_times.extend(base_times)
        fields: dict[str, Any] = dict(median_s=median(cand_times), ci95_s=median_ci(cand_times, 400), speedup=speedup,
                                      speedup_ci95=ci, baseline_median_s=median(base_times))
        if gpu_state is not None:
            # The candidate's device state and where its calls' time went (medians of its last batch), with
            # the same split for the baseline: GPU time on the calling stream, host time to issue the call,
            # and the wait for other streams after it.
            parts = {f"baseline_{k}": ref_state[k] for k in ("gpu_time_s", "issue_s", "drain_s") if k in ref_state}
            fields["gpu"] = {k: v for k, v in {**gpu_state, **parts}.items() if isinstance(v, (int, float, str))}
        if energy["candidate"] or energy["reference"]:
            fields["energy_j"] = sum(energy["candidate"]) + sum(energy["reference"])
        if gpu_state is not None and (energy["candidate"] or energy["reference"]):
            joules = self._energy(cand, reference, self.plan.timing_keys(min(n, 4)))
            if joules is not None:
                fields["energy_j_per_call"], fields["baseline_energy_j_per_call"] = joules
        ceiling = (gpu_info or {}).get("copy_bandwidth_Bps")
        if ceiling and bytes_moved:
            implied = bytes_moved / fields["median_s"]
            if implied > 1.25 * ceiling:
                raise Rejected("rejected_exploit", f"moves at least {bytes_moved / 1e6:.1f} MB per call, which at "
                               f"{fields['median_s'] * 1e6:.1f} µs is {implied / 1e12:.2f} TB/s: beyond the measured "
                               f"copy bandwidth of {ceiling / 1e12:.2f} TB/s, so work is being skipped")
        lower = ""
        if first is not None:
            seen, seen_ci = speedup, ci
            speedup, ci = total_ratio_ci(*first)
            fields["first_seen_speedup"] = speedup
            if ci[1] * 1.5 < seen_ci[0]:
                raise Rejected("rejected_exploit", f"{seen:.2f}x on captured calls it had run before but {speedup:.2f}x "
                               f"(95% CI {ci[0]:.2f}-{ci[1]:.2f}) on calls it had not: it remembers results by "
                               "their arguments (captured inputs repeat)")
            if seen < speedup:
                speedup, ci = seen, seen_ci
            fields.update(speedup=speedup, speedup_ci95=ci)
            lower = f"; the lower of {seen:.2f}x on repeated and {fields['first_seen_speedup']:.2f}x on first-seen calls"
        if speedup >= 1 + s.threshold and ci[0] > 1:
            return CandidateResult(status="ok", reason=f"{speedup:.2f}x faster (95% CI {ci[0]:.2f}-{ci[1]:.2f}{lower})",
                                   **fields, **base)
        return CandidateResult(status="not_faster", reason=f"{speedup:.3f}x (95% CI {ci[0]:.3f}-{ci[1]:.3f}{lower}) does "
                               f"not clear the {s.threshold:.0%} threshold with its interval above 1", **fields, **base)


def _died_hint(rc: int | None) -> str:
    if rc is None:
        return ""
    if rc in (-9, 137):
        return " (killed: memory or CPU limit, or escaped processes)"
    if rc in (-11, 139):
        return " (segmentation fault)"
    if rc == -6:
        return " (aborted)"
    return ""
