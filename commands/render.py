"""How a run looks on a terminal: a live progress line (plain lines when piped), and the summary."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from redline.evaluator.models import ProposerUse, Report
from redline.evaluator.progress import CandidateDone, CandidateStarted, Event, ProposerFailed, describe


class Progress:
    """A live line on a terminal, plain lines when piped."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream: TextIO = stream or sys.stderr
        self.tty = self.stream.isatty()

    def __call__(self, event: Event) -> None:
        line = "  " + describe(event)
        if isinstance(event, CandidateStarted):
            # On a terminal the line is replaced by the result; in a log it shows when each one began.
            print("\r\x1b[2K" + line + "..." if self.tty else line + "...", end="" if self.tty else "\n",
                  file=self.stream, flush=True)
        elif isinstance(event, CandidateDone):
            print(("\r\x1b[2K" if self.tty else "") + line, file=self.stream, flush=True)
        elif isinstance(event, ProposerFailed):
            print(line, file=self.stream, flush=True)
        else:  # something begins: the project's tests, the head-to-head
            print(line + "...", file=self.stream, flush=True)


def print_summary(report: Report) -> None:
    if report.baseline:
        b = report.baseline
        print(f"baseline: median {b.median_s * 1e3:.3f} ms (95% CI {b.ci95_s[0] * 1e3:.3f}-{b.ci95_s[1] * 1e3:.3f}) "
              f"over {b.runs} calls")
    if report.inputs and report.inputs.source == "captured":
        i = report.inputs
        print(f"inputs: {i.calls} captured calls" + (f" ({i.excluded} excluded: the reference does not reproduce them)"
                                                    if i.excluded else "") + f", from `{' '.join(i.command)}`")
    counts: dict[str, int] = {}
    for c in report.candidates:
        counts[c.status] = counts.get(c.status, 0) + 1
    print("candidates: " + (", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "none"))
    if report.proposers:
        print("proposers: " + "; ".join(describe_use(u) for u in report.proposers))
    for note in report.notes:
        print(f"note: {note}")
    if report.regression and report.regression.ran:
        print(f"project tests ({' '.join(report.regression.command)}): "
              + ("passed" if report.regression.passed else "failed"))
    elif report.regression is not None and report.winner is not None:
        print(f"project tests: none ran ({report.regression.output_tail}); set test_command in redline.toml "
              "to run them on the winner")
    if report.winner is None:
        print("no candidate was verified faster than the baseline; nothing to apply")
        if not report.stopped and not report.cancelled:
            print(next_steps(report))
        return
    w = report.winner
    if w.needs:
        where = ", ".join(Path(f.path).name for f in w.files)
        print(f"the winner needs {', '.join(w.needs)} where the program runs"
              + (f" (added to {where}'s dependencies in the diff)" if where else ""))
    print(f"{'best so far (cancelled)' if report.cancelled else 'winner'} {w.id}: {w.speedup:.2f}x faster "
          f"(95% CI {w.speedup_ci95[0]:.2f}-{w.speedup_ci95[1]:.2f})")
    if w.vs_compile_speedup is not None and w.vs_compile_ci95 is not None:
        print(f"against torch.compile of the target: {w.vs_compile_speedup:.2f}x (95% CI {w.vs_compile_ci95[0]:.2f}-"
              f"{w.vs_compile_ci95[1]:.2f}); the stronger baseline is {w.stronger_baseline}")
    winner = next((c for c in report.candidates if c.id == w.id), None)
    if winner is not None and winner.kernel_profile is not None:
        from redline.evaluator.kernel_profile import describe as describe_kernels

        print(f"Nsight Compute: {describe_kernels(winner.kernel_profile)}")
    print(w.diff, end="" if w.diff.endswith("\n") else "\n")


def describe_use(use: ProposerUse) -> str:
    if use.skipped is not None:
        return f"{use.name} skipped ({use.skipped})"
    return f"{use.name} {use.proposed} candidate{'s' if use.proposed != 1 else ''}"


def next_steps(report: Report) -> str:
    """What else the user can try when nothing won: the proposers this run did not have."""
    used = {u.name for u in report.proposers}
    steps = []
    if "llm" not in used:
        steps.append("an LLM endpoint (--base-url URL --model M, or OPENAI_BASE_URL and REDLINE_MODEL)")
    if "files" not in used:
        steps.append("your own candidates (--candidates DIR; the file format is in docs/cli.md, \"Candidate files\")")
    return "to go further, give " + " or ".join(steps) if steps else "no proposer found a faster version"
