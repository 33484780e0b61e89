"""Hot functions placed in a document's current text, by identity (qualified name, found again by
tree-sitter), so edits above a function move its hints with it; a line keeps its offset from the `def`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lsprotocol import types as lsp
from redline.profilers import Hotspot
from redline.profilers.diff import FunctionChange
from redline.profilers.source import FunctionDef, parse_functions

from .settings import ServerSettings

OPTIMISE_COMMAND = "redline.optimise"
# How a hint or lens marks a function an accepted winner changed since the loaded profile was recorded.
STALE = "changed since this profile"
STALE_DETAIL = "an accepted winner changed it after the profile was recorded: profile again to measure it"


@dataclass
class Placed:
    """A hot function as it stands in the current text."""

    fn: FunctionDef
    spots: list[Hotspot] = field(default_factory=list)  # one per weight kind, CPU first

    @property
    def primary(self) -> Hotspot:
        return self.spots[0]

    @property
    def hottest(self) -> float:
        """The largest inclusive share (own time plus the libraries it calls) over its weight kinds:
        what decides whether it is hot, so that a function whose time goes into a library it calls
        is offered for optimising."""
        return max(s.inclusive_fraction for s in self.spots)

    @property
    def reach(self) -> float:
        """The largest share compiling it with the functions it calls can reach (module_fraction)."""
        return max(s.module_fraction for s in self.spots)

    def current_line(self, trace_line: int) -> int:
        """1-based line in the current text of a line the trace named (offset from the def kept)."""
        return self.fn.line + (trace_line - self.primary.line)


def place(text: str, spots: list[Hotspot]) -> list[Placed]:
    fns = {f.qualname: f for f in parse_functions(text.encode())}
    placed: dict[str, Placed] = {}
    for s in sorted(spots, key=lambda h: h.kind != "cpu"):
        fn = fns.get(s.function)
        if fn is None:
            continue
        placed.setdefault(s.function, Placed(fn)).spots.append(s)
    return sorted(placed.values(), key=lambda p: p.fn.line)


def shares(p: Placed) -> str:
    parts = []
    for s in p.spots:
        label = "" if s.kind == "cpu" else "GPU "
        parts.append(f"{label}self {s.self_fraction:.0%} · total {s.total_fraction:.0%}")
    return " | ".join(parts)


def compared(p: Placed, change: Callable[[Hotspot], FunctionChange | None]) -> str:
    """` · self -27pt vs before` for a function the loaded profile is compared with an earlier one on."""
    parts = []
    for s in p.spots:
        c = change(s)
        if c is not None:
            parts.append(f"{'' if s.kind == 'cpu' else 'GPU '}self {c.self_delta * 100:+.0f}pt vs before")
    return " · " + " | ".join(parts) if parts else ""


def def_range(text: str, fn: FunctionDef) -> lsp.Range:
    lines = text.splitlines()
    line = fn.line - 1
    # the `def` line itself (decorators come first in the span)
    for i in range(fn.line - 1, min(fn.end_line, len(lines))):
        if lines[i].lstrip().startswith(("def ", "async def ")):
            line = i
            break
    src = lines[line] if line < len(lines) else ""
    start = len(src) - len(src.lstrip())
    return lsp.Range(lsp.Position(line, start), lsp.Position(line, len(src)))


def hot(p: Placed, settings: ServerSettings) -> bool:
    """Whether a placed function gets a diagnostic, lenses and the Optimise action."""
    return p.hottest >= settings.threshold


def optimisable(p: Placed, settings: ServerSettings) -> bool:
    """Whether a placed function gets the Optimise action: its reach (never below its inclusive share, so
    every hot function has it) meets the threshold; an entry point whose time is spread over the
    functions it calls has it too."""
    return p.reach >= settings.threshold
