"""Benchmark: what compiling a library's hot modules whole with Cython, unchanged, does to its workload:
the most the compile proposers could reach on these libraries without types, where redline compiles a
target with the functions and methods it calls.

Run: .venv/bin/python tests/perf/bench_compile_ceiling.py [--scale X] [--only NAME,NAME] [--share F]

For each library of the corpus (tests/corpus): its sources copied into a scratch workspace and its
workload profiled with py-spy; every module of its own code holding a function with at least `--share`
of the samples (its own time; default 1%) compiled whole with Cython (as the compile proposers do:
binding functions, annotations read as Python reads them) and built with the C compiler beside its
source, where Python's import takes the extension first. A module Cython rejects, or whose compiled
copy alone makes the workload fail or print something else, stays plain and is named with the reason. Then the workload runs plain and
with the compiled modules, alternating five times: its output compared, its median wall time as a ratio.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "corpus"))
from corpus import Library, alternate, bench_arguments, libraries, redline, workspace

CYTHON = [sys.executable, "-m", "cython", "-3", "-X", "binding=True", "-X", "annotation_typing=False"]


def hot_modules(lib: Library, work: Path, share: float) -> list[str]:
    """The library's files (relative to `work`) holding a function with at least `share` of the samples;
    none outside its packages (the standard library's are given as absolute paths)."""
    profile = sorted((work / ".redline").glob("profile-*.speedscope.json"))[-1]
    doc = json.loads(redline("hotspots", str(profile), "--json", "--top", "500", cwd=work).stdout)
    files = {h["file"] for h in doc["hotspots"] if h.get("self_fraction", 0) >= share and h.get("kind") == "cpu"}
    return sorted(f for f in files if not Path(f).is_absolute() and Path(f).parts[0] in lib.packages
                  and (work / f).is_file())


def build(module: Path) -> str | None:
    """`module` compiled with Cython and built beside it; None, or why it could not be."""
    done = subprocess.run([*CYTHON, str(module)], capture_output=True, text=True)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if ".py:" in line]
        return "Cython: " + (lines[0].split(": ", 1)[-1] if lines else "failed")
    so = module.with_suffix(sysconfig.get_config_var("EXT_SUFFIX"))
    cc = subprocess.run([*(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split(), "-shared", "-fPIC",
                         "-O2", "-I" + sysconfig.get_paths()["include"],
                         str(module.with_suffix(".c")), "-o", str(so)], capture_output=True, text=True)
    module.with_suffix(".c").unlink()
    return None if cc.returncode == 0 else f"C compiler: {cc.stderr.strip().splitlines()[-1:]}"


def one(lib: Library, root: Path, share: float, scale: float) -> tuple[str, float | None]:
    """The library's line of figures, and its workload's ratio (None where nothing was compiled)."""
    work = workspace(lib, root / lib.name)
    n = str(max(1, int(lib.scale * scale)))
    if redline("profile", "--", sys.executable, "work.py", n, cwd=work).returncode != 0:
        return f"{lib.name}: the profile failed", None
    compiled = work.parent / (work.name + "-compiled")
    shutil.copytree(work, compiled, ignore=shutil.ignore_patterns(".redline", "__pycache__"))
    kept: list[str] = []
    left: list[str] = []
    printed = subprocess.run([sys.executable, "work.py", n], cwd=work, capture_output=True, text=True).stdout
    for rel in hot_modules(lib, work, share):
        why = build(compiled / rel)
        why = why or differs(compiled, rel, n, printed)
        if why and (so := (compiled / rel).with_suffix(sysconfig.get_config_var("EXT_SUFFIX"))).exists():
            so.unlink()
        (kept if why is None else left).append(rel if why is None else f"{rel} ({why})")
    line = f"{lib.name}: {len(kept)} module(s) compiled ({', '.join(kept) or 'none'})"
    if left:
        line += f"; left plain: {'; '.join(left)}"
    if not kept:
        return line, None
    figures, _, ratio = alternate(lib, work, compiled, scale)
    return f"{line}\n  workload: {figures}", ratio if figures.startswith("outputs identical") else None


def differs(compiled: Path, rel: str, n: str, printed: str) -> str | None:
    """How the workload goes wrong with `rel` compiled alone (the extensions built for other modules set
    aside for this run), or None where it prints what it prints plain (`printed`)."""
    others = [p for p in compiled.rglob("*" + sysconfig.get_config_var("EXT_SUFFIX"))
              if p.with_suffix("").with_suffix(".py") != compiled / rel]
    for p in others:
        p.rename(p.with_name(p.name + ".off"))
    try:
        fast = subprocess.run([sys.executable, "work.py", n], cwd=compiled, capture_output=True, text=True)
    finally:
        for p in others:
            p.with_name(p.name + ".off").rename(p)
    if fast.returncode != 0:
        return "the workload fails with it compiled: " + (fast.stderr.strip().splitlines() or ["?"])[-1][:160]
    return None if fast.stdout == printed else "its compiled copy changes the workload's output"


def main() -> None:
    ap = bench_arguments()
    ap.add_argument("--share", type=float, default=0.01)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="redline-bench-ceiling-"))
    started = time.perf_counter()
    ratios = []
    for lib in libraries(args.only):
        line, ratio = one(lib, root, args.share, args.scale)
        print(line, flush=True)
        if ratio is not None:
            ratios.append(ratio)
    print(f"summary: {len(ratios)} workloads with their hot modules compiled, outputs identical: median "
          f"{statistics.median(ratios) if ratios else 0:.2f}x, geomean "
          f"{statistics.geometric_mean(ratios) if ratios else 0:.2f}x, best {max(ratios, default=0):.2f}x; "
          f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
