"""One candidate through the stages: build, correctness gate, interleaved timing.

Reference and candidate run in separate sandboxed processes, so a candidate can neither read
the reference's results nor slow the reference down; the harness compares their encoded
outputs itself and measures wall and CPU time from outside.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from .compare import Mismatch, compare
from .models import CandidateResult, EvalSettings, Interval, Status
from .sandbox import ExecutionBackend, LocalBackend, Worker, WorkerDied, WorkerTimeout, default_python
from .stats import median, median_ci, speedup_ci
from .target import Target, TargetError, check_candidate, imports_of, raw_memory_use

_rng = random.SystemRandom()


def fresh_seeds(n: int) -> list[int]:
    """Seeds the candidate cannot predict."""
    return [_rng.randrange(1, 2**31 - 1) for _ in range(n)]


class Rejected(Exception):
    def __init__(self, status: Status, reason: str, tail: str = "") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.tail = tail


@dataclass
class BaselineStats:
    times: list[float] = field(default_factory=list)

    def interval(self) -> Interval | None:
        if not self.times:
            return None
        return Interval(median_s=median(self.times), ci95_s=median_ci(self.times, 400), runs=len(self.times))


def _error_line(err: dict[str, Any]) -> str:
    return f"{err.get('type', 'Error')}: {err.get('message', '')}".strip()


class Evaluator:
    """Holds the baseline worker for a run and evaluates candidates against it."""

    def __init__(self, target: Target, settings: EvalSettings, backend: ExecutionBackend | None = None,
                 python: str | None = None) -> None:
        self.target = target
        self.settings = settings
        self.backend = backend or LocalBackend(settings.isolation)
        self.python = python or default_python()
        self.baseline = BaselineStats()
        self._base = self._start(None, trusted=True)
        try:
            load = self._base.read_reply(settings.limits.wall_s)
        except (WorkerDied, WorkerTimeout) as exc:
            self._base.close()
            raise TargetError(f"the target cannot be loaded in the sandbox: {exc}")
        if not load.get("ok"):
            self._base.close()
            raise TargetError(f"the target cannot be loaded: {_error_line(load.get('error', {}))}")

    @property
    def isolation(self) -> str:
        return self.backend.isolation

    def _spec(self, candidate: str | None, trusted: bool) -> dict[str, Any]:
        t = self.target
        return {"file": str(t.file), "qualname": t.qualname, "module": t.module_name,
                "sys_path": [str(t.project_root), str(t.file.parent)], "inputs_file": str(t.inputs_file),
                "inputs_func": t.inputs_func, "kernelbench": t.kernelbench, "device": self.settings.device,
                "candidate": candidate, "allow_processes": trusted,
                "preimport": imports_of(candidate) if candidate else []}

    def _start(self, candidate: str | None, trusted: bool) -> Worker:
        return self.backend.start(self._spec(candidate, trusted), self.python, self.settings.limits)

    def close(self) -> None:
        self._base.close()

    def _ask(self, worker: Worker, req: dict[str, Any], who: str) -> dict[str, Any]:
        try:
            reply = worker.request(req, self.settings.limits.wall_s)
        except WorkerTimeout:
            raise Rejected("timeout", f"{who} did not finish within {self.settings.limits.wall_s:g}s (killed)")
        except WorkerDied as exc:
            raise Rejected("crashed", f"{who} {exc}" + _died_hint(exc.returncode), exc.stderr_tail)
        if reply.get("violations"):
            raise Rejected("rejected_exploit", f"{who} " + "; ".join(reply["violations"]))
        if reply.get("tamper"):
            raise Rejected("rejected_exploit", f"{who} " + "; ".join(reply["tamper"]) + " (the harness's timer and "
                           "checks are bound before candidate code runs)")
        if not reply.get("ok", False):
            err = reply.get("error", {})
            raise Rejected("crashed", f"{who} failed: {_error_line(err)}", err.get("tb", ""))
        return reply

    def evaluate(self, cid: str, code: str, origin: str, round_: int = 0, parent: str | None = None,
                 trusted: bool = False, approach: str = "") -> CandidateResult:
        base = dict(id=cid, origin=origin, round=round_, parent=parent, code=code, approach=approach)
        problem = check_candidate(code, self.target)
        if problem:
            return CandidateResult(status="build_error", reason=problem, **base)
        raw = None if trusted else raw_memory_use(code)
        if raw:
            return CandidateResult(status="rejected_exploit", reason=raw, **base)
        worker = self._start(code, trusted)
        try:
            result = self._run(worker, base)
            result.cpu_s = worker.cpu_seconds()
            return result
        finally:
            worker.close()

    def _run(self, worker: Worker, base: dict[str, Any]) -> CandidateResult:
        try:
            try:
                load = worker.read_reply(self.settings.limits.wall_s)
            except WorkerTimeout:
                return CandidateResult(status="timeout", reason="hangs at import (killed at the deadline)", **base)
            except WorkerDied as exc:
                return CandidateResult(status="crashed", reason=f"the candidate {exc} while loading"
                                       + _died_hint(exc.returncode), error_tail=exc.stderr_tail, **base)
            if load.get("violations"):
                return CandidateResult(status="rejected_exploit", reason="at import: " + "; ".join(load["violations"]),
                                       **base)
            if not load.get("ok"):
                err = load.get("error", {})
                return CandidateResult(status="build_error", reason=f"does not load: {_error_line(err)}",
                                       error_tail=err.get("tb", ""), **base)
            if load.get("tamper"):
                return CandidateResult(status="rejected_exploit", reason="at import: " + "; ".join(load["tamper"]),
                                       **base)
            self._gate(worker)
            return self._time(worker, base)
        except Rejected as rej:
            return CandidateResult(status=rej.status, reason=rej.reason, error_tail=rej.tail[-3000:], **base)

    # ------------------------------------------------------------------ gate
    def _gate(self, worker: Worker) -> None:
        seeds = fresh_seeds(self.settings.check_seeds)
        # The candidate runs first: nothing the reference computes exists yet when it runs.
        got = self._ask(worker, {"op": "check", "seeds": seeds, "repeat": 2}, "the candidate")
        ref = self._ask(self._base, {"op": "check", "seeds": seeds, "repeat": 1}, "the reference")
        s = self.settings
        for r, g in zip(ref["results"], got["results"], strict=True):
            rr, g1, g2 = r["runs"][0], g["runs"][0], g["runs"][1]
            for run in (g1, g2):
                if run["threads_left"] > 0:
                    raise Rejected("rejected_exploit", "left background threads running after returning "
                                   "(work finishing outside the call)")
            if rr["error"] is not None:
                if g1["error"] is None or g1["error"]["type"] != rr["error"]["type"]:
                    raise Rejected("incorrect", f"the reference raises {rr['error']['type']} for seed {r['seed']}, the "
                                   f"candidate {'returns' if g1['error'] is None else 'raises ' + g1['error']['type']}")
                continue
            if g1["error"] is not None:
                raise Rejected("crashed", f"raised {_error_line(g1['error'])}", g1["error"].get("tb", ""))
            try:
                compare(rr["output"], g1["output"], "output", s.rtol, s.atol)
            except Mismatch as exc:
                raise Rejected("incorrect", f"wrong result for a fresh input: {exc}")
            if g2["error"] is not None:
                raise Rejected("incorrect", f"nondeterministic: a second call on the same input raised "
                               f"{_error_line(g2['error'])}")
            try:
                compare(g1["output"], g2["output"], "output", s.rtol, s.atol)
            except Mismatch as exc:
                raise Rejected("incorrect", f"nondeterministic: two calls on the same input differ ({exc})")
            if g1["aliases_input"] and not rr["aliases_input"]:
                raise Rejected("incorrect", "the output aliases an input (the reference returns new memory)")
            try:
                compare(rr["inputs_after"], g1["inputs_after"], "input", 0.0, 0.0)
            except Mismatch as exc:
                raise Rejected("incorrect", f"mutates its inputs unlike the reference ({exc})")

    # ---------------------------------------------------------------- timing
    def _batch(self, worker: Worker, seeds: list[int], keep: list[int], who: str) -> tuple[dict[str, Any], float, float]:
        cpu_before = worker.cpu_seconds()
        t0 = time.perf_counter()
        reply = self._ask(worker, {"op": "time", "seeds": seeds, "keep": keep}, who)
        wall = time.perf_counter() - t0
        if reply.get("error"):
            raise Rejected("crashed", f"{who} raised during timed calls", reply["error"])
        if reply.get("threads_left", 0) > 0:
            raise Rejected("rejected_exploit", f"{who} left background threads running after returning")
        return reply, wall, cpu_before

    def _time(self, cand: Worker, base: dict[str, Any]) -> CandidateResult:
        s = self.settings
        # Warm-up (JIT compilation, caches) on both sides until per-call times settle.
        est = {}
        for who, worker in (("candidate", cand), ("reference", self._base)):
            prev = None
            for _ in range(6):
                reply, _, _ = self._batch(worker, fresh_seeds(3), [], f"the {who}")
                m = median(reply["times"])
                if prev is not None and abs(m - prev) <= 0.1 * max(prev, 1e-9):
                    break
                prev = m
            est[who] = m
        per_call = max(est.values())
        n = max(1, min(500, int(s.batch_s / max(per_call, 1e-7))))
        base_rounds: list[list[float]] = []
        cand_rounds: list[list[float]] = []
        start = time.perf_counter()
        last_cand_cpu_end: float | None = None
        while True:
            seeds = fresh_seeds(n)
            keep = sorted(_rng.sample(range(n), min(n, 2)))
            order = [("candidate", cand), ("reference", self._base)]
            if len(base_rounds) % 2:
                order.reverse()
            replies = {}
            for who, worker in order:
                reply, wall, cpu_before = self._batch(worker, seeds, keep, f"the {who}")
                if who == "candidate":
                    if last_cand_cpu_end is not None:
                        idle_cpu = cpu_before - last_cand_cpu_end
                        batch_cpu = max(cand.cpu_seconds() - cpu_before, 0.0)
                        if idle_cpu > max(0.05, 0.5 * batch_cpu):
                            raise Rejected("rejected_exploit", f"kept working between timed calls ({idle_cpu:.3f}s "
                                           "of CPU while idle): work done outside the timed region")
                    last_cand_cpu_end = cand.cpu_seconds()
                    if reply["batch_s"] < 0.5 * wall - 0.01:
                        raise Rejected("rejected_exploit", f"its timer reports {reply['batch_s']:.4f}s for a batch the "
                                       f"harness measured at {wall:.4f}s (patched timer)")
                replies[who] = reply
            if replies["candidate"].get("reused_buffer") and not replies["reference"].get("reused_buffer"):
                raise Rejected("rejected_exploit", "returns the same buffer from different calls (cached output)")
            for k in replies["reference"]["outputs"]:
                try:
                    compare(replies["reference"]["outputs"][k], replies["candidate"]["outputs"][k],
                            f"output of timed call {k}", s.rtol, s.atol)
                except (Mismatch, KeyError) as exc:
                    raise Rejected("incorrect", f"wrong result on a timed call after passing the first checks: {exc} "
                                   "(correct only on some calls, or work skipped)")
            base_rounds.append(replies["reference"]["times"])
            cand_rounds.append(replies["candidate"]["times"])
            elapsed = time.perf_counter() - start
            if (elapsed >= s.time_budget_s and len(base_rounds) >= s.min_rounds) or len(base_rounds) >= 400:
                break
        speedup, ci = speedup_ci(base_rounds, cand_rounds)
        cand_times = [t for r in cand_rounds for t in r]
        base_times = [t for r in base_rounds for t in r]
        self.baseline.times.extend(base_times)
        fields = dict(median_s=median(cand_times), ci95_s=median_ci(cand_times, 400), speedup=speedup,
                      speedup_ci95=ci, baseline_median_s=median(base_times))
        if speedup >= 1 + s.threshold and ci[0] > 1:
            return CandidateResult(status="ok", reason=f"{speedup:.2f}x faster (95% CI {ci[0]:.2f}-{ci[1]:.2f})",
                                   **fields, **base)
        return CandidateResult(status="not_faster", reason=f"{speedup:.3f}x (95% CI {ci[0]:.3f}-{ci[1]:.3f}) does not "
                               f"clear the {s.threshold:.0%} threshold with its interval above 1", **fields, **base)


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
