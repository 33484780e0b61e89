"""Nsight Compute on a candidate: what its kernels do, for the next prompt and the report.

The candidate runs in its sandboxed worker under `ncu` (a small section set: speed of light,
occupancy, warp state, source counters; `--clock-control none`, since clocks cannot be locked on
shared machines), limited to the kernels launched inside the worker's `redline_call` NVTX range.
The report is read by redline.profilers' Nsight Compute reader and boiled down per kernel: time,
memory and compute throughput as shares of peak, achieved occupancy, and the source lines with
the most warp-stall samples and their main stall reason.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from redline.profilers import ParseError
from redline.profilers.model import Profile
from redline.profilers.nsight_compute import read_ncu_rep

from .models import HotLine, KernelProfile, KernelStat

SECTIONS = ("SpeedOfLight", "Occupancy", "WarpStateStats", "SourceCounters")
REPORT = "kernels"  # file name (without .ncu-rep) in the worker's scratch


def ncu_path() -> str | None:
    return shutil.which("ncu")


def ncu_prefix(ncu: str, launches: int = 24) -> tuple[str, ...]:
    args = [ncu, "--clock-control", "none", "--target-processes", "all", "--nvtx", "--nvtx-include", "redline_call/",
            "--import-source", "yes", "--launch-count", str(launches), "-f", "-o", f"{{scratch}}/{REPORT}"]
    for section in SECTIONS:
        args += ["--section", section]
    return tuple(args)


def read_report(scratch: Path) -> Profile | None:
    path = scratch / f"{REPORT}.ncu-rep"
    if not path.exists():
        return None
    try:
        return read_ncu_rep(path)
    except ParseError:
        return None


# Nsight Compute's warp-stall reasons, in words a prompt (and a reader) can act on.
STALLS = {"long_sb": "long scoreboard: waiting on global/local memory", "short_sb": "short scoreboard: shared memory "
          "or special-function results", "math": "math pipe throttle", "wait": "fixed-latency dependency",
          "not_selected": "not selected (other warps issued)", "selected": "issuing", "mio": "MIO queue throttle",
          "lg": "LSU queue throttle: too many global memory instructions", "barrier": "waiting at a barrier",
          "membar": "memory barrier", "drain": "draining stores at exit", "imc": "instruction cache miss",
          "dispatch": "dispatch stall", "no_inst": "no instruction fetched", "branch_resolving": "branch resolving",
          "tex": "texture unit throttle", "sleeping": "sleeping"}


def _stall_reason(metrics: dict[str, float]) -> str:
    reasons = {k.removeprefix("stall_"): v for k, v in metrics.items() if k.startswith("stall_")
               and k not in ("stall_selected", "stall_not_selected")}
    if not reasons:
        return ""
    top = max(reasons, key=lambda k: reasons[k])
    total = metrics.get("Warp Stall Sampling (All Samples)") or sum(reasons.values())
    share = f" ({reasons[top] / total:.0%} of samples)" if total else ""
    return STALLS.get(top.removesuffix("_throttle"), top) + share


def summarise(profile: Profile, top_lines: int = 3) -> KernelProfile:
    """Per kernel, slowest first: time and the figures a kernel author acts on; and the source
    lines where warps stall most, with the main reason."""
    out = []
    for name, m in profile.kernel_metrics.items():
        if "Duration" not in m:
            continue
        out.append(KernelStat(name=name, time_us=m["Duration"] * 1e6, memory_pct=m.get("Memory Throughput"),
                              compute_pct=m.get("Compute (SM) Throughput"), occupancy_pct=m.get("Achieved Occupancy"),
                              registers=m.get("Registers Per Thread")))
    out.sort(key=lambda k: -k.time_us)
    samples = "Warp Stall Sampling (All Samples)"
    lines = sorted(profile.line_metrics.items(), key=lambda kv: -kv[1].get(samples, 0.0))
    hot = [HotLine(file=Path(f).name, line=ln, stall_samples=m[samples], reason=_stall_reason(m))
           for (f, ln), m in lines[:top_lines] if m.get(samples, 0.0) > 0]
    return KernelProfile(kernels=out, hot_lines=hot)


def describe(kp: KernelProfile, limit: int = 3) -> str:
    """One line for a prompt: each kernel's time and shares of peak, and where warps stall."""
    parts = []
    for k in kp.kernels[:limit]:
        bits = [f"{k.name[:60]} {k.time_us:.1f} us"]
        if k.memory_pct is not None:
            bits.append(f"memory {k.memory_pct:.0f}% of peak")
        if k.compute_pct is not None:
            bits.append(f"SM {k.compute_pct:.0f}%")
        if k.occupancy_pct is not None:
            bits.append(f"occupancy {k.occupancy_pct:.0f}%")
        parts.append(", ".join(bits))
    if kp.hot_lines:
        parts.append("warps stall most at " + ", ".join(f"{h.file}:{h.line}" + (f" ({h.reason})" if h.reason else "")
                                                        for h in kp.hot_lines))
    return "; ".join(parts)
