"""Trace readers (py-spy, speedscope, torch.profiler, Nsight Systems, Nsight Compute) and hotspots.

`read(path)` detects the format and returns one `Profile`; `hotspots(profile, root)` derives the
hot functions mapped onto the workspace at `root`.
"""

from __future__ import annotations

from pathlib import Path

from .errors import ParseError
from .hotspots import hotspots
from .model import Edge, Frame, Hotspot, HotspotReport, KernelUse, LineWeight, Profile, WeightKind

__all__ = ["Edge", "Frame", "Hotspot", "HotspotReport", "KernelUse", "LineWeight", "ParseError", "Profile",
           "detect_format", "hotspots", "read", "read_many", "report"]

FORMATS = ("speedscope", "pyspy-raw", "torch", "nsys-sqlite", "nsys-rep", "ncu-csv", "ncu-rep")


def detect_format(path: Path, head: bytes) -> str:
    """Name of the trace format, from the file name and its first bytes."""
    suffix = path.name.lower()
    if suffix.endswith(".nsys-rep") or suffix.endswith(".qdrep"):
        return "nsys-rep"
    if suffix.endswith(".ncu-rep"):
        return "ncu-rep"
    if head.startswith(b"SQLite format 3\x00"):
        return "nsys-sqlite"
    if head[:2] == b"\x1f\x8b":
        return "torch"
    from .nsight_compute import sniff

    if sniff(head):
        return "ncu-csv"
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped.startswith((b"{", b"[")):
        if b"speedscope" in head or (b'"shared"' in head and b'"profiles"' in head):
            return "speedscope"
        return "torch"
    if stripped and b"\x00" not in head[:4096]:
        return "pyspy-raw"
    raise ParseError(path, "first bytes", "a known trace format (" + ", ".join(FORMATS) + ")")


def read(path: str | Path) -> Profile:
    """Read one trace file of any supported format."""
    path = Path(path)
    if path.is_dir():
        raise ParseError(path, "path", "a trace file, but this is a directory")
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except FileNotFoundError:
        raise ParseError(path, "path", "an existing trace file (not found)")
    except OSError as exc:
        raise ParseError(path, "path", f"a readable file ({exc.strerror})")
    if not head:
        raise ParseError(path, "whole file", "a trace, but the file is empty")
    fmt = detect_format(path, head)
    if fmt == "nsys-rep":
        from .nsight_systems import export_report, read_nsys_sqlite

        profile = read_nsys_sqlite(export_report(path))
        profile.sources = [str(path)]
        return profile
    if fmt == "nsys-sqlite":
        from .nsight_systems import read_nsys_sqlite

        return read_nsys_sqlite(path)
    if fmt == "ncu-rep":
        from .nsight_compute import read_ncu_rep

        return read_ncu_rep(path)
    data = path.read_bytes()
    if fmt == "ncu-csv":
        from .nsight_compute import read_ncu_csv

        return read_ncu_csv(path, data)
    if fmt == "speedscope":
        from .speedscope import read_speedscope

        return read_speedscope(path, data)
    if fmt == "torch":
        from .torch_trace import read_torch_trace

        return read_torch_trace(path, data)
    from .pyspy_raw import read_raw

    return read_raw(path, data)


def read_many(paths: list[str | Path]) -> Profile:
    """Read several traces and merge them into one Profile."""
    merged = Profile()
    for p in paths:
        merged.merge(read(p))
    return merged


def report(paths: list[str | Path], root: str | Path = ".", top: int | None = None) -> HotspotReport:
    """The `redline hotspots --json` document for `paths`."""
    profile = read_many(paths)
    spots = hotspots(profile, root)
    kinds: tuple[WeightKind, ...] = ("cpu", "gpu")
    totals: dict[str, float] = {k: profile.total(k) for k in kinds if profile.weights.get(k)}
    primary = totals.get("cpu", totals.get("gpu", 0.0))
    return HotspotReport(traces=[str(p) for p in paths], total_weight=primary, unit=profile.unit,
                         totals=totals, hotspots=spots[:top] if top else spots)
