"""Loaded profiles and their hotspots, indexed by workspace file, swapped in atomically."""

from __future__ import annotations

import datetime
import glob
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from redline.evaluator.inputs.store import LastProfile, ProfileIndex, is_bookkeeping, read_profile_index
from redline.profilers import Hotspot, ParseError, Profile, hotspots, read
from redline.profilers.diff import FunctionChange
from redline.profilers.diff import diff as profile_diff
from redline.profilers.source import Workspace


@dataclass(frozen=True)
class Loaded:
    """One trace in the snapshot: what the editor says it loaded."""

    trace: str
    samples: int
    recorded_at: str  # ISO time: from `redline profile`'s index, else the file's modification time
    command: tuple[str, ...] = ()  # what `redline profile` ran to record it, where known
    written: float = 0.0  # the file's modification time, to the sub-second: what a change is compared with


@dataclass(frozen=True)
class Snapshot:
    """What the features read: immutable, replaced whole when profiles change."""

    traces: tuple[str, ...] = ()
    by_file: dict[str, list[Hotspot]] = field(default_factory=dict)  # display path -> hotspots
    totals: dict[str, float] = field(default_factory=dict)
    unit: str = "seconds"
    samples: int = 0
    errors: tuple[str, ...] = ()
    loaded: tuple[Loaded, ...] = ()
    superseded: tuple[str, ...] = ()  # older recordings of a command recorded again, not loaded


@dataclass(frozen=True)
class Comparison:
    """The loaded profile compared with an earlier trace (`redline.compareProfiles`), by function."""

    before: tuple[str, ...]
    changes: dict[tuple[str, str, str], FunctionChange]  # (kind, file, function) -> its change
    before_total_weight: float = 0.0  # the whole program, in each trace's unit
    after_total_weight: float = 0.0
    after: tuple[str, ...] = ()  # the traces compared with `before`
    unit: str = "seconds"  # of the weights
    order: tuple[FunctionChange, ...] = ()  # every change, largest self change first (as `redline diff`)
    files: tuple[tuple[str, int], ...] = ()  # each compared trace and its mtime_ns when compared

    def holds(self, loaded: tuple[str, ...]) -> bool:
        """Whether it still says what it said: its traces unchanged on disk and those it compared with
        `before` still loaded. A reload for a trace it already read (the editor's file watcher seeing the
        recording Profile again wrote) keeps it; a changed trace or another set loaded does not."""
        return set(self.after) <= set(loaded) and all(_mtime(p) == m for p, m in self.files)


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


class ProfileStore:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.snapshot = Snapshot()
        self.comparison: Comparison | None = None
        self._lock = threading.Lock()
        self._explicit: list[str] = []

    def add_explicit(self, path: str) -> None:
        with self._lock:
            if path not in self._explicit:
                self._explicit.append(path)

    def trace_paths(self, globs: list[str], index: ProfileIndex, merge: bool = False) -> tuple[list[str], list[str]]:
        """The traces to load, and those left out: older recordings of a command `redline profile`
        recorded again in the same folder (`index`; unless `merge`), which the newer one replaces. A
        trace the user loaded by name is always loaded."""
        matched: list[str] = []
        for pattern in globs:
            for p in sorted(glob.glob(str(self.root / pattern), recursive=True)):
                if Path(p).is_file() and p not in matched and not is_bookkeeping(Path(p), self.root):
                    matched.append(p)
        resolved = {str(Path(p).resolve()): p for p in matched}
        superseded = set() if merge else index.superseded(set(resolved))
        with self._lock:
            named = list(self._explicit)
        explicit = [p for p in named if p not in matched]
        left = [resolved[r] for r in resolved if r in superseded and resolved[r] not in named]
        return [p for p in matched if p not in left] + explicit, left

    def load(self, globs: list[str], merge: bool = False) -> Snapshot:
        """Read every trace (bad ones are reported, not fatal) and swap in the new snapshot."""
        index = read_profile_index(self.root)  # read once: which recordings replace which, and their commands
        paths, superseded = self.trace_paths(globs, index, merge)
        merged = Profile()
        errors: list[str] = []
        ok: list[str] = []
        loaded: list[Loaded] = []
        for p in paths:
            try:
                one = read(p)
                merged.merge(one)
                ok.append(p)
                loaded.append(_loaded(p, one, index.find(p)))
            except ParseError as exc:
                errors.append(str(exc))
            except OSError as exc:
                errors.append(f"{p}: {exc.strerror or exc}")
        by_file: dict[str, list[Hotspot]] = {}
        if ok:
            for h in hotspots(merged, self.root, Workspace(self.root)):
                if h.file:
                    by_file.setdefault(h.file, []).append(h)
        samples = _samples(merged)
        totals: dict[str, float] = {k: merged.total(k) for k in merged.weights}
        snap = Snapshot(tuple(ok), by_file, totals, merged.unit, samples, tuple(errors), tuple(loaded),
                        tuple(superseded))
        with self._lock:
            self.snapshot = snap
        return snap

    def compare(self, before: list[str], after: list[str] | None = None) -> Comparison:
        """Compare `after` (default: the loaded traces) with `before` (ParseError on a bad trace) and keep
        the comparison."""
        doc = profile_diff(list(before), list(after if after is not None else self.snapshot.traces), self.root)
        found = Comparison(tuple(before), {(c.kind, c.file, c.function): c for c in doc.functions},
                           doc.before_total_weight, doc.after_total_weight, tuple(doc.after), doc.after_unit,
                           tuple(doc.functions), tuple((p, _mtime(p)) for p in (*before, *doc.after)))
        self.comparison = found
        return found

    def change(self, h: Hotspot) -> FunctionChange | None:
        c = self.comparison
        return c.changes.get((h.kind, h.file, h.function)) if c is not None else None

    def link(self, file: str, function: str) -> str | None:
        """Where a hover's link to a function of the loaded profile goes: its file's URI at its def line."""
        for h in self.snapshot.by_file.get(file, []):
            if h.function == function and h.line:
                path = Path(file) if Path(file).is_absolute() else self.root / file
                return f"{path.as_uri()}#L{h.line}"
        return None

    def for_path(self, path: Path) -> list[Hotspot]:
        snap = self.snapshot
        try:
            key = path.resolve().relative_to(self.root).as_posix()
        except ValueError:
            key = str(path.resolve())
        return snap.by_file.get(key, [])


def _samples(profile: Profile) -> int:
    return sum(e.count for t in profile.weights.values() for e in t.values())


def _loaded(path: str, profile: Profile, recorded: LastProfile | None) -> Loaded:
    written = Path(path).stat().st_mtime
    if recorded is not None:
        return Loaded(path, _samples(profile), recorded.recorded_at, tuple(recorded.command), written)
    stamp = datetime.datetime.fromtimestamp(written, datetime.timezone.utc)
    return Loaded(path, _samples(profile), stamp.isoformat(timespec="seconds"), (), written)
