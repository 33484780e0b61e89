"""Where whole candidate evaluations run: this machine, or a Ray cluster (ray_pool.py).

A pool takes jobs (one candidate each: build, gate, timing against a fresh baseline worker on the
same host) and hands back results as they finish, so the loop can feed the archive and the next
round's prompts without waiting for the slowest. Inside a pool, each evaluation still runs its
code through an `ExecutionBackend` (sandbox.py) on the host that does the work.
"""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from .evaluate import Evaluator
from .inputs.plan import InputsInfo
from .models import CandidateResult, EvalSettings, Regression
from .regression import run_regression
from .target import Target


class ClusterError(Exception):
    """A pool's machines cannot be reached or cannot run redline (CLI exit 3)."""


@dataclass(frozen=True)
class Job:
    """One candidate to evaluate."""

    id: str
    code: str
    origin: str
    round: int = 0
    parent: str | None = None
    trusted: bool = False
    approach: str = ""
    reference: str | None = None  # trusted code to time against instead of the target (a head-to-head)


class EvaluationPool(ABC):
    """Runs jobs and returns their results as they finish."""

    name: str
    isolation: str
    concurrency: int
    inputs: list[str]  # what the target's inputs are (types, shapes), from the trusted probe
    hardware: str  # what the evaluations run on, for prompts
    bound: str = ""  # on CUDA, what limits the target (launch-, memory- or compute-bound), for the proposers
    baseline_times: list[float]  # every baseline call timed, on the run's reference hardware
    notes: list[str]  # what the report should say about how the pool ran (retries, lost workers)
    inputs_info: InputsInfo  # where the inputs came from, for the report

    @abstractmethod
    def submit(self, job: Job) -> None:
        """Start `job`; its result comes back from `next_done`."""

    @abstractmethod
    def next_done(self, timeout: float) -> CandidateResult | None:
        """The next finished result, or None if none finished within `timeout` seconds."""

    @abstractmethod
    def cancel(self) -> None:
        """Stop every running evaluation at once (safe from any thread)."""

    @abstractmethod
    def regression(self, target: Target, new_source: str, command: list[str] | None) -> Regression:
        """Run the project's tests on a scratch copy with `new_source` applied."""

    @abstractmethod
    def close(self) -> None:
        """Release what the pool holds (connections, threads)."""


PoolFactory = Callable[[Target, EvalSettings], "EvaluationPool"]


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
        self.notes = []
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
                result = self.evaluator.evaluate(job.id, job.code, job.origin, job.round, job.parent, job.trusted,
                                                 job.approach, job.reference)
            except Exception as exc:  # a harness bug must cost one candidate, not the run
                result = CandidateResult(id=job.id, origin=job.origin, round=job.round, parent=job.parent,
                                         code=job.code, approach=job.approach, status="infra_error",
                                         reason=f"the harness failed: {exc.__class__.__name__}: {exc}")
            self._done.put(result)

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

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=5)
        self.evaluator.close()
