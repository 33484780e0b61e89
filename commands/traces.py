"""`redline profile`, `redline hotspots` and `redline diff`: traces recorded and read, hotspot tables printed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .exits import EXIT_INFRA, EXIT_OK, EXIT_USAGE


def profile(args: argparse.Namespace) -> int:
    from redline.profilers import ParseError
    from redline.profilers.record import AttachError, RecordError, Sampling, attach, default_output, record

    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if bool(cmd) == (args.pid is not None):
        print("redline profile: give the command after -- (redline profile -- python app.py) or a running "
              "process's --pid, not both", file=sys.stderr)
        return EXIT_USAGE
    if args.duration is not None and args.pid is None:
        print("redline profile: --duration is for --pid (a started command is sampled until it ends)", file=sys.stderr)
        return EXIT_USAGE
    out = args.output or default_output(args.format, Path.cwd())
    how = Sampling(fmt=args.format, rate=args.rate, subprocesses=args.subprocesses, native=args.native,
                   idle=args.idle, nonblocking=args.nonblocking)
    try:
        if args.pid is not None:
            print(f"sampling process {args.pid}" + (f" for {args.duration:g} s" if args.duration else
                                                    " until Ctrl-C"), file=sys.stderr)
            rc = attach(args.pid, out, how, args.duration)
        else:
            rc = record(cmd, out, how)
    except AttachError as exc:
        print(f"redline profile: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RecordError as exc:
        print(f"redline profile: {exc}", file=sys.stderr)
        return EXIT_INFRA
    print(f"trace written to {out}")
    from redline.evaluator.inputs.store import remember_profile

    if cmd:
        remember_profile(Path.cwd(), cmd, out)
    try:
        print_table([out], Path.cwd(), args.top)
    except ParseError as exc:
        print(f"redline profile: {exc}", file=sys.stderr)
    return rc



def hotspots(args: argparse.Namespace) -> int:
    from redline.profilers import ParseError, report

    try:
        if args.json:
            doc = report(list(args.traces), args.root, args.top)
            print(doc.model_dump_json(indent=2))
        else:
            print_table(list(args.traces), args.root, args.top)
    except ParseError as exc:
        print(f"redline hotspots: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK



def diff_traces(args: argparse.Namespace) -> int:
    from redline.profilers import ParseError
    from redline.profilers.diff import diff, render

    try:
        doc = diff([args.before], [args.after], args.root, args.top)
    except ParseError as exc:
        print(f"redline diff: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(doc.model_dump_json(indent=2) if args.json else render(doc))
    return EXIT_OK



def fmt_weight(w: float, unit: str) -> str:
    if unit == "seconds":
        return f"{w * 1e3:.1f}ms" if w < 1 else f"{w:.2f}s"
    return f"{w:g}"


def print_table(traces: list[Any], root: Path, top: int) -> None:
    from redline.profilers import report

    doc = report(traces, root, None)
    for kind in ("cpu", "gpu"):
        rows = [h for h in doc.hotspots if h.kind == kind][:top]
        if not rows:
            continue
        total = doc.totals.get(kind, 0.0)
        print(f"\n{kind.upper()} hotspots — total {fmt_weight(total, doc.unit)} ({doc.unit})")
        print(f"{'self':>6} {'total':>6} {'self wt':>9}  function (file:line)")
        for h in rows:
            where = f"{h.file}:{h.line}" if h.file else "(no source)"
            extra = ""
            if h.kernels and kind == "gpu":
                k = h.kernels[0]
                extra = f"  [{len(h.kernels)} kernel(s); top {k.name[:40]} x{k.count}]"
            print(f"{h.self_fraction:6.1%} {h.total_fraction:6.1%} {fmt_weight(h.self_weight, doc.unit):>9}  "
                  f"{h.function} ({where}){extra}")
