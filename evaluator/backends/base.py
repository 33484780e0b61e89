"""Where whole candidate evaluations run: this machine (local.py), or a Ray cluster (ray_cluster.py).

A pool takes jobs (one candidate each: build, gate, timing against a fresh baseline worker on the
same host) and hands back results as they finish, so the loop can feed the archive and the next
round's prompts without waiting for the slowest. Inside a pool, each evaluation still runs its
code through an `ExecutionBackend` (sandbox.py) on the host that does the work.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from ..inputs.plan import InputsInfo
from ..models import CandidateResult, EvalSettings, Job, KernelProfile, Regression
from ..target import Target


class ClusterError(Exception):
    """A pool's machines cannot be reached or cannot run redline (CLI exit 3)."""


class EvaluationPool(ABC):
    """Runs jobs and returns their results as they finish."""

    name: str
    isolation: str
    concurrency: int
    inputs: list[str]  # what the target's inputs are (types, shapes), from the trusted probe
    hardware: str  # what the evaluations run on, for prompts
    bound: str = ""  # on CUDA, what limits the target (launch-, memory- or compute-bound), for the proposers
    local_types: dict[str, list[str]]  # on the CPU, the types the reference's locals held, for the proposers
    callee_types: dict[str, dict[str, list[str]]]  # and those of the module's functions it called, by name@line
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
    def check_memory(self, result: CandidateResult) -> tuple[str | None, str | None]:
        """compute-sanitizer on a verified candidate before it is offered (Evaluator.check_memory): what
        ran and the reason to reject it, if any; (None, None) where the check does not apply."""

    @abstractmethod
    def profile_offered(self, result: CandidateResult) -> KernelProfile | None:
        """Nsight Compute on a verified candidate about to be offered (Evaluator.profile_offered); None
        where it does not apply."""

    @abstractmethod
    def close(self) -> None:
        """Release what the pool holds (connections, threads)."""


PoolFactory = Callable[[Target, EvalSettings], "EvaluationPool"]
