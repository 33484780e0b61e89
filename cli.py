"""The `redline` command line. Heavy modules are imported inside each command, so `--help` is fast."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from . import __version__

EXIT_OK, EXIT_USAGE, EXIT_INFRA = 0, 2, 3


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="redline", description="Hot code from real profiles, made faster by a verified search.")
    p.add_argument("--version", action="version", version=f"redline {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    pr = sub.add_parser("profile", help="record a command with py-spy and print its hotspots")
    pr.add_argument("-o", "--output", type=Path, help="trace file (default .redline/profile-TIME.speedscope.json)")
    pr.add_argument("--format", choices=("speedscope", "raw"), default="speedscope")
    pr.add_argument("--rate", type=int, default=100, help="samples per second (default 100)")
    pr.add_argument("--subprocesses", action="store_true", help="also sample child processes")
    pr.add_argument("--native", action="store_true", help="include native (C/C++) frames")
    pr.add_argument("--idle", action="store_true", help="include idle (waiting) threads")
    pr.add_argument("--nonblocking", action="store_true",
                    help="sample without pausing the program (less overhead; stacks may be torn)")
    pr.add_argument("--pid", type=int, default=None, help="attach to this running Python process instead of "
                    "starting CMD; stops on Ctrl-C or after --duration")
    pr.add_argument("--duration", type=float, default=None, help="with --pid: seconds to sample (default: until Ctrl-C)")
    pr.add_argument("--top", type=int, default=10)
    pr.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS...")

    df = sub.add_parser("diff", help="compare two profiles function by function")
    df.add_argument("before", type=Path, help="the trace before the change")
    df.add_argument("after", type=Path, help="the trace after it")
    df.add_argument("--root", type=Path, default=Path("."), help="workspace root that trace paths map onto")
    df.add_argument("--top", type=int, default=20)
    df.add_argument("--json", action="store_true", help="print the diff JSON (docs/formats.md)")

    hs = sub.add_parser("hotspots", help="print the hot functions of one or more traces")
    hs.add_argument("traces", nargs="+", type=Path)
    hs.add_argument("--root", type=Path, default=Path("."), help="workspace root that trace paths map onto")
    hs.add_argument("--top", type=int, default=20)
    hs.add_argument("--json", action="store_true", help="print the JSON document (docs/cli.md)")

    op = sub.add_parser("optimise", aliases=["optimize"], help="search for a verified faster version of one function")
    op.add_argument("target", help="FILE::QUALNAME")
    op.add_argument("--inputs", help="FILE::FUNC defining make_inputs(seed)")
    op.add_argument("--budget", type=int, default=None, help="most candidates to evaluate")
    op.add_argument("--rounds", type=int, default=None, help="most rounds of proposals")
    op.add_argument("--time-limit", type=float, default=None, help="wall-clock limit for the search, seconds")
    op.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL)")
    op.add_argument("--model", default=None, help="model name (default $REDLINE_MODEL)")
    op.add_argument("--refine-model", default=None, help="stronger model for the rounds after the first")
    op.add_argument("--llm-candidates", type=int, default=2, help="LLM candidates per round (default 2)")
    op.add_argument("--llm-choices", type=int, default=1, help="completions per request, the API's n (default 1)")
    op.add_argument("--llm-timeout", type=float, default=120.0, help="seconds per LLM request before it is retried")
    op.add_argument("--llm-retries", type=int, default=3, help="retries on timeouts, 429 and 5xx (default 3)")
    op.add_argument("--temperature", type=float, default=0.7)
    op.add_argument("--no-stream", action="store_true", help="ask for whole replies, not streamed ones")
    op.add_argument("--no-builtin", action="store_true", help="do not use the built-in proposers")
    op.add_argument("--builtin", dest="only_builtin", default=None, metavar="NAME[,NAME]",
                    help="only these built-in proposers (the summary's `proposers:` line names them)")
    op.add_argument("--candidates", type=Path, help="directory of candidate files to evaluate")
    op.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    op.add_argument("--backend", choices=("local", "ray"), default="local",
                    help="where candidates are evaluated: this machine, or a Ray cluster")
    op.add_argument("--ray-address", default=None,
                    help="the Ray cluster (HOST:PORT, ray://HOST:PORT or auto; default $RAY_ADDRESS, else a new local Ray)")
    op.add_argument("--jobs", type=int, default=None, help="most candidates evaluated at once (Ray; default: every free slot)")
    op.add_argument("--ray-pip", action="append", default=None, metavar="REQ",
                    help="a package the Ray workers install for this run (repeatable)")
    op.add_argument("--timeout", type=float, default=60.0, help="wall-clock deadline per sandbox request, seconds")
    op.add_argument("--json", dest="json_report", type=Path, help="write the report JSON here")
    op.add_argument("--apply", action="store_true", help="write the winner into FILE if it is unchanged")
    op.add_argument("--resume", metavar="RUN_ID", help="continue an earlier run (its log under .redline/runs/)")
    op.add_argument("--profile", dest="profile_trace", type=Path, help="trace whose hotspot data goes into prompts")

    ca = sub.add_parser("capture", help="run a command and keep real calls of hot functions as their inputs")
    ca.add_argument("--target", action="append", default=[], metavar="FILE::QUALNAME",
                    help="a function to capture (repeatable; default: the hottest of the latest trace)")
    ca.add_argument("--top", type=int, default=3, help="without --target: how many hot functions (default 3)")
    ca.add_argument("--calls", type=int, default=64, help="calls kept per function (default 64)")
    ca.add_argument("--max-mb", type=float, default=256.0, help="most MiB kept per function (default 256)")
    ca.add_argument("--duration", type=float, default=None, metavar="S",
                    help="stop the command after S seconds (SIGTERM, as a service manager does) and keep its calls")
    ca.add_argument("--clear", action="store_true",
                    help="delete the captured calls (of the --target functions, else all) and exit")
    ca.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS... (default: the last profiled command)")

    sv = sub.add_parser("serve", help="the language server on stdio")
    sv.add_argument("--stdio", action="store_true", help="use stdio (the only transport; accepted because LSP clients pass it)")
    mc = sub.add_parser("mcp", help="MCP server on stdio: hotspots and verified optimisation as tools for agents")
    mc.add_argument("--root", type=Path, default=Path("."), help="workspace root (default: the current directory)")
    dr = sub.add_parser("doctor", help="check what this machine gives redline, and how to fix what is missing")
    dr.add_argument("--json", action="store_true", help="print the checks as JSON")

    dm = sub.add_parser("demo", help="profile, show hotspots and optimise the bundled example, offline")
    dm.add_argument("--workdir", type=Path, default=None, help="where to copy the example (default a temp dir)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    handler = {"profile": _profile, "hotspots": _hotspots, "optimise": _optimise, "optimize": _optimise,
               "capture": _capture, "serve": _serve, "mcp": _mcp, "demo": _demo, "diff": _diff,
               "doctor": _doctor}[args.command]
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("redline: interrupted", file=sys.stderr)
        return 130


def _profile(args: argparse.Namespace) -> int:
    from .profilers import ParseError
    from .profilers.record import AttachError, RecordError, Sampling, attach, default_output, record

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
    from .evaluator.inputs.store import remember_profile

    if cmd:
        remember_profile(Path.cwd(), cmd, out)
    try:
        _print_table([out], Path.cwd(), args.top)
    except ParseError as exc:
        print(f"redline profile: {exc}", file=sys.stderr)
    return rc


def _capture(args: argparse.Namespace) -> int:
    from .evaluator.inputs.capture import CaptureError, capture_target, hot_targets, run_capture
    from .evaluator.inputs.store import StoreError, read_last_profile

    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    root = Path.cwd()
    if args.clear:
        return _clear_captures(args.target, root)
    try:
        cwd = root
        if not cmd:
            last = read_last_profile(root)
            if last is None:
                raise CaptureError("give the command after --, e.g. redline capture -- python app.py "
                                   "(no `redline profile` run here to take it from)")
            cmd, cwd = last.command, Path(last.cwd)
        if args.target:
            targets = [capture_target(t) for t in args.target]
        else:
            trace, targets = hot_targets(root, args.top)
            print(f"capturing the {len(targets)} hottest functions of {trace.name}: "
                  + ", ".join(t.spec for t in targets), file=sys.stderr)
        if args.duration is not None:
            print(f"running for {args.duration:g} s, then stopping it", file=sys.stderr)
        result = run_capture(targets, cmd, cwd, args.calls, args.max_mb, duration=args.duration)
    except (CaptureError, StoreError) as exc:
        print(f"redline capture: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for target, m, folder in result.manifests:
        print(f"{target.spec}: kept {m.calls_kept} of {m.calls_seen} calls ({len(m.signatures)} signatures) in "
              f"{folder}")
        for why, n in {**m.unrecordable, **m.dropped}.items():
            print(f"  {n} calls not kept: {why}")
    if result.exit_code != 0 and not result.stopped:
        print(f"redline capture: the command exited with {result.exit_code}; what it called was kept",
              file=sys.stderr)
        return result.exit_code
    if not any(m.calls_kept for _, m, _ in result.manifests):
        print("redline capture: the command never called " + ", ".join(t.spec for t, _, _ in result.manifests)
              + " in a way that could be kept", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _clear_captures(specs: list[str], root: Path) -> int:
    """`redline capture --clear`: delete stores, saying which."""
    from .evaluator.inputs.capture import CaptureError, capture_target
    from .evaluator.inputs.store import clear_stores, store_dir

    try:
        folders = [store_dir(t.project_root, t.module_name, t.qualname) for t in map(capture_target, specs)]
    except CaptureError as exc:
        print(f"redline capture: {exc}", file=sys.stderr)
        return EXIT_USAGE
    gone = [p for f in folders if f.exists() for p in clear_stores(root, f)] if folders else clear_stores(root)
    print(f"deleted the captured calls of {len(gone)} function(s)" + "".join(f"\n  {p}" for p in gone))
    return EXIT_OK


def _hotspots(args: argparse.Namespace) -> int:
    from .profilers import ParseError, report

    try:
        if args.json:
            doc = report(list(args.traces), args.root, args.top)
            print(doc.model_dump_json(indent=2))
        else:
            _print_table(list(args.traces), args.root, args.top)
    except ParseError as exc:
        print(f"redline hotspots: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _doctor(args: argparse.Namespace) -> int:
    from .commands.doctor import main as doctor

    return doctor(args.json)


def _diff(args: argparse.Namespace) -> int:
    from .profilers import ParseError
    from .profilers.diff import diff, render

    try:
        doc = diff([args.before], [args.after], args.root, args.top)
    except ParseError as exc:
        print(f"redline diff: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(doc.model_dump_json(indent=2) if args.json else render(doc))
    return EXIT_OK


def _fmt_weight(w: float, unit: str) -> str:
    if unit == "seconds":
        return f"{w * 1e3:.1f}ms" if w < 1 else f"{w:.2f}s"
    return f"{w:g}"


def _print_table(traces: list[Any], root: Path, top: int) -> None:
    from .profilers import report

    doc = report(traces, root, None)
    for kind in ("cpu", "gpu"):
        rows = [h for h in doc.hotspots if h.kind == kind][:top]
        if not rows:
            continue
        total = doc.totals.get(kind, 0.0)
        print(f"\n{kind.upper()} hotspots — total {_fmt_weight(total, doc.unit)} ({doc.unit})")
        print(f"{'self':>6} {'total':>6} {'self wt':>9}  function (file:line)")
        for h in rows:
            where = f"{h.file}:{h.line}" if h.file else "(no source)"
            extra = ""
            if h.kernels and kind == "gpu":
                k = h.kernels[0]
                extra = f"  [{len(h.kernels)} kernel(s); top {k.name[:40]} x{k.count}]"
            print(f"{h.self_fraction:6.1%} {h.total_fraction:6.1%} {_fmt_weight(h.self_weight, doc.unit):>9}  "
                  f"{h.function} ({where}){extra}")


def _optimise(args: argparse.Namespace) -> int:
    from .commands.optimise import run_optimise

    return run_optimise(args)


def _serve(args: argparse.Namespace) -> int:
    from .server.main import serve

    serve()
    return EXIT_OK


def _mcp(args: argparse.Namespace) -> int:
    try:
        from .mcp_server import serve
    except ImportError:
        print("redline mcp: the MCP SDK is not installed: pip install 'redline[mcp]'", file=sys.stderr)
        return EXIT_INFRA
    serve(args.root)
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from .commands.demo import run_demo

    return run_demo(args.workdir)


if __name__ == "__main__":
    sys.exit(main())
