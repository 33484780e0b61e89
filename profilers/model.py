"""redline's one internal profile model, and the hotspot records derived from it.

`Profile` is deliberately plain (dataclasses, tuples, dicts): a million-sample trace collapses
into a few thousand unique stacks, and pydantic validation per stack would dominate the cost.
The pydantic models here are the boundary types that leave the process (JSON, LSP, reports).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

FrameKind = Literal["python", "native", "kernel", "region", "idle"]
WeightKind = Literal["cpu", "gpu"]


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame as the trace names it: a function, its file and (where known) a line in it."""

    name: str
    file: str | None = None
    line: int | None = None
    kind: FrameKind = "python"


@dataclass(slots=True)
class StackWeight:
    """Summed weight (seconds, or samples when the trace has no time unit) and event count."""

    weight: float = 0.0
    count: int = 0


Stack = tuple[int, ...]  # frame indices, outermost first
ROOT = -1


@dataclass
class Profile:
    """Weighted call tree of one or more traces.

    Stacks are stored as a tree of nodes (`node_parent`, `node_frame`; a node stands for the
    stack from the root to it), so a deep trace costs one node per unique prefix and not one
    tuple per event. `weights[kind][node]` is the weight of samples or events whose stack ends
    at that node. CPU weight is sampled or measured host time; GPU weight is kernel time,
    attached under the Python (or NVTX, or native) stack that launched the kernel, with the
    kernel as the leaf frame.
    """

    frames: list[Frame] = field(default_factory=list)
    node_parent: list[int] = field(default_factory=list)
    node_frame: list[int] = field(default_factory=list)
    weights: dict[WeightKind, dict[int, StackWeight]] = field(default_factory=dict)
    unit: str = "seconds"
    sources: list[str] = field(default_factory=list)
    # Per-kernel metrics (Nsight Compute), keyed by kernel name: metric name -> value.
    kernel_metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    # Per-source-line counters (Nsight Compute source page), keyed by (file, line).
    line_metrics: dict[tuple[str, int], dict[str, float]] = field(default_factory=dict)
    # True for traces that only annotate (Nsight Compute's source page: stall samples, no time);
    # their weights count only when nothing else was loaded.
    annotation_only: bool = False
    _index: dict[Frame, int] = field(default_factory=dict, repr=False)
    _children: dict[tuple[int, int], int] = field(default_factory=dict, repr=False)

    def frame_id(self, frame: Frame) -> int:
        """Index of `frame` in `frames`, adding it if new."""
        idx = self._index.get(frame)
        if idx is None:
            idx = len(self.frames)
            self.frames.append(frame)
            self._index[frame] = idx
        return idx

    def child(self, parent: int, frame: int) -> int:
        """The node for `frame` called from node `parent` (ROOT for the outermost frame)."""
        key = (parent, frame)
        node = self._children.get(key)
        if node is None:
            node = len(self.node_frame)
            self.node_parent.append(parent)
            self.node_frame.append(frame)
            self._children[key] = node
        return node

    def node_for(self, stack: Stack) -> int:
        node = ROOT
        for frame in stack:
            node = self.child(node, frame)
        return node

    def stack(self, node: int) -> Stack:
        out = []
        while node != ROOT:
            out.append(self.node_frame[node])
            node = self.node_parent[node]
        return tuple(reversed(out))

    def add_at(self, kind: WeightKind, node: int, weight: float, count: int = 1) -> None:
        table = self.weights.setdefault(kind, {})
        entry = table.get(node)
        if entry is None:
            table[node] = StackWeight(weight, count)
        else:
            entry.weight += weight
            entry.count += count

    def add(self, kind: WeightKind, stack: Stack, weight: float, count: int = 1) -> None:
        if stack:
            self.add_at(kind, self.node_for(stack), weight, count)

    def total(self, kind: WeightKind) -> float:
        return sum(e.weight for e in self.weights.get(kind, {}).values())

    def merge(self, other: Profile) -> None:
        """Add `other`'s weights and metrics into this profile (frames and nodes re-indexed)."""
        if self.annotation_only and not other.annotation_only:
            self.weights.clear()
            self.unit, self.annotation_only = other.unit, False
        take = not other.annotation_only or self.annotation_only or not self.weights
        if take:
            if self.weights and other.unit != self.unit:
                self.unit = "mixed"
            elif not self.weights:
                self.unit = other.unit
                self.annotation_only = other.annotation_only
        frame_map = [self.frame_id(f) for f in other.frames]
        node_map: list[int] = []
        for parent, frame in zip(other.node_parent, other.node_frame, strict=True):
            node_map.append(self.child(node_map[parent] if parent != ROOT else ROOT, frame_map[frame]))
        for kind, table in other.weights.items() if take else ():
            for node, entry in table.items():
                self.add_at(kind, node_map[node], entry.weight, entry.count)
        self.sources.extend(other.sources)
        for name, metrics in other.kernel_metrics.items():
            self.kernel_metrics.setdefault(name, {}).update(metrics)
        for key, metrics in other.line_metrics.items():
            merged = self.line_metrics.setdefault(key, {})
            for metric, value in metrics.items():
                merged[metric] = merged.get(metric, 0.0) + value


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Edge(_Out):
    """A caller or callee of a hotspot, with the share of the trace's weight on that edge."""

    function: str
    file: str
    fraction: float


class KernelUse(_Out):
    """A GPU kernel launched under a hotspot."""

    name: str
    time_s: float
    count: int
    metrics: dict[str, float] = {}


class LineWeight(_Out):
    """Weight on one source line of a hotspot (self: the line was executing; total: on the stack)."""

    line: int
    self_weight: float
    total_weight: float
    fraction: float
    metrics: dict[str, float] = {}


class Hotspot(_Out):
    """One function's share of a profile, mapped onto the workspace."""

    file: str
    function: str
    line: int
    end_line: int
    self_fraction: float
    total_fraction: float
    # Own time plus time in the libraries it calls, not in other workspace functions: the share a
    # change to this function can reach. What the editor's diagnostics rank hot code by.
    inclusive_fraction: float = 0.0
    # Inclusive share plus the time under the functions it calls that a compiler compiles with it (module
    # functions of its file, methods of its class): what compiling it with them can reach. In the program's
    # script (the file whose module code runs it), and for GPU time, the inclusive share: its `main` runs
    # everything, once, and compiling Python does not move a kernel. What `redline capture` ranks by.
    module_fraction: float = 0.0
    self_weight: float
    total_weight: float
    kind: Literal["cpu", "gpu"]
    callers: list[Edge] = []
    callees: list[Edge] = []
    kernels: list[KernelUse] = []
    lines: list[LineWeight] = []


class HotspotReport(_Out):
    """The `redline hotspots --json` document (its contract: docs/cli.md)."""

    traces: list[str]
    total_weight: float
    unit: str
    totals: dict[str, float]
    hotspots: list[Hotspot]
