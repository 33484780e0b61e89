"""Loaded profiles and their hotspots, indexed by workspace file, swapped in atomically."""

from __future__ import annotations

import glob
import threading
from dataclasses import dataclass, field
from pathlib import Path

from redline.evaluator.inputs.store import is_bookkeeping
from redline.profilers import Hotspot, ParseError, Profile, hotspots, read
from redline.profilers.source import Workspace


@dataclass(frozen=True)
class Snapshot:
    """What the features read: immutable, replaced whole when profiles change."""

    traces: tuple[str, ...] = ()
    by_file: dict[str, list[Hotspot]] = field(default_factory=dict)  # display path -> hotspots
    totals: dict[str, float] = field(default_factory=dict)
    unit: str = "seconds"
    samples: int = 0
    errors: tuple[str, ...] = ()


class ProfileStore:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.snapshot = Snapshot()
        self._lock = threading.Lock()
        self._explicit: list[str] = []

    def add_explicit(self, path: str) -> None:
        with self._lock:
            if path not in self._explicit:
                self._explicit.append(path)

    def trace_paths(self, globs: list[str]) -> list[str]:
        found: list[str] = []
        for pattern in globs:
            for p in sorted(glob.glob(str(self.root / pattern), recursive=True)):
                if Path(p).is_file() and p not in found and not is_bookkeeping(Path(p), self.root):
                    found.append(p)
        with self._lock:
            explicit = [p for p in self._explicit if p not in found]
        return found + explicit

    def load(self, globs: list[str]) -> Snapshot:
        """Read every trace (bad ones are reported, not fatal) and swap in the new snapshot."""
        paths = self.trace_paths(globs)
        merged = Profile()
        errors: list[str] = []
        ok: list[str] = []
        for p in paths:
            try:
                merged.merge(read(p))
                ok.append(p)
            except ParseError as exc:
                errors.append(str(exc))
            except OSError as exc:
                errors.append(f"{p}: {exc.strerror or exc}")
        by_file: dict[str, list[Hotspot]] = {}
        if ok:
            for h in hotspots(merged, self.root, Workspace(self.root)):
                if h.file:
                    by_file.setdefault(h.file, []).append(h)
        samples = sum(e.count for t in merged.weights.values() for e in t.values())
        totals: dict[str, float] = {k: merged.total(k) for k in merged.weights}
        snap = Snapshot(tuple(ok), by_file, totals, merged.unit, samples, tuple(errors))
        with self._lock:
            self.snapshot = snap
        return snap

    def for_path(self, path: Path) -> list[Hotspot]:
        snap = self.snapshot
        try:
            key = path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            key = str(path.resolve())
        return snap.by_file.get(key, [])
