"""One candidate through the stages, and its result built from them in one place (`decided`).

The stages run in order on a pair of fresh workers (the candidate's and the reference's): `load`,
`first_seen` (captured inputs only), `gate`, `timing`, and `pairs` for a small win; `same_code`
then turns the target's own code from `ok` into `not_faster`. The first stage that rejects the
candidate decides its status, and the result records which (models.py::Stage).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Protocol, TypeVar

from .gate import Checked, Gate
from .inputs.plan import InputPlan
from .models import CandidateResult, EvalSettings, Job, Stage, Status
from .sandbox import WorkerDied, WorkerTimeout
from .timing import (
    FirstSeen,
    Measured,
    Timing,
    Verdict,
    across_pairs,
    needs_pairs,
    remembered,
    with_first_seen,
    worth_a_second_look,
)
from .verdict import Channel, Rejected, died_hint, error_line

HOST = socket.gethostname()
T = TypeVar("T")


class Pair(Protocol):
    """Starts a fresh candidate worker and a fresh baseline worker; `first_seen`: the candidate's on a
    build of its own (see Workers.build)."""

    def __call__(self, first_seen: bool = False) -> tuple[Channel, Channel]: ...


def decided(job: Job, status: Status, reason: str, stage: Stage | None, measured: Measured | None = None,
            **figures: Any) -> CandidateResult:
    """The candidate's result: the job's identity, the deciding stage's status and reason, and what the
    stages measured (`figures`: shapes_checked, cpu_s, error_tail, correct_only_at, eval_s, hardware)."""
    return CandidateResult(id=job.id, origin=job.origin, round=job.round, parent=job.parent, code=job.code,
                           approach=job.approach, trusted=job.trusted, status=status, reason=reason, stage=stage,
                           host=HOST, **(asdict(measured) if measured is not None else {}), **figures)


def at(stage: Stage, step: Callable[..., T], *args: Any) -> T:
    """`step(*args)`, a rejection from it recorded as `stage`'s (unless it names its own)."""
    try:
        return step(*args)
    except Rejected as rej:
        rej.stage = rej.stage or stage
        raise


class Stages:
    """The stage runner: the verdict on one candidate from a pair of fresh workers (and more pairs where
    a stage needs them)."""

    def __init__(self, settings: EvalSettings, plan: InputPlan, gate: Gate, cancelled: threading.Event,
                 hardware: Callable[[dict[str, Any] | None], str]) -> None:
        self.settings, self.plan, self.gate, self.cancelled = settings, plan, gate, cancelled
        self.hardware = hardware  # what a timing was measured on, from its GPU state (None on the CPU)
        self.baseline_times: list[float] = []  # every baseline call timed, for the run's baseline interval

    def run(self, job: Job, pair: Pair, same_code: bool, started: float) -> CandidateResult:
        """The candidate's verdict; `same_code`: it is the target's own code (so it cannot be faster)."""
        cand, ref = pair()
        cands = [cand]
        timings = [Timing(self.settings, self.plan, self.gate, job.trusted)]
        stage: list[Stage] = ["load"]
        try:
            verdict, checked = self._verdict(pair, cand, ref, cands, timings, stage)
        except Rejected as rej:
            if self.cancelled.is_set():
                return decided(job, "cancelled", f"cancelled during {rej.stage or stage[0]}", rej.stage or stage[0])
            return decided(job, rej.status, rej.reason, rej.stage or stage[0], error_tail=rej.tail[-3000:],
                           correct_only_at=rej.correct_at, cpu_s=sum(c.cpu_seconds() for c in cands),
                           eval_s=time.perf_counter() - started)
        finally:
            for timing in timings:
                self.baseline_times.extend(timing.baseline_times)
        if self.cancelled.is_set():
            return decided(job, "cancelled", f"cancelled after {stage[0]}", stage[0])
        figures: dict[str, Any] = dict(shapes_checked=checked.shapes, cpu_s=sum(c.cpu_seconds() for c in cands),
                                       eval_s=time.perf_counter() - started,
                                       hardware=self.hardware(verdict.measured.gpu))
        if verdict.status == "ok" and same_code:
            # The same code cannot be faster: for a function of a few microseconds, per-process
            # differences drew 1.13x for an identical copy in both pairs of workers, once in four.
            return decided(job, "not_faster", f"the same code as the target (up to formatting): {verdict.reason} "
                           "is noise", "same_code", verdict.measured, **figures)
        return decided(job, verdict.status, verdict.reason, stage[0], verdict.measured, **figures)

    def _verdict(self, pair: Pair, cand: Channel, ref: Channel, cands: list[Channel], timings: list[Timing],
                 stage: list[Stage]) -> tuple[Verdict, Checked]:
        """The stages in order, `stage[0]` the one running; the first to reject raises."""
        gpu_info = at("load", self._load, cand, ref)
        first = None
        if timings[0].first_seen_applies():
            stage[0] = "first_seen"
            first = at("first_seen", self._first_seen, timings[0], cand, ref)
        stage[0] = "gate"
        checked = at("gate", self.gate.check, cand, ref)
        if checked.device_fault:  # neither worker's CUDA context survives it: time in a fresh pair
            cand, ref = pair()
            cands.append(cand)
            at("load", self._load, cand, ref)
        stage[0] = "timing"
        verdict = seen = at("timing", timings[0].measure, cand, ref, gpu_info)
        if first is not None:
            stage[0] = "first_seen"
            again = at("first_seen", self._first_seen_of, timings[0], seen, first, pair, cands)
            verdict = with_first_seen(seen, again, self.settings)
            stage[0] = "timing"
        if needs_pairs(seen, verdict, self.settings):
            stage[0] = "pairs"
            pairs = [verdict]
            across = None
            while across is None:
                cand, ref = pair()
                cands.append(cand)
                timings.append(Timing(self.settings, self.plan, self.gate, timings[0].trusted))
                at("pairs", self._load, cand, ref)
                pairs.append(at("pairs", timings[-1].measure, cand, ref, gpu_info))
                across = across_pairs(pairs, self.settings)
            verdict = across
        return verdict, checked

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
        """The first-seen timing to judge by: where it may lower a win on repeated calls (worth_a_second_look),
        the same calls timed again in a fresh pair of workers and each call's faster time on each side;
        the candidate `remembers` results where that says so."""
        if not worth_a_second_look(seen, first):
            return first
        cand, ref = pair(True)  # on a build of its own: nothing the first pair's calls left in one
        cands.append(cand)
        self._load(cand, ref)
        both = first.fastest(self._first_seen(timing, cand, ref, first))
        if both.remembers(seen):
            raise remembered(seen, both)
        return both

    def _first_seen(self, timing: Timing, cand: Channel, ref: Channel, like: FirstSeen | None = None) -> FirstSeen:
        try:
            return timing.first_seen(cand, ref, like)
        except Rejected as rej:
            if rej.status == "crashed":  # the gate says precisely where the candidate goes wrong
                at("gate", self.gate.check, cand, ref)
            raise
