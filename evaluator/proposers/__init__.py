"""Where candidates come from: files, built-in transformations, an LLM."""

from __future__ import annotations

from dataclasses import dataclass, field

from redline.profilers import Hotspot

from ..models import CandidateResult
from ..target import Target


@dataclass
class Proposal:
    code: str
    origin: str
    approach: str = ""
    parent: str | None = None
    trusted: bool = False  # built-in code may start processes (torch.compile's compiler workers)
    prompt: str = ""
    reply: str = ""
    tokens: int = 0


@dataclass
class Context:
    """What a proposer knows when asked for the next round."""

    target: Target
    round: int
    history: list[CandidateResult] = field(default_factory=list)
    best: CandidateResult | None = None
    hotspot_note: str = ""
    inputs: list[str] = field(default_factory=list)  # each argument's type, dtype, shape (from the sandbox)
    hardware: str = ""  # what candidates are measured on
    device: str = "cpu"
    bound: str = ""  # on CUDA: what limits the target (launch-bound, memory-bound, compute-bound)
    inputs_from: str = "make_inputs"  # or "captured", "kernelbench"
    hot_lines: dict[int, float] = field(default_factory=dict)  # the file's line -> its share of the profile
    prompt_values: bool = False  # redline.toml allows captured values (real data) into an LLM's prompt
    baseline_s: float | None = None  # the original's median call time, once the run has timed it
    local_types: dict[str, list[str]] = field(default_factory=dict)  # the types the original's locals held
    # and those of the module's functions and the class's methods its calls reached, by `name@line`
    callee_types: dict[str, dict[str, list[str]]] = field(default_factory=dict)


class NotApplicable(Exception):
    """Raised by propose(): none of the proposer's candidates can be built for this target; the message
    says why (recorded as the proposer's skip reason, not as a failure)."""


class Proposer:
    name = "proposer"
    # Its prompts show Nsight Compute's profiles of the candidates so far: then each leading verified CUDA
    # candidate is profiled during the search; without such a proposer only the one offered is, after it.
    reads_kernel_profiles = False
    # It reads Context.local_types: then the probe traces the original's variables on the checked calls.
    reads_local_types = False

    def propose(self, ctx: Context) -> list[Proposal]:
        raise NotImplementedError

    def cancel(self) -> None:
        """The run was cancelled: stop what propose() is waiting on (an LLM request) now. Called from
        another thread; propose() may then raise, which the search expects."""

    def skip(self, ctx: Context) -> str | None:
        """Why this proposer does not apply to the target (asked once, before its first round), or None.
        A skipped proposer is not asked to propose; the report and the summary give its reason."""
        return None

    def rank(self, ctx: Context) -> int:
        """Where this proposer's candidates go in a round, lowest first (ties keep the given order):
        what the target's profile makes likely to win is tried first on a small budget."""
        return 0


def hot_lines(spot: Hotspot | None) -> dict[int, float]:
    """Each sampled line of the hotspot's function and its own share of the profile."""
    return {lw.line: lw.fraction for lw in spot.lines if lw.self_weight > 0} if spot is not None else {}


def hotspot_note(spot: Hotspot) -> str:
    """What a prompt says about the target's place in the profile: shares, hot lines, kernels."""
    parts = [f"{spot.kind.upper()} self {spot.self_fraction:.1%}, total {spot.total_fraction:.1%} of the profile"]
    if spot.callees:
        parts.append("calls " + ", ".join(f"{c.function} {c.fraction:.1%}" for c in spot.callees[:4]))
    hot = sorted((lw for lw in spot.lines if lw.self_weight > 0), key=lambda lw: -lw.self_weight)[:4]
    if hot:
        parts.append("hottest lines " + ", ".join(f"L{lw.line} ({lw.fraction:.1%})" for lw in hot))
    if spot.kernels:
        parts.append("kernels " + ", ".join(f"{k.name[:60]} x{k.count} {k.time_s * 1e6:.1f} us" for k in spot.kernels[:4]))
    return "; ".join(parts)
