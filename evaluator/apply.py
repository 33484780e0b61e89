"""Applying a finished run's winner to the file, only if the file is what the run saw."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import ValidationError

from .models import Report
from .target import TargetError, apply_candidate, load_target


class ApplyRefused(Exception):
    """The winner cannot be applied; the message says why."""


def run_report(runs_dir: Path, run_id: str) -> Report:
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise ApplyRefused(f"{run_id!r} is not a run id")
    path = runs_dir / run_id / "report.json"
    if not path.is_file():
        raise ApplyRefused(f"no run {run_id} under {runs_dir}")
    try:
        return Report.model_validate_json(path.read_text())
    except ValidationError as exc:
        raise ApplyRefused(f"{path}: not a redline report ({exc.errors()[0]['msg']})")


def unchanged(file: Path, sha256: str) -> bool:
    """Whether `file`'s bytes are still those a run read (sha256), byte for byte: newlines included."""
    try:
        return hashlib.sha256(file.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


def apply_winner(report: Report) -> str:
    """Write the winner into its file; returns the file's path. Refuses a changed file."""
    if report.winner is None:
        raise ApplyRefused("the run has no verified winner")
    file = Path(report.target.file)
    if not file.is_file():
        raise ApplyRefused(f"{file}: no such file")
    if not unchanged(file, report.target.sha256):
        raise ApplyRefused(f"{file} changed since the run began; run the optimisation again")
    code = next((c.code for c in report.candidates if c.id == report.winner.id), None)
    if code is None:
        raise ApplyRefused(f"the report lacks the code of {report.winner.id}")
    try:
        target = load_target(f"{file}::{report.target.function}")
    except TargetError as exc:
        raise ApplyRefused(str(exc))
    new_source = apply_candidate(target, code)
    for edit in report.winner.files:  # the dependencies it adds: only over the bytes the run saw
        if not unchanged(Path(edit.path), edit.sha256):
            raise ApplyRefused(f"{edit.path} changed since the run began; run the optimisation again")
    file.write_bytes(new_source.encode())  # newlines as the file has them
    for edit in report.winner.files:
        Path(edit.path).write_text(edit.text)
    return str(file)
