"""Hotspots: per-function self and total shares of a Profile, mapped onto the workspace."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .model import ROOT, Edge, Frame, Hotspot, KernelUse, LineWeight, Profile, StackWeight, WeightKind
from .source import Workspace, by_name, enclosing, functions_in

# Kernel metrics shown with a hotspot (Nsight Compute names); the rest stay in the Profile.
KERNEL_METRICS = ("Duration", "Memory Throughput", "DRAM Throughput", "Compute (SM) Throughput",
                  "Achieved Occupancy", "Registers Per Thread", "DRAM Bytes", "L2 Hit Rate")


@dataclass(frozen=True, slots=True)
class Place:
    """Where a frame's function lives: display file, qualified name, span, and whether it is user code."""

    file: str
    function: str
    line: int
    end_line: int
    in_workspace: bool


@dataclass
class _Acc:
    self_w: float = 0.0
    total_w: float = 0.0
    module_w: float = 0.0
    callers: dict[int, float] = field(default_factory=dict)
    callees: dict[int, float] = field(default_factory=dict)
    kernels: dict[str, list[float]] = field(default_factory=dict)
    line_self: dict[int, float] = field(default_factory=dict)
    line_total: dict[int, float] = field(default_factory=dict)


class Resolver:
    """Turns trace frames into Places, caching per frame."""

    def __init__(self, workspace: Workspace) -> None:
        self.ws = workspace
        self._kernels: dict[str, tuple[str, object]] | None = None

    def kernels(self) -> dict[str, tuple[str, object]]:
        if self._kernels is None:
            self._kernels = dict(self.ws.triton_kernels())
        return self._kernels

    def place(self, frame: Frame) -> Place:
        path: str | None = None
        if frame.file:
            path = self.ws.resolve(frame.file)
            in_ws = path is not None
            if path is None and os.path.isabs(frame.file) and os.path.isfile(frame.file):
                path = frame.file
        else:
            in_ws = False
        # A file outside the workspace's own code keeps its absolute path (a library under the root's .venv).
        shown = (self.ws.display(path) if in_ws else path) if path else ""
        if frame.kind == "kernel" and path is None:
            hit = self.kernels().get(frame.name.split("(")[0].strip())
            if hit is not None:
                kpath, fn = hit
                return Place(self.ws.display(kpath), fn.qualname, fn.line, fn.end_line, True)  # type: ignore[attr-defined]
        if path is not None and frame.kind in ("python", "kernel"):
            fns = functions_in(path)
            short = frame.name.rsplit(".", 1)[-1]
            # Module-level code is in no function, even at a `def` line (the def statement running).
            fn = enclosing(fns, frame.line) if frame.line and frame.name != "<module>" else None
            if fn is None and frame.name != "<module>":
                fn = by_name(fns, frame.name)
            elif fn is not None and not short.startswith("<") and fn.name != short:
                # The line is in another function: the file changed since the trace was recorded (an
                # older trace of an edited file), so the function the frame names, where it is now; or
                # a class body runs the def statement of one of its methods, which is in no function.
                fn = by_name(fns, frame.name) or (None if frame.line == fn.line else fn)
            if fn is not None:
                return Place(shown, fn.qualname, fn.line, fn.end_line, in_ws)
            line = frame.line or 1
            return Place(shown, frame.name, line, line, in_ws)
        display = shown if path else (frame.file or "")
        return Place(display, frame.name, frame.line or 0, frame.line or 0, in_ws)


def hotspots(profile: Profile, root: str | Path = ".", workspace: Workspace | None = None) -> list[Hotspot]:
    """All functions with weight, sorted by self share, then total share (both descending)."""
    ws = workspace or Workspace(root)
    resolver = Resolver(ws)
    place_ids: dict[Place, int] = {}
    places: list[Place] = []
    frame_place: list[int] = []
    for f in profile.frames:
        place = resolver.place(f)
        pid = place_ids.get(place)
        if pid is None:
            pid = place_ids[place] = len(places)
            places.append(place)
        frame_place.append(pid)
    children: list[list[int]] = [[] for _ in profile.node_frame]
    roots: list[int] = []
    for node, parent in enumerate(profile.node_parent):
        (roots if parent == ROOT else children[parent]).append(node)
    out: list[Hotspot] = []
    kinds: tuple[WeightKind, ...] = ("cpu", "gpu")
    for kind in kinds:
        table = profile.weights.get(kind)
        if table:
            out.extend(_for_kind(profile, ws, places, frame_place, children, roots, kind, table))
    script = max((h for h in out if h.function == "<module>" and h.kind == "cpu" and not os.path.isabs(h.file)),
                 key=lambda h: h.total_fraction, default=None)
    for h in out:
        if script is not None and h.file == script.file:
            h.module_fraction = h.inclusive_fraction  # the script's main runs everything below it, once
    out.sort(key=lambda h: (-h.self_fraction, -h.total_fraction, h.file, h.function))
    return out


