"""`redline demo`: the whole loop on the bundled example, offline."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from redline.evaluator.run import LLMOptions, RunOptions, execute
from redline.evaluator.target import load_target
from redline.profilers import report as hotspot_report
from redline.profilers.record import RecordError, Sampling, record

from .render import Progress, print_summary

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "demo"


def run_demo(workdir: Path | None = None) -> int:
    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="redline-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLE / "app.py", work / "app.py")
    (work / "redline.toml").write_text("# redline demo workspace\n")
    print(f"1. profiling the example with py-spy ({work / 'app.py'})")
    trace = work / ".redline" / "demo.speedscope.json"
    try:
        rc = record([sys.executable, str(work / "app.py")], trace, Sampling(rate=200))
    except RecordError as exc:
        print(f"redline demo: {exc}", file=sys.stderr)
        return 3
    if rc != 0:
        print(f"redline demo: the example exited with {rc}", file=sys.stderr)
        return 3
    doc = hotspot_report([trace], work)
    print("\n2. hotspots")
    for h in doc.hotspots[:5]:
        print(f"   {h.self_fraction:6.1%} self {h.total_fraction:6.1%} total  {h.function} ({h.file}:{h.line})")
    hottest = next((h for h in doc.hotspots if h.file == "app.py" and h.function not in ("<module>", "main")), None)
    if hottest is None:
        print("redline demo: no hot function of the example was sampled", file=sys.stderr)
        return 3
    print(f"\n3. optimising {hottest.function} ({hottest.self_fraction:.0%} of the samples), offline built-in proposers"
          + (" and the LLM at $OPENAI_BASE_URL" if os.environ.get("OPENAI_BASE_URL") else ""))
    target = load_target(f"{work / 'app.py'}::{hottest.function}")
    base_url = os.environ.get("OPENAI_BASE_URL")
    options = RunOptions(llm=LLMOptions(base_url=base_url) if base_url else None, budget=6, rounds=2, time_limit=90)
    result = execute(target, options, Progress())
    print("\n4. result")
    print_summary(result)
    print(f"\nrun log: {target.project_root / '.redline' / 'runs' / result.run_id}")
    return 0


def from_args(args: argparse.Namespace) -> int:
    return run_demo(args.workdir)
