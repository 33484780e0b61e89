"""The optimise loop and everything that runs candidate code: sandbox, gate, timing, report."""

from __future__ import annotations

from .models import CandidateResult, EvalSettings, Report, Winner

__all__ = ["CandidateResult", "EvalSettings", "Report", "Winner"]
