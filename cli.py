"""The `redline` command line: it parses the arguments and runs the command's module under commands/."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

from . import __version__
from .commands.exits import EXIT_CANCELLED, EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="redline", description="Hot code from real profiles, made faster by a verified search.")
    p.add_argument("--version", action="version", version=f"redline {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for add in (_profile_args, _diff_args, _hotspots_args, _optimise_args, _capture_args, _server_args, _demo_args):
        add(sub)
    return p

def _profile_args(sub: Any) -> None:
    """`redline profile`: a started command or a running process, sampled with py-spy."""
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

def _diff_args(sub: Any) -> None:
    """`redline diff BEFORE AFTER`."""
    df = sub.add_parser("diff", help="compare two profiles function by function")
    df.add_argument("before", type=Path, help="the trace before the change")
    df.add_argument("after", type=Path, help="the trace after it")
    df.add_argument("--root", type=Path, default=Path("."), help="workspace root that trace paths map onto")
    df.add_argument("--top", type=int, default=20)
    df.add_argument("--json", action="store_true", help="print the diff JSON (docs/formats.md)")

def _hotspots_args(sub: Any) -> None:
    """`redline hotspots TRACE...`."""
    hs = sub.add_parser("hotspots", help="print the hot functions of one or more traces")
    hs.add_argument("traces", nargs="+", type=Path)
    hs.add_argument("--root", type=Path, default=Path("."), help="workspace root that trace paths map onto")
    hs.add_argument("--top", type=int, default=20)
    hs.add_argument("--json", action="store_true", help="print the JSON document (docs/cli.md)")

def _optimise_args(sub: Any) -> None:
    """`redline optimise FILE::QUALNAME`: what is proposed, how it is judged, where the report goes."""
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

def _capture_args(sub: Any) -> None:
    """`redline capture [-- CMD]`."""
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

def _server_args(sub: Any) -> None:
    """`redline serve`, `redline mcp` and `redline doctor`."""
    sv = sub.add_parser("serve", help="the language server on stdio")
    sv.add_argument("--stdio", action="store_true", help="use stdio (the only transport; accepted because LSP clients pass it)")
    mc = sub.add_parser("mcp", help="MCP server on stdio: hotspots and verified optimisation as tools for agents")
    mc.add_argument("--root", type=Path, default=Path("."), help="workspace root (default: the current directory)")
    dr = sub.add_parser("doctor", help="check what this machine gives redline, and how to fix what is missing")
    dr.add_argument("--json", action="store_true", help="print the checks as JSON")

def _demo_args(sub: Any) -> None:
    """`redline demo`."""
    dm = sub.add_parser("demo", help="profile, show hotspots and optimise the bundled example, offline")
    dm.add_argument("--workdir", type=Path, default=None, help="where to copy the example (default a temp dir)")

# Each command's module under commands/ and its function, imported when the command runs (`--help` stays fast).
COMMANDS = {"profile": ("traces", "profile"), "hotspots": ("traces", "hotspots"), "diff": ("traces", "diff_traces"),
            "optimise": ("optimise", "main"), "optimize": ("optimise", "main"), "capture": ("capture", "main"),
            "serve": ("serve", "serve_lsp"), "mcp": ("serve", "serve_mcp"), "doctor": ("doctor", "from_args"),
            "demo": ("demo", "from_args")}


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    module, name = COMMANDS[args.command]
    handler = getattr(importlib.import_module(f"{__package__}.commands.{module}"), name)
    try:
        return int(handler(args))
    except KeyboardInterrupt:
        print("redline: interrupted", file=sys.stderr)
        return EXIT_CANCELLED


if __name__ == "__main__":
    sys.exit(main())