def _for_kind(profile: Profile, ws: Workspace, places: list[Place], frame_place: list[int],
              children: list[list[int]], roots: list[int], kind: WeightKind,
              table: dict[int, StackWeight]) -> list[Hotspot]:
    """The hot functions of one kind of weight: the call tree walked once (see _Walk), then each
    function's totals turned into shares of the trace's weight."""
    walk = _Walk(profile, places, frame_place, kind, table, _Follows(ws.root))
    walk.run(children, roots)
    total = sum(e.weight for e in table.values())
    frac = (lambda x: x / total) if total > 0 else (lambda x: 0.0)
    line_metrics = _line_metrics(profile, ws)
    return [_hotspot(profile, places, pid, a, kind, frac, line_metrics.get(places[pid].file, {}))
            for pid, a in walk.acc.items() if a.total_w > 0 or a.self_w > 0]


class _Walk:
    """One depth-first walk of the call tree: a node's subtree weight counts once per function, line and
    edge on the path (recursion counts once per sample); a node's own weight goes to its function (on
    the GPU, to the deepest workspace function that launched it), and a kernel's to every function on
    its path."""

    def __init__(self, profile: Profile, places: list[Place], frame_place: list[int], kind: WeightKind,
                 table: dict[int, StackWeight], follows: _Follows) -> None:
        self.profile, self.places, self.frame_place, self.kind, self.table = profile, places, frame_place, kind, table
        self.follows = follows
        self.acc: dict[int, _Acc] = {}
        self.active: dict[int, int] = {}
        self.active_line: dict[tuple[int, int], int] = {}
        self.active_edge: dict[tuple[int, int], int] = {}
        self.path: list[int] = []  # places on the current path
        self.anchor: list[int] = []  # for GPU weight: the deepest workspace node on the path, or -1
        self.sub = self._subtree_weights()

    def _subtree_weights(self) -> list[float]:
        node_parent = self.profile.node_parent
        sub = [0.0] * len(node_parent)
        for node, entry in self.table.items():
            sub[node] = entry.weight
        for node in range(len(node_parent) - 1, -1, -1):  # children are created after their parents
            if node_parent[node] != ROOT:
                sub[node_parent[node]] += sub[node]
        return sub

    def _where(self, node: int) -> tuple[int, int, int]:
        """The node's place, its line, and its caller's place (-1 at a root)."""
        p = self.profile
        parent = p.node_parent[node]
        caller = self.frame_place[p.node_frame[parent]] if parent != ROOT else -1
        return self.frame_place[p.node_frame[node]], p.frames[p.node_frame[node]].line or 0, caller

    def run(self, children: list[list[int]], roots: list[int]) -> None:
        stack: list[tuple[int, bool]] = [(r, True) for r in reversed(roots)]
        while stack:
            node, entering = stack.pop()
            if not entering:
                self._leave(node)
            elif self.sub[node] > 0 or node in self.table:
                stack.append((node, False))
                self._enter(node)
                stack.extend((c, True) for c in reversed(children[node]))

    def _leave(self, node: int) -> None:
        p, line, q = self._where(node)
        self.active[p] -= 1
        if line:
            self.active_line[(p, line)] -= 1
        if q >= 0 and q != p:
            self.active_edge[(q, p)] -= 1
        self.path.pop()
        self.anchor.pop()

    def _enter(self, node: int) -> None:
        p, line, q = self._where(node)
        w = self.sub[node]
        a = self.acc.get(p) or self.acc.setdefault(p, _Acc())
        if not self.active.get(p):
            a.total_w += w
        self.active[p] = self.active.get(p, 0) + 1
        if line:
            if not self.active_line.get((p, line)):
                a.line_total[line] = a.line_total.get(line, 0.0) + w
            self.active_line[(p, line)] = self.active_line.get((p, line), 0) + 1
        if q >= 0 and q != p:
            if not self.active_edge.get((q, p)):
                self.acc[q].callees[p] = self.acc[q].callees.get(p, 0.0) + w
                a.callers[q] = a.callers.get(q, 0.0) + w
            self.active_edge[(q, p)] = self.active_edge.get((q, p), 0) + 1
        self.path.append(p)
        self.anchor.append(node if self.places[p].in_workspace else (self.anchor[-1] if self.anchor else -1))
        own = self.table.get(node)
        if own is not None:
            self._own(node, own)

    def _own(self, node: int, own: StackWeight) -> None:
        frames, node_frame = self.profile.frames, self.profile.node_frame
        owner = self.anchor[-1] if self.kind == "gpu" and self.anchor[-1] >= 0 else node  # GPU time: its launcher
        op = self.frame_place[node_frame[owner]]
        oa = self.acc.get(op) or self.acc.setdefault(op, _Acc())
        oa.self_w += own.weight
        oline = frames[node_frame[owner]].line
        if oline:
            oa.line_self[oline] = oa.line_self.get(oline, 0.0) + own.weight
        if self.kind == "cpu":  # what a compiler compiles with a function: its CPU time, not its kernels'
            self._module(own.weight)
        frame = frames[node_frame[node]]
        if frame.kind == "kernel":
            for up in set(self.path):
                use = self.acc[up].kernels.setdefault(frame.name, [0.0, 0])
                use[0] += own.weight
                use[1] += own.count

    def _module(self, weight: float) -> None:
        """The weight goes to the deepest workspace function on the path and up from it along the calls a
        compiler follows when it compiles a function with the functions it calls (compiled.callees): a
        direct call of a module function of the same file, or of a method of the same class from one of
        its methods. Once each, however often a function recurses."""
        below, seen = -1, set()
        for p in reversed(self.path):
            if below < 0 and not self.places[p].in_workspace:
                continue  # the libraries it calls
            if below >= 0 and p != below and not self.follows(self.places[p], self.places[below]):
                break
            below = p
            if p not in seen:
                seen.add(p)
                self.acc[p].module_w += weight


