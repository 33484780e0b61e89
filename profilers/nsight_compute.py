"""Nsight Compute CSV pages (`ncu --import R --csv --page details|raw|source`), or an `.ncu-rep` via ncu.

`details`: one row per metric per launch; `raw`: one row per launch, one column per metric, the
second row holding units; `source --print-source cuda[,sass]`: per source line of each kernel,
warp-stall samples and instruction counts (SASS rows interleaved when asked for).
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from pathlib import Path

from .errors import ParseError
from .model import Frame, Profile

_TIME = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3,
         "s": 1.0, "second": 1.0}
# Raw-page metrics worth carrying into hovers, reports and prompts, under readable names.
RAW_METRICS = {
    "gpu__time_duration.sum": "Duration",
    "dram__bytes.sum": "DRAM Bytes",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "Memory Throughput",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "Compute (SM) Throughput",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "Achieved Occupancy",
    "launch__registers_per_thread": "Registers Per Thread",
}


def number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def import_report(path: Path, page: str) -> bytes:
    ncu = shutil.which("ncu")
    if ncu is None:
        raise ParseError(path, "whole file", "an Nsight Compute CSV export: ncu is not on PATH to read this "
                         f".ncu-rep; run `ncu --import {path.name} --csv --page details > out.csv` where Nsight "
                         "Compute is installed and pass the .csv")
    args = [ncu, "--import", str(path), "--csv", "--page", page]
    if page == "source":
        args += ["--print-source", "cuda,sass"]
    proc = subprocess.run(args, capture_output=True, timeout=600)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise ParseError(path, "whole file", f"a report ncu can import (ncu said: {tail[0]})")
    return proc.stdout


def read_ncu_rep(path: str | Path) -> Profile:
    path = Path(path)
    profile = read_ncu_csv(path, import_report(path, "details"))
    try:
        profile.merge(read_ncu_csv(path, import_report(path, "source")))
    except ParseError:
        pass  # a report without source counters still has its details
    return profile


def sniff(data: bytes) -> str | None:
    head = data[:2048].lstrip(b"\xef\xbb\xbf")
    if head.startswith((b'"File Name"', b'"File Path"')):
        return "source"
    first = head.split(b"\n", 1)[0]
    if first.startswith(b'"ID","Process ID"'):
        return "details" if b'"Metric Name"' in first and b'"Metric Value"' in first else "raw"
    return None


def read_ncu_csv(path: str | Path, data: bytes | None = None) -> Profile:
    path = Path(path)
    if data is None:
        data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseError(path, f"byte {exc.start}", "UTF-8 CSV")
    # ncu prints its own notes ("==PROF== ...") before the table when run directly.
    lines = [ln for ln in text.splitlines() if not ln.startswith("==")]
    try:
        # ncu does not escape quotes inside source text: the source page needs the lenient dialect.
        strict = sniff("\n".join(lines[:2]).encode()) != "source"
        rows = list(csv.reader(io.StringIO("\n".join(lines)), strict=strict))
    except csv.Error as exc:
        raise ParseError(path, "CSV", f"well-formed CSV ({exc})")
    kind = sniff("\n".join(lines[:2]).encode())
    if kind == "details":
        return _details(path, rows)
    if kind == "raw":
        return _raw(path, rows)
    if kind == "source":
        return _source(path, rows)
    raise ParseError(path, "line 1", "an Nsight Compute CSV page (details, raw or source)")


def _header(path: Path, rows: list[list[str]], need: tuple[str, ...]) -> dict[str, int]:
    head = {name: i for i, name in enumerate(rows[0])}
    missing = [n for n in need if n not in head]
    if missing:
        raise ParseError(path, "header", f"columns {', '.join(missing)}")
    return head


def _details(path: Path, rows: list[list[str]]) -> Profile:
    col = _header(path, rows, ("ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value"))
    launches: dict[str, tuple[str, dict[str, float]]] = {}
    for n, row in enumerate(rows[1:], 2):
        if len(row) < len(col) - 5:  # trailing rule columns may be absent
            raise ParseError(path, f"line {n}", f"{len(col)} columns (found {len(row)})")
        name = row[col["Metric Name"]]
        if not name:
            continue  # a rule row
        value = number(row[col["Metric Value"]])
        if value is None:
            continue  # "no data", "n/a", enum values
        unit = row[col["Metric Unit"]]
        launch = launches.setdefault(row[col["ID"]], (row[col["Kernel Name"]], {}))
        if name == "Duration":
            if unit not in _TIME:
                raise ParseError(path, f"line {n}", f"a time unit for Duration (found {unit!r})")
            launch[1]["Duration"] = value * _TIME[unit]
        else:
            launch[1][name] = value
    return _launches(path, launches.values())


def _launches(path: Path, launches: object) -> Profile:
    profile = Profile(unit="seconds", sources=[str(path)])
    sums: dict[str, dict[str, list[float]]] = {}
    for kernel, metrics in launches:  # type: ignore[attr-defined]
        if "Duration" not in metrics:
            raise ParseError(path, f"kernel {kernel}", "a Duration metric (the SpeedOfLight section)")
        if metrics["Duration"] < 0:
            raise ParseError(path, f"kernel {kernel}", "a non-negative Duration")
        profile.add("gpu", (profile.frame_id(Frame(kernel, None, None, "kernel")),), metrics["Duration"], 1)
        for k, v in metrics.items():
            sums.setdefault(kernel, {}).setdefault(k, []).append(v)
    for kernel, metrics in sums.items():
        profile.kernel_metrics[kernel] = {k: sum(v) / len(v) for k, v in metrics.items()}
    if not profile.weights:
        raise ParseError(path, "rows", "at least one profiled kernel launch")
    return profile


def _raw(path: Path, rows: list[list[str]]) -> Profile:
    col = _header(path, rows, ("ID", "Kernel Name", "gpu__time_duration.sum"))
    if len(rows) < 2:
        raise ParseError(path, "line 2", "a row of metric units")
    units = rows[1]
    launches = []
    for n, row in enumerate(rows[2:], 3):
        if len(row) != len(rows[0]):
            raise ParseError(path, f"line {n}", f"{len(rows[0])} columns (found {len(row)})")
        metrics: dict[str, float] = {}
        for raw_name, label in RAW_METRICS.items():
            if raw_name in col:
                v = number(row[col[raw_name]])
                if v is not None:
                    metrics[label] = v
        unit = units[col["gpu__time_duration.sum"]]
        if "Duration" not in metrics or unit not in _TIME:
            raise ParseError(path, f"line {n}", f"gpu__time_duration.sum as a time (unit {unit!r})")
        metrics["Duration"] *= _TIME[unit]
        launches.append((row[col["Kernel Name"]], metrics))
    return _launches(path, launches)


def _source(path: Path, rows: list[list[str]]) -> Profile:
    """Per-line counters, keyed by (file, line). A listing without counters (`--print-source cuda`
    alone) yields no metrics."""
    profile = Profile(unit="warp-stall samples", sources=[str(path)], annotation_only=True)
    file, function, head = None, None, None
    for n, row in enumerate(rows, 1):
        if not row:
            continue
        if row[0] in ("File Name", "File Path") and len(row) >= 2:
            file, head = row[1], None
            continue
        if row[0] == "Function Name" and len(row) >= 2:
            function = row[1]
            continue
        if row[0] == "Line No":
            head = {name: i for i, name in enumerate(row)}
            continue
        if file is None or head is None:
            raise ParseError(path, f"line {n}", "a 'File Path' and a 'Line No' header before source rows")
        if not row[0]:
            continue  # a SASS row under its source line
        if not row[0].isdigit():
            raise ParseError(path, f"line {n}", f"a line number (found {row[0]!r})")
        if len(row) < len(head):
            continue  # listing-only page: line number and text
        metrics: dict[str, float] = {}
        for name, i in head.items():
            if name in ("Line No", "Source", "Address"):
                continue
            if name.startswith(("Warp Stall Sampling", "Instructions Executed", "stall_")) and "(Not" not in name:
                v = number(row[i])
                if v:
                    metrics[name] = v
        if metrics:
            key = (file, int(row[0]))
            merged = profile.line_metrics.setdefault(key, {})
            for k, v in metrics.items():
                merged[k] = merged.get(k, 0.0) + v
            samples = metrics.get("Warp Stall Sampling (All Samples)", 0.0)
            if samples and function:
                frame = profile.frame_id(Frame(function, file, int(row[0]), "kernel"))
                profile.add("gpu", (frame,), samples, 0)
    return profile
