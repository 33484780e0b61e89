"""Where candidates come from: files, built-in transformations, an LLM."""

from __future__ import annotations

from dataclasses import dataclass, field

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


class Proposer:
    name = "proposer"

    def propose(self, ctx: Context) -> list[Proposal]:
        raise NotImplementedError