class _Follows:
    """Whether compiling a function with the functions it calls compiles another (compiled.callees): one of
    the same file that its source calls by name, a module function (`parse_value(...)`) or, from a
    method, a method of its own class (`self.skip(...)`). A function reached through a variable or a
    library (a list of handlers, `map`, a callback) is not compiled with it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.known: dict[tuple[Place, Place], bool] = {}
        self.lines: dict[str, list[str]] = {}

    def __call__(self, caller: Place, callee: Place) -> bool:
        key = (caller, callee)
        if key not in self.known:
            self.known[key] = self._follows(caller, callee)
        return self.known[key]

    def _follows(self, caller: Place, callee: Place) -> bool:
        if not (caller.in_workspace and callee.in_workspace) or caller.file != callee.file or "<" in callee.function:
            return False
        owner, _, name = callee.function.rpartition(".")
        if owner and owner != caller.function.rpartition(".")[0]:
            return False
        call = re.compile(rf"\bself\.{re.escape(name)}\s*\(" if owner else rf"(?<![\w.]){re.escape(name)}\s*\(")
        return any(call.search(line) for line in self._text(caller.file)[caller.line:caller.end_line])

    def _text(self, file: str) -> list[str]:
        if file not in self.lines:
            try:
                self.lines[file] = (self.root / file).read_text(errors="replace").splitlines()
            except OSError:
                self.lines[file] = []
        return self.lines[file]


def _hotspot(profile: Profile, places: list[Place], pid: int, a: _Acc, kind: WeightKind,
             frac: Callable[[float], float], lm: dict[int, dict[str, float]]) -> Hotspot:
    place = places[pid]
    seconds = profile.unit == "seconds"
    kernels = [KernelUse(name=name, time_s=t if seconds else 0.0, count=int(c),
                         metrics={m: v for m, v in profile.kernel_metrics.get(name, {}).items()
                                  if m in KERNEL_METRICS})
               for name, (t, c) in sorted(a.kernels.items(), key=lambda kv: -kv[1][0])]
    lines = [LineWeight(line=ln, self_weight=a.line_self.get(ln, 0.0), total_weight=t, fraction=frac(t),
                        metrics=lm.get(ln, {}))
             for ln, t in a.line_total.items()]
    lines += [LineWeight(line=ln, self_weight=0.0, total_weight=0.0, fraction=0.0, metrics=lm[ln])
              for ln in lm if place.line <= ln <= place.end_line and ln not in a.line_total]
    lines.sort(key=lambda lw: lw.line)
    # Time under a call of another workspace function is that function's to claim; the rest
    # (own lines, libraries called) is what changing this function can change.
    delegated = sum(w for q, w in a.callees.items() if places[q].in_workspace and q != pid)
    inclusive = max(a.self_w, a.total_w - delegated)
    return Hotspot(
        file=place.file, function=place.function, line=place.line, end_line=place.end_line,
        self_fraction=frac(a.self_w), total_fraction=frac(a.total_w),
        inclusive_fraction=frac(inclusive), module_fraction=frac(max(inclusive, a.module_w)), self_weight=a.self_w,
        total_weight=a.total_w, kind=kind,
        callers=_edges(a.callers, places, frac), callees=_edges(a.callees, places, frac),
        kernels=kernels, lines=lines)


def _edges(edges: dict[int, float], places: list[Place], frac: Callable[[float], float]) -> list[Edge]:
    return [Edge(function=places[p].function, file=places[p].file, fraction=frac(w))
            for p, w in sorted(edges.items(), key=lambda kv: -kv[1])]


def _line_metrics(profile: Profile, ws: Workspace) -> dict[str, dict[int, dict[str, float]]]:
    out: dict[str, dict[int, dict[str, float]]] = {}
    for (file, line), metrics in profile.line_metrics.items():
        path = ws.resolve(file)
        display = ws.display(path) if path else file
        out.setdefault(display, {})[line] = metrics
    return out
