"""`redline optimise`: progress on the terminal, the diff and speedup at the end, exit codes of DESIGN.md."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import TextIO

from pydantic import ValidationError

from .loop import Budget, optimise
from .models import EvalSettings, Limits, Report
from .pool import ClusterError
from .proposers import Proposer
from .proposers.builtin import builtin_proposers
from .proposers.files import FilesProposer
from .target import Target, TargetError, apply_candidate, load_target

EXIT_OK, EXIT_USAGE, EXIT_INFRA = 0, 2, 3


class Progress:
    """A live line on a terminal, plain lines when piped."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream: TextIO = stream or sys.stderr
        self.tty = self.stream.isatty()

    def __call__(self, event: str, data: dict[str, object]) -> None:
        out = self.stream
        if event == "candidate_start":
            line = f"  round {data['round']}: evaluating {data['id']} ({data['origin']})..."
            # On a terminal the line is replaced by the result; in a log it shows when each one began.
            print("\r\x1b[2K" + line if self.tty else line, end="" if self.tty else "\n", file=out, flush=True)
            return
        if event == "candidate_done":
            best = data.get("best")
            best_s = f"{best:.2f}x" if isinstance(best, float) else "none yet"
            line = (f"  round {data['round']} · {data['tried']} tried · {data['id']}: {data['status']} — "
                    f"{str(data['reason'])[:160]} · best verified {best_s}")
            print(("\r\x1b[2K" if self.tty else "") + line, file=out, flush=True)
        elif event == "regression":
            print(f"  running the project's tests on {data['id']}...", file=out, flush=True)
        elif event == "versus_compile":
            print(f"  timing {data['id']} against torch.compile of the target...", file=out, flush=True)
        elif event == "proposer_error":
            print(f"  proposer {data['proposer']} failed: {data['error']}", file=out, flush=True)


def build_proposers(args: argparse.Namespace, target: Target) -> list[Proposer]:
    proposers: list[Proposer] = []
    if args.candidates:
        if not args.candidates.is_dir():
            raise TargetError(f"{args.candidates}: --candidates expects a directory")
        proposers.append(FilesProposer(args.candidates))
    if not args.no_builtin:
        proposers += builtin_proposers()
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL")
    if base_url:
        from .proposers.llm import LLMProposer, LLMSettings

        model = args.model or os.environ.get("REDLINE_MODEL") or "gpt-4o-mini"
        try:
            settings = LLMSettings(base_url=base_url, model=model, refine_model=args.refine_model,
                                   candidates_per_round=args.llm_candidates, choices_per_request=args.llm_choices,
                                   timeout_s=args.llm_timeout, retries=args.llm_retries,
                                   temperature=args.temperature, stream=not args.no_stream)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise TargetError(f"LLM setting {err['loc'][0]}: {err['msg']}")
        proposers.append(LLMProposer(settings))
    return proposers


def print_summary(report: Report, target: Target) -> None:
    if report.baseline:
        b = report.baseline
        print(f"baseline: median {b.median_s * 1e3:.3f} ms (95% CI {b.ci95_s[0] * 1e3:.3f}-{b.ci95_s[1] * 1e3:.3f}) "
              f"over {b.runs} calls")
    counts: dict[str, int] = {}
    for c in report.candidates:
        counts[c.status] = counts.get(c.status, 0) + 1
    print("candidates: " + (", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "none"))
    for note in report.notes:
        print(f"note: {note}")
    if report.regression and report.regression.ran:
        print(f"project tests ({' '.join(report.regression.command)}): "
              + ("passed" if report.regression.passed else "failed"))
    if report.winner is None:
        print("no candidate was verified faster than the baseline; nothing to apply")
        return
    w = report.winner
    print(f"winner {w.id}: {w.speedup:.2f}x faster (95% CI {w.speedup_ci95[0]:.2f}-{w.speedup_ci95[1]:.2f})")
    if w.vs_compile_speedup is not None and w.vs_compile_ci95 is not None:
        print(f"against torch.compile of the target: {w.vs_compile_speedup:.2f}x (95% CI {w.vs_compile_ci95[0]:.2f}-"
              f"{w.vs_compile_ci95[1]:.2f}); the stronger baseline is {w.stronger_baseline}")
    winner = next((c for c in report.candidates if c.id == w.id), None)
    if winner is not None and winner.kernel_profile is not None:
        from .kernel_profile import describe

        print(f"Nsight Compute: {describe(winner.kernel_profile)}")
    print(w.diff, end="" if w.diff.endswith("\n") else "\n")


def profile_note(trace: Path, target: Target) -> str:
    """The target's hotspot in `trace`, as a line for the LLM's prompt."""
    from redline.profilers import report

    from .loop import hotspot_note

    rel = target.file.relative_to(target.project_root).as_posix()
    for spot in report([trace], target.project_root).hotspots:
        if spot.function == target.qualname and spot.file in (rel, str(target.file)):
            return hotspot_note(spot)
    return ""


def run_optimise(args: argparse.Namespace) -> int:
    try:
        target = load_target(args.target, args.inputs)
        proposers = build_proposers(args, target)
        note = ""
        if args.profile_trace:
            from redline.profilers import ParseError

            try:
                note = profile_note(args.profile_trace, target)
            except ParseError as exc:
                raise TargetError(str(exc))
    except TargetError as exc:
        print(f"redline optimise: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not proposers:
        print("redline optimise: no proposer: give --candidates DIR, an LLM endpoint (--base-url or "
              "OPENAI_BASE_URL), or drop --no-builtin", file=sys.stderr)
        return EXIT_INFRA
    budget = Budget(candidates=args.budget or 12, rounds=args.rounds or 3, wall_s=args.time_limit or 600.0)
    cancel = threading.Event()
    progress = Progress()
    print(f"optimising {target.qualname} in {target.file} (lines {target.fn.line}-{target.fn.end_line})", file=sys.stderr)
    make_pool = None
    if args.backend == "ray":
        from .ray_pool import ray_factory

        make_pool = ray_factory(args.ray_address, args.jobs, args.ray_pip)
    try:
        settings = EvalSettings(device=args.device, limits=Limits(wall_s=args.timeout))
        report = optimise(target, proposers, settings, budget, progress, cancel, resume=args.resume,
                          hotspot_note=note, make_pool=make_pool)
    except TargetError as exc:
        print(f"redline optimise: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ClusterError as exc:
        print(f"redline optimise: {exc}", file=sys.stderr)
        return EXIT_INFRA
    if args.json_report:
        args.json_report.write_text(report.model_dump_json(indent=2))
    print_summary(report, target)
    if "cancelled" in report.notes:
        print("redline optimise: cancelled; the report keeps what was verified before", file=sys.stderr)
        return 130
    if args.apply and report.winner:
        current = Path(target.file).read_text()
        if current != target.source:
            print(f"redline optimise: {target.file} changed since the run began; not applied", file=sys.stderr)
            return EXIT_OK
        winner = next(c for c in report.candidates if c.id == report.winner.id)
        Path(target.file).write_text(apply_candidate(target, winner.code))
        print(f"applied {winner.id} to {target.file}")
    return EXIT_OK
