"""`redline capture`: run a command and keep real calls of hot functions; `--clear` deletes them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .exits import EXIT_OK, EXIT_USAGE


def main(args: argparse.Namespace) -> int:
    from redline.evaluator.inputs.capture import CaptureError, capture_target, hot_targets, run_capture
    from redline.evaluator.inputs.store import StoreError, command_to_capture

    root = Path.cwd()
    if args.clear:
        return _clear_captures(args.target, root)
    try:
        cmd, cwd = command_to_capture(root, args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd,
                                      "give the command after --, e.g. redline capture -- python app.py "
                                      "(no `redline profile` run here to take it from)")
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
    from redline.evaluator.inputs.capture import CaptureError, capture_target
    from redline.evaluator.inputs.store import clear_stores, store_dir

    try:
        folders = [store_dir(t.project_root, t.module_name, t.qualname) for t in map(capture_target, specs)]
    except CaptureError as exc:
        print(f"redline capture: {exc}", file=sys.stderr)
        return EXIT_USAGE
    gone = [p for f in folders if f.exists() for p in clear_stores(root, f)] if folders else clear_stores(root)
    print(f"deleted the captured calls of {len(gone)} function(s)" + "".join(f"\n  {p}" for p in gone))
    return EXIT_OK
