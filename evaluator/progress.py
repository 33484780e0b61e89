"""What a run reports while it goes, as typed events, and the one way they are put into words.

The CLI, the language server and the MCP server each show these events their own way (a terminal
line, `$/progress`, a progress notification), all with the words `describe` gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class CandidateStarted:
    id: str
    origin: str
    round: int


@dataclass(frozen=True)
class CandidateDone:
    id: str
    status: str
    reason: str
    speedup: float | None
    tried: int  # candidates with a result so far
    best: float | None  # the best verified speedup so far
    round: int


@dataclass(frozen=True)
class RegressionStarted:
    id: str  # a candidate's id, or "the original"


@dataclass(frozen=True)
class VersusCompile:
    id: str


@dataclass(frozen=True)
class SanitizerStarted:
    id: str


@dataclass(frozen=True)
class ProfileStarted:
    id: str


@dataclass(frozen=True)
class ProposerFailed:
    proposer: str
    error: str


Event = (CandidateStarted | CandidateDone | RegressionStarted | VersusCompile | SanitizerStarted | ProfileStarted
         | ProposerFailed)
ProgressFn = Callable[[Event], None]


def describe(event: Event, reason_chars: int = 160) -> str:
    """One line for `event`, the same in every front end."""
    if isinstance(event, CandidateStarted):
        return f"round {event.round}: evaluating {event.id} ({event.origin})"
    if isinstance(event, CandidateDone):
        best = f"{event.best:.2f}x" if event.best is not None else "none yet"
        return (f"round {event.round} · {event.tried} tried · {event.id}: {event.status} — "
                f"{event.reason[:reason_chars]} · best verified {best}")
    if isinstance(event, RegressionStarted):
        return f"running the project's tests on {event.id}"
    if isinstance(event, VersusCompile):
        return f"timing {event.id} against torch.compile of the target"
    if isinstance(event, SanitizerStarted):
        return f"checking {event.id} under compute-sanitizer"
    if isinstance(event, ProfileStarted):
        return f"profiling {event.id} with Nsight Compute"
    return f"proposer {event.proposer} failed: {event.error}"


def silent(event: Event) -> None:
    """A progress function that shows nothing."""
