"""Evaluations on this machine, one at a time."""

from __future__ import annotations

import queue
import threading

from ..evaluate import Evaluator
from ..inputs.plan import InputsInfo
from ..models import CandidateResult, EvalSettings, KernelProfile, Regression
from ..regression import run_regression
from ..stages import decided
from ..target import Target
from .base import EvaluationPool, Job


class LocalPool(EvaluationPool):
    """Evaluations one at a time on this machine, in a background thread (timings never overlap)."""

    name = "local"
    concurrency = 1

    def __init__(self, target: Target, settings: EvalSettings, evaluator: Evaluator | None = None) -> None:
        self.evaluator = evaluator or Evaluator(target, settings)
        self.isolation = self.evaluator.isolation
        self.inputs = self.evaluator.inputs
        self.hardware = self.evaluator.hardware
        self.bound = self.evaluator.bound
        self.local_types = self.evaluator.local_types
        self.callee_types = self.evaluator.callee_types
        self.notes = list(self.evaluator.notes)
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._done: queue.Queue[CandidateResult] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="redline-local-pool", daemon=True)
        self._thread.start()

    @property
    def baseline_times(self) -> list[float]:  # type: ignore[override]
        return self.evaluator.baseline_times

    @property
    def inputs_info(self) -> InputsInfo:  # type: ignore[override]
        return self.evaluator.plan.info()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                result = self.evaluator.run(job)
            except Exception as exc:  # a harness bug must cost one candidate, not the run
                result = decided(job, "infra_error", f"the harness failed: {exc.__class__.__name__}: {exc}", "harness")
            self._done.put(result)
            self._jobs.task_done()

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def next_done(self, timeout: float) -> CandidateResult | None:
        try:
            return self._done.get(timeout=timeout)
        except queue.Empty:
            return None

    def cancel(self) -> None:
        self.evaluator.cancel()

    def regression(self, target: Target, new_source: str, command: list[str] | None) -> Regression:
        ev = self.evaluator
        return run_regression(target, new_source, ev.backend, ev.python, command, ev.settings.limits)

    def check_memory(self, result: CandidateResult) -> tuple[str | None, str | None]:
        self._jobs.join()  # every job submitted has finished (one a time limit cut off has wound up)
        return self.evaluator.check_memory(result)

    def profile_offered(self, result: CandidateResult) -> KernelProfile | None:
        self._jobs.join()
        return self.evaluator.profile_offered(result)

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=5)
        self.evaluator.close()
