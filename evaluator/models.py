"""Boundary types of the evaluator: settings, stage results, the report (its contract: docs/cli.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .inputs.plan import InputsInfo

Status = Literal["ok", "not_faster", "build_error", "incorrect", "timeout", "crashed", "rejected_exploit",
                 "infra_error", "unsupported", "cancelled"]
# The stage that decides a candidate's status, in the order they run (docs/cli.md, the report):
# `checks` reads the code before anything runs it; `load` starts both workers; `first_seen` times captured
# calls neither side has run; `gate` checks outputs and inputs against the reference; `timing` measures in
# interleaved rounds; `pairs` times a small win again in more pairs of fresh workers; `same_code` finds the target's
# own code (only `not_faster`); `memory_check` runs compute-sanitizer on the candidate offered; `harness`
# is redline failing, not the candidate.
Stage = Literal["checks", "load", "first_seen", "gate", "timing", "pairs", "same_code", "memory_check",
                "harness"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Limits(_Model):
    """Resource limits for one sandboxed worker process."""

    wall_s: float = Field(60.0, description="wall-clock deadline per request; the process group is killed at it")
    cpu_s: int = Field(600, description="CPU-time limit (RLIMIT_CPU) for the worker")
    memory_mb: int = Field(8192, description="address-space limit (RLIMIT_AS) in MiB")
    file_mb: int = Field(256, description="largest file a worker may write (RLIMIT_FSIZE) in MiB")
    processes: int = Field(256, description="most processes for the worker's user (RLIMIT_NPROC; not applied as root)")


class EvalSettings(_Model):
    """How candidates are checked and timed."""

    device: Literal["cpu", "cuda"] = "cpu"
    check_seeds: int = Field(4, description="fresh seeds the correctness gate runs")
    threshold: float = Field(0.05, description="a winner must be at least this much faster (0.05 = 5%)")
    time_budget_s: float = Field(1.0, description="timing time per candidate, both sides together")
    min_rounds: int = Field(12, description="fewest interleaved baseline/candidate timing rounds")
    batch_s: float = Field(0.02, description="target duration of one timed batch")
    confirm_below: float = Field(1.5, description="a winner below this speedup is timed again in more pairs of "
                                 "fresh workers, and judged by the spread of the pairs' speedups (across_pairs)")
    rtol: float | None = Field(None, description="relative tolerance override (default per dtype)")
    atol: float | None = Field(None, description="absolute tolerance override (default per dtype)")
    limits: Limits = Limits()
    kernel_profile: bool = Field(True, description="profile verified CUDA candidates with Nsight Compute when ncu exists")
    profile_leaders: bool = Field(True, description="profile each leading verified candidate during the search; set "
                                  "by the search: true only where a proposer reads the profiles (else only the "
                                  "candidate offered is profiled, after the search)")
    trace_locals: bool = Field(True, description="on the CPU, trace the types the original's variables hold on "
                               "the checked calls; set by the search: true only where a proposer reads them")
    sanitize: bool = Field(True, description="run verified CUDA candidates under compute-sanitizer where it exists")
    isolation: Literal["auto", "bwrap", "process"] = Field(
        "auto", description="bwrap when available (namespaces, read-only workspace), else process-only isolation")

    @property
    def profiles_kernels(self) -> bool:
        """Whether the leading verified candidates are profiled with Nsight Compute (CUDA, not turned off)."""
        return self.device == "cuda" and self.kernel_profile

    @property
    def checks_memory(self) -> bool:
        """Whether the candidate offered is checked under compute-sanitizer first (CUDA, not turned off)."""
        return self.device == "cuda" and self.sanitize


class Interval(_Model):
    median_s: float
    ci95_s: tuple[float, float]
    runs: int


class HotLine(_Model):
    file: str
    line: int
    stall_samples: float
    reason: str = ""  # the main warp-stall reason there


class KernelStat(_Model):
    name: str
    time_us: float
    memory_pct: float | None = None  # memory throughput, % of peak
    compute_pct: float | None = None  # SM throughput, % of peak
    occupancy_pct: float | None = None  # achieved occupancy
    registers: float | None = None


class KernelProfile(_Model):
    """What Nsight Compute measured of one candidate's kernels."""

    kernels: list[KernelStat] = []
    hot_lines: list[HotLine] = []


