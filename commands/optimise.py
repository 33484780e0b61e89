"""`redline optimise`: progress on the terminal, the diff and speedup at the end, exit codes of docs/cli.md."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from redline.evaluator.apply import ApplyRefused, apply_winner
from redline.evaluator.backends import ClusterError
from redline.evaluator.models import Report, Stopped, TargetInfo
from redline.evaluator.run import LLMOptions, NoProposer, RunOptions, execute
from redline.evaluator.sandbox import isolation_line
from redline.evaluator.target import Target, TargetError, UnsupportedTarget, load_target
from redline.profilers import Hotspot

from .exits import EXIT_CANCELLED, EXIT_INFRA, EXIT_OK, EXIT_USAGE
from .render import Progress, print_summary


def options(args: argparse.Namespace) -> RunOptions:
    """The run the flags ask for; the LLM endpoint defaults to $OPENAI_BASE_URL."""
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL")
    llm = LLMOptions(base_url=base_url, model=args.model or "", refine_model=args.refine_model,
                     candidates_per_round=args.llm_candidates, choices_per_request=args.llm_choices,
                     timeout_s=args.llm_timeout, retries=args.llm_retries, temperature=args.temperature,
                     stream=not args.no_stream) if base_url else None
    only = [n.strip() for n in args.only_builtin.split(",") if n.strip()] if args.only_builtin else None
    return RunOptions(builtin=not args.no_builtin, only=only, candidates=args.candidates, llm=llm, device=args.device,
                      candidate_timeout=args.timeout, budget=args.budget or 12, rounds=args.rounds or 3,
                      time_limit=args.time_limit or 600.0, backend=args.backend, ray_address=args.ray_address,
                      jobs=args.jobs, ray_pip=args.ray_pip)


def profile_spot(trace: Path, target: Target) -> Hotspot | None:
    """The target's hotspot in `trace` (its shares and hot lines go to the proposers)."""
    from redline.profilers import ParseError, report

    rel = target.file.relative_to(target.project_root).as_posix()
    try:
        spots = report([trace], target.project_root).hotspots
    except ParseError as exc:
        raise TargetError(str(exc))
    for spot in spots:
        if spot.function == target.qualname and spot.file in (rel, str(target.file)):
            return spot
    return None


@contextlib.contextmanager
def _ctrl_c_cancels(cancel: threading.Event) -> Iterator[None]:
    """Ctrl-C sets `cancel`, which the search reads between steps (it stops the running candidate, keeps
    what was verified and ends with a report), instead of raising wherever the main thread happens to
    be (inside a library call that does not expect it: Ray's, say). A second Ctrl-C interrupts at once."""
    def on_sigint(signum: int, frame: Any) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def stopped(args: argparse.Namespace, target: Target | None, exc: Exception, code: int = EXIT_USAGE) -> int:
    """Say why the run stopped before judging any candidate, on stderr and in the --json report; returns
    `code`, the exit code of docs/cli.md (2 for the target, its inputs or a setting; 3 for infrastructure)."""
    print(f"redline optimise: {exc}", file=sys.stderr)
    if args.json_report:
        status = "unsupported" if isinstance(exc, UnsupportedTarget) else "error"
        info = TargetInfo(file=str(target.file), function=target.qualname, line=target.fn.line,
                          end_line=target.fn.end_line, sha256=target.digest) if target is not None else \
            TargetInfo(file=args.target.split("::")[0], function=args.target.rpartition("::")[2], line=0)
        report = Report(target=info, device=args.device, isolation="", baseline=None, candidates=[], winner=None,
                        stopped=Stopped(status=status, reason=str(exc)))
        args.json_report.write_text(report.model_dump_json(indent=2))
    return code


def main(args: argparse.Namespace) -> int:
    target = None
    try:
        target = load_target(args.target, args.inputs)
        spot = profile_spot(args.profile_trace, target) if args.profile_trace else None
        opts = options(args)
    except TargetError as exc:
        return stopped(args, target, exc)
    print(f"optimising {target.qualname} in {target.file} (lines {target.fn.line}-{target.fn.end_line})", file=sys.stderr)
    print(isolation_line(opts.backend), file=sys.stderr)
    cancel = threading.Event()
    try:
        with _ctrl_c_cancels(cancel):
            report = execute(target, opts, Progress(), cancel, resume=args.resume, hotspot=spot)
    except TargetError as exc:
        return stopped(args, target, exc)
    except (NoProposer, ClusterError) as exc:
        return stopped(args, target, exc, EXIT_INFRA)
    if args.json_report:
        args.json_report.write_text(report.model_dump_json(indent=2))
    print_summary(report)
    if report.cancelled:
        print("redline optimise: cancelled; the report keeps what was verified before", file=sys.stderr)
        return EXIT_CANCELLED
    if args.apply and report.winner:
        try:
            path = apply_winner(report)
        except ApplyRefused as exc:
            print(f"redline optimise: not applied: {exc}", file=sys.stderr)
            return EXIT_OK
        print(f"applied {report.winner.id} to {path}")
    return EXIT_OK
