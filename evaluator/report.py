"""The run's record: its log under `.redline/runs/<run-id>/` (what resume reads back), the report
(JSON, its contract in docs/cli.md) and its markdown summary."""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from .models import CandidateResult, FileEdit, Interval, Report
from .proposers import Proposal
from .stats import median, median_ci
from .target import Target, TargetError


def unified_diff(target: Target, new_source: str, files: Sequence[FileEdit] = ()) -> str:
    """The winner's diff: the target's file, then each other file it changes (paths from the project root)."""
    name = target.file.name
    out = "".join(difflib.unified_diff(target.source.splitlines(keepends=True), new_source.splitlines(keepends=True),
                                       f"a/{name}", f"b/{name}"))
    for edit in files:
        path = Path(edit.path)
        rel = path.relative_to(target.project_root).as_posix() if path.is_relative_to(target.project_root) else str(path)
        out += "".join(difflib.unified_diff(path.read_text().splitlines(keepends=True),
                                            edit.text.splitlines(keepends=True), f"a/{rel}", f"b/{rel}"))
    return out


def interval(times: list[float]) -> Interval | None:
    if not times:
        return None
    return Interval(median_s=median(times), ci95_s=median_ci(times, 400), runs=len(times))


def verified(report: Report) -> str:
    """What the winner was checked on and what its edit adds, in a line: the inputs, the edge variants,
    the pairs of workers it was timed in, the project's tests, the dependencies it needs."""
    w = report.winner
    if w is None:
        return ""
    won = next((c for c in report.candidates if c.id == w.id), None)
    i = report.inputs
    if i is not None and i.source == "captured":
        parts = [f"checked on {i.calls} captured calls" + (f" ({i.excluded} excluded)" if i.excluded else "")]
    else:
        parts = ["checked on fresh inputs" + (f" ({i.detail})" if i is not None and i.detail else "")]
    if won is not None and won.shapes_checked:
        parts[0] += f" and {len(won.shapes_checked)} edge variant{'s' if len(won.shapes_checked) != 1 else ''}"
    if won is not None and won.pair_speedups:
        parts.append(f"timed in {len(won.pair_speedups)} pairs of fresh workers")
    reg = report.regression
    if reg is not None and reg.ran:
        parts.append(f"the project's tests {'passed' if reg.passed else 'failed'} ({' '.join(reg.command)})")
    elif reg is not None:
        parts.append("no project test ran")
    if w.needs:
        where = ", ".join(Path(f.path).name for f in w.files)
        parts.append(f"needs {', '.join(w.needs)}" + (f" (added to {where})" if where else ""))
    return "; ".join(parts)


def id_order(r: CandidateResult) -> tuple[int, str]:
    digits = r.id[1:]
    return (int(digits), r.id) if digits.isdigit() else (1 << 30, r.id)


class RunLog:
    """One run's folder: its target's identity, each candidate's code (and prompt and reply), results."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def begin(self, target: Target, resume: bool) -> list[CandidateResult]:
        """Create the folder (or, resuming, read back the candidates it logged)."""
        earlier = self._resumed(target) if resume else []
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)  # prompts and reports may quote captured calls: the user's data
        (self.folder / "candidates").mkdir(parents=True, exist_ok=True)
        if not resume:
            (self.folder / "meta.json").write_text(json.dumps({"file": str(target.file), "function": target.qualname,
                                                               "sha256": target.digest}))
        return earlier

    def _resumed(self, target: Target) -> list[CandidateResult]:
        """The candidates an earlier run logged, with their code; refuses a run of other code."""
        name = self.folder.name
        try:
            meta = json.loads((self.folder / "meta.json").read_text())
            results = self.folder / "results.jsonl"
            lines = results.read_text().splitlines() if results.exists() else []
        except (OSError, json.JSONDecodeError) as exc:
            raise TargetError(f"cannot resume {name}: {exc}")
        if meta.get("function") != target.qualname or meta.get("sha256") != target.digest:
            raise TargetError(f"cannot resume {name}: it optimised other code ({meta.get('function')} in a "
                              "different version of the file); start a new run")
        out = []
        for line in lines:
            entry = json.loads(line)
            code_path = self.folder / "candidates" / f"{entry['id']}.py"
            entry["code"] = code_path.read_text() if code_path.exists() else ""
            out.append(CandidateResult.model_validate(entry))
        return out

    def add(self, result: CandidateResult, prop: Proposal) -> None:
        (self.folder / "candidates" / f"{result.id}.py").write_text(prop.code)
        if prop.prompt or prop.reply:
            (self.folder / "candidates" / f"{result.id}.prompt.txt").write_text(prop.prompt)
            (self.folder / "candidates" / f"{result.id}.reply.txt").write_text(prop.reply)
        with (self.folder / "results.jsonl").open("a") as fh:
            fh.write(json.dumps(result.model_dump(exclude={"code"})) + "\n")

    def finish(self, report: Report) -> None:
        (self.folder / "report.json").write_text(report.model_dump_json(indent=2))
        (self.folder / "report.md").write_text(markdown(report))


def markdown(report: Report) -> str:
    lines = [f"# redline: {report.target.function} ({report.target.file})", ""]
    if report.baseline:
        lines.append(f"Baseline median {report.baseline.median_s * 1e3:.3f} ms over {report.baseline.runs} calls; "
                     f"isolation: {report.isolation}.")
    if report.inputs:
        lines.append(f"Inputs: {report.inputs.detail}.")
    lines += ["", "| id | origin | status | speedup | reason |", "|---|---|---|---|---|"]
    for c in report.candidates:
        sp = f"{c.speedup:.2f}x" if c.speedup else ""
        lines.append(f"| {c.id} | {c.origin} | {c.status} | {sp} | {c.reason.replace('|', '/')} |")
    lines.append("")
    if report.winner:
        w = report.winner
        lines += [f"**Winner {w.id}: {w.speedup:.2f}x** (95% CI {w.speedup_ci95[0]:.2f}-{w.speedup_ci95[1]:.2f})", "",
                  "```diff", w.diff.rstrip(), "```"]
    else:
        lines.append("No candidate was verified faster than the baseline.")
    return "\n".join(lines) + "\n"
