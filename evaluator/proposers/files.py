"""Candidates from a directory: one file each, plain code or an LLM-style reply with a fenced block."""

from __future__ import annotations

from pathlib import Path

from ..target import extract_code
from . import Context, Proposal, Proposer


class FilesProposer(Proposer):
    name = "files"

    def __init__(self, directory: Path) -> None:
        self.files = sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))

    def propose(self, ctx: Context) -> list[Proposal]:
        if ctx.round != 1:
            return []
        out = []
        for p in self.files:
            text = p.read_text(errors="replace")
            if p.suffix == ".py":
                code = text
            else:  # an LLM-style reply: its first fenced python block
                code = extract_code(text) or "# the reply held no ```python block\n"
            out.append(Proposal(code=code or "", origin=f"file:{p.name}", approach="file"))
        return out
