"""Two profiles of one program compared function by function (`redline diff`).

Functions are matched by file and qualified name, never by line, so an edit that moves a function
does not split it in two. Shares are of each profile's own total, so a run that took longer overall
still compares; the weights are there too, in each trace's unit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .model import Hotspot


class FunctionChange(BaseModel):
    """One function in both profiles (or in one: `vanished`, `appeared`)."""

    model_config = ConfigDict(extra="forbid")

    file: str
    function: str
    kind: Literal["cpu", "gpu"]
    status: Literal["changed", "vanished", "appeared"]
    line: int  # in the after profile's file, else the before one's
    before_self: float  # share of the before profile's total (0 where absent)
    after_self: float
    before_total: float
    after_total: float
    self_delta: float  # after - before, as shares
    total_delta: float
    before_self_weight: float  # in the before trace's unit
    after_self_weight: float
    before_total_weight: float
    after_total_weight: float


class ProfileDiff(BaseModel):
    """The `redline diff --json` document."""

    model_config = ConfigDict(extra="forbid")

    before: list[str]
    after: list[str]
    before_unit: str
    after_unit: str
    before_total_weight: float
    after_total_weight: float
    functions: list[FunctionChange]  # by the size of the self change, largest first


def diff(before: list[str | Path], after: list[str | Path], root: str | Path = ".", top: int | None = None) -> ProfileDiff:
    """The function-by-function comparison of two sets of traces (ParseError on a bad trace)."""
    from . import report

    old, new = report(before, root), report(after, root)
    key = lambda h: (h.kind, h.file, h.function)  # noqa: E731
    a: dict[tuple[str, str, str], Hotspot] = {key(h): h for h in old.hotspots}
    b: dict[tuple[str, str, str], Hotspot] = {key(h): h for h in new.hotspots}
    changes = [_change(a.get(k), b.get(k)) for k in [*a, *(k for k in b if k not in a)]]
    changes.sort(key=lambda c: (-abs(c.self_delta), -abs(c.total_delta), c.file, c.function))
    return ProfileDiff(before=old.traces, after=new.traces, before_unit=old.unit, after_unit=new.unit,
                       before_total_weight=old.total_weight, after_total_weight=new.total_weight,
                       functions=changes[:top] if top is not None else changes)


def _change(old: Hotspot | None, new: Hotspot | None) -> FunctionChange:
    either = new or old
    assert either is not None
    status: Literal["changed", "vanished", "appeared"] = "changed" if old and new else "vanished" if old else "appeared"
    return FunctionChange(
        file=either.file, function=either.function, kind=either.kind, status=status, line=either.line,
        before_self=old.self_fraction if old else 0.0, after_self=new.self_fraction if new else 0.0,
        before_total=old.total_fraction if old else 0.0, after_total=new.total_fraction if new else 0.0,
        self_delta=(new.self_fraction if new else 0.0) - (old.self_fraction if old else 0.0),
        total_delta=(new.total_fraction if new else 0.0) - (old.total_fraction if old else 0.0),
        before_self_weight=old.self_weight if old else 0.0, after_self_weight=new.self_weight if new else 0.0,
        before_total_weight=old.total_weight if old else 0.0, after_total_weight=new.total_weight if new else 0.0)


def render(doc: ProfileDiff) -> str:
    """The table `redline diff` prints: shares before and after, with the change in points."""
    lines = [f"before: {', '.join(doc.before)} ({_weight(doc.before_total_weight, doc.before_unit)})",
             f"after:  {', '.join(doc.after)} ({_weight(doc.after_total_weight, doc.after_unit)})",
             f"{'self before':>11} {'after':>7} {'change':>8}   {'total before':>12} {'after':>7} {'change':>8}   function"]
    for c in doc.functions:
        note = {"vanished": "  (vanished)", "appeared": "  (appeared)"}.get(c.status, "")
        lines.append(f"{c.before_self:>11.1%} {c.after_self:>7.1%} {_points(c.self_delta):>8}   "
                     f"{c.before_total:>12.1%} {c.after_total:>7.1%} {_points(c.total_delta):>8}   "
                     f"{c.function} ({c.file}:{c.line}){note}")
    if not doc.functions:
        lines.append("(no function of the workspace in either profile)")
    return "\n".join(lines)


def _points(delta: float) -> str:
    return f"{delta * 100:+.1f}pt"


def _weight(w: float, unit: str) -> str:
    if unit == "seconds":
        return f"{w:.2f} s"
    return f"{w:g} {unit}"
