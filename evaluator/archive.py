"""The archive of a run: every result, and the verified ones ranked on the run's hardware."""

from __future__ import annotations

from .models import CandidateResult


class Archive:
    """Speedups are ratios against a baseline timed on the same device, but a ratio measured on one
    GPU (or CPU) model says little about another: the archive ranks only results measured on the
    run's hardware, the hardware of the first timed result."""

    def __init__(self) -> None:
        self.results: list[CandidateResult] = []
        self.hardware: str | None = None

    def add(self, r: CandidateResult) -> None:
        if self.hardware is None and r.hardware and r.speedup is not None:
            self.hardware = r.hardware
        self.results.append(r)

    def comparable(self, r: CandidateResult) -> bool:
        return not r.hardware or self.hardware is None or r.hardware == self.hardware

    def hardware_notes(self) -> list[str]:
        other = sorted({r.hardware for r in self.results if not self.comparable(r)})
        return [f"candidates measured on {h} are not ranked against those measured on {self.hardware}"
                for h in other]

    @property
    def verified(self) -> list[CandidateResult]:
        """Verified faster, fastest first."""
        return sorted((r for r in self.results if r.status == "ok" and self.comparable(r)),
                      key=lambda r: -(r.speedup or 0))

    @property
    def best(self) -> CandidateResult | None:
        v = self.verified
        return v[0] if v else None

    def find(self, cid: str) -> CandidateResult:
        return next(r for r in self.results if r.id == cid)

    def replace(self, r: CandidateResult) -> CandidateResult:
        """`r` in place of the result with its id (a later stage's verdict on it)."""
        self.results = [r if old.id == r.id else old for old in self.results]
        return r