class CandidateResult(_Model):
    """One candidate's journey through build, gate and timing."""

    id: str
    origin: str
    round: int = 0
    parent: str | None = None
    status: Status
    reason: str = ""
    stage: Stage | None = None  # the stage that decided the status (None: not judged, as when cancelled first)
    trusted: bool = False  # redline's own code (a built-in variant), run without the untrusted code's limits
    median_s: float | None = None
    ci95_s: tuple[float, float] | None = None
    speedup: float | None = None
    speedup_ci95: tuple[float, float] | None = None
    first_seen_speedup: float | None = None  # captured inputs: on calls the candidate had not run before
    pair_speedups: list[float] = []  # a small win timed in several pairs of fresh workers: each pair's speedup
    shapes_checked: list[str] = []  # edge variants of the inputs (other shapes, layouts) it matched the reference on
    # incorrect at an edge variant only: the inputs (sandbox/redline_worker/keys.py) it matched the reference
    # on, at which a guarded specialisation may dispatch to it where redline.toml allows specialising
    correct_only_at: list[str] = []
    baseline_median_s: float | None = None
    code: str = ""
    error_tail: str = ""
    cpu_s: float | None = None
    approach: str = ""
    gpu: dict[str, float | str] | None = None  # device name, clocks, temperature during timing (NVML)
    energy_j_per_call: float | None = None
    baseline_energy_j_per_call: float | None = None
    energy_j: float | None = None  # measured over the whole timing, candidate and baseline together
    eval_s: float | None = None  # wall time the evaluation held its device (build, gate, timing)
    host: str = ""  # where it was measured
    hardware: str = ""  # what it was measured on (GPU or CPU model): speedups compare only within one
    kernel_profile: KernelProfile | None = None  # Nsight Compute, for verified CUDA candidates where ncu exists
    sanitizer: str | None = None  # compute-sanitizer's verdict on a verified CUDA candidate (or why it did not run)


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


class FileEdit(_Model):
    """Another file a winner changes (its project's dependencies), as the whole new text."""

    path: str
    sha256: str  # of the file when the edit was made: written only over those bytes
    text: str


class Winner(_Model):
    id: str
    speedup: float  # against the target as written (eager)
    speedup_ci95: tuple[float, float]
    diff: str  # the target's file, then each of `files`
    needs: list[str] = []  # distributions the winner imports that the module did not (numba, cython)
    files: list[FileEdit] = []  # pyproject.toml with `needs` added to its dependencies, where it has that list
    # For torch targets: the winner timed head-to-head against torch.compile of the target.
    vs_compile_speedup: float | None = None
    vs_compile_ci95: tuple[float, float] | None = None
    stronger_baseline: str = "eager"  # "torch.compile" where it is faster than the target as written
    speedup_vs_stronger: float | None = None  # the speedup against the stronger of the two


class TargetInfo(_Model):
    file: str
    function: str
    line: int
    end_line: int = 0
    sha256: str = ""  # of the file when the run began: a winner applies only to that content


class Cost(_Model):
    wall_s: float = 0.0
    candidates: int = 0
    tokens: int = 0
    accepted_rate: float = 0.0
    device_s: float = 0.0  # evaluation time summed over candidates (GPU-seconds on CUDA, core-seconds on CPU)
    energy_j: float | None = None  # NVML energy over all timed windows, where measured


class Regression(_Model):
    """The project's tests run against the winner (scratch copy of the workspace)."""

    ran: bool
    passed: bool
    command: list[str]
    output_tail: str = ""
    candidate: str = ""


class Stopped(_Model):
    """Why a run stopped before judging any candidate: `unsupported` where redline cannot compare what
    the target returns or changes (its own limit), `error` for a bad target, inputs or setting."""

    status: Literal["unsupported", "error"]
    reason: str


class ProposerUse(_Model):
    """What one proposer did in a run: how many candidates it proposed, or why it was not asked."""

    name: str
    proposed: int = 0
    skipped: str | None = None  # why it does not apply to this target (set before it runs)


class Report(_Model):
    """The optimise report (`--json REPORT`)."""

    target: TargetInfo
    device: str
    isolation: str
    baseline: Interval | None
    candidates: list[CandidateResult]
    winner: Winner | None
    regression: Regression | None = None
    cost: Cost = Cost()
    run_id: str = ""
    notes: list[str] = []
    backend: str = "local"
    hardware: str = ""  # the hardware the winner and baseline were measured on
    inputs: InputsInfo | None = None  # where the inputs came from
    bound: str = ""  # on CUDA, what limits the target: launch-bound, memory-bound or compute-bound
    cancelled: bool = False  # stopped by the user (Ctrl-C, the editor's cancel); what was verified before stands
    stopped: Stopped | None = None  # the run stopped before judging any candidate, and why
    proposers: list[ProposerUse] = []  # each proposer asked, in the order asked, or skipped with its reason
