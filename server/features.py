"""The editor features, computed from redline's models and the document's current text.

Hotspots are placed by function identity (qualified name, found again by tree-sitter in the
current text), so edits above a function move its hints with it. Line weights move with their
function: a line keeps its offset from the `def`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lsprotocol import types as lsp
from redline.profilers import Hotspot
from redline.profilers.source import FunctionDef, parse_functions

from .settings import ServerSettings

OPTIMISE_COMMAND = "redline.optimise"


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
        return max(max(s.inclusive_fraction, s.self_fraction) for s in self.spots)

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


def _def_range(text: str, fn: FunctionDef) -> lsp.Range:
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


def diagnostics(text: str, placed: list[Placed], settings: ServerSettings) -> list[lsp.Diagnostic]:
    severity = lsp.DiagnosticSeverity.Hint if settings.diagnosticSeverity == "hint" else \
        lsp.DiagnosticSeverity.Information
    out = []
    for p in placed:
        if p.hottest < settings.threshold:
            continue
        kinds = " and ".join("CPU time" if s.kind == "cpu" else "GPU time" for s in p.spots)
        out.append(lsp.Diagnostic(
            range=_def_range(text, p.fn), severity=severity, source="redline", code="hotspot",
            message=f"hot function {p.fn.qualname}: {shares(p)} of {kinds}",
            data={"function": p.fn.qualname}))
    return out


def inlay_hints(text: str, placed: list[Placed], settings: ServerSettings, rng: lsp.Range) -> list[lsp.InlayHint]:
    if not settings.inlayHints:
        return []
    out = []
    for p in placed:
        r = _def_range(text, p.fn)
        if r.start.line < rng.start.line or r.start.line > rng.end.line:
            continue
        if max(s.total_fraction for s in p.spots) < settings.threshold:
            continue  # a cold function gets no hint
        out.append(lsp.InlayHint(position=r.end, label=shares(p), padding_left=True,
                                 tooltip=f"redline: share of the loaded profile's weight in {p.fn.qualname}"))
    return out


def code_lenses(text: str, uri: str, placed: list[Placed], settings: ServerSettings) -> list[lsp.CodeLens]:
    if not settings.codeLenses:
        return []
    out = []
    for p in placed:
        if p.hottest < settings.threshold:
            continue
        r = _def_range(text, p.fn)
        out.append(lsp.CodeLens(range=r, command=lsp.Command(title=shares(p), command="")))
        out.append(lsp.CodeLens(range=r, command=lsp.Command(
            title="Optimise", command=OPTIMISE_COMMAND, arguments=[{"uri": uri, "function": p.fn.qualname}])))
    return out


def code_actions(uri: str, placed: list[Placed], settings: ServerSettings, rng: lsp.Range) -> list[lsp.CodeAction]:
    out = []
    for p in placed:
        if p.fn.line - 1 <= rng.end.line and rng.start.line <= p.fn.end_line - 1 and p.hottest >= settings.threshold:
            out.append(lsp.CodeAction(
                title="Optimise hotspot", kind=lsp.CodeActionKind.RefactorRewrite,
                command=lsp.Command(title="Optimise hotspot", command=OPTIMISE_COMMAND,
                                    arguments=[{"uri": uri, "function": p.fn.qualname}])))
    return out


def _bar(fraction: float, width: int = 12) -> str:
    n = max(0, min(width, round(fraction * width)))
    return "█" * n + "░" * (width - n)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def hover(text: str, placed: list[Placed], pos: lsp.Position) -> lsp.Hover | None:
    line1 = pos.line + 1
    inside = [p for p in placed if p.fn.line <= line1 <= p.fn.end_line]
    if not inside:
        return None
    p = max(inside, key=lambda q: q.fn.line)  # innermost
    src = text.splitlines()
    md = [f"**redline** · `{p.fn.qualname}` — {shares(p)}", ""]
    for s in p.spots:
        kind = "CPU" if s.kind == "cpu" else "GPU"
        md.append(f"**{kind} flame graph around it**")
        md.append("```text")
        for c in s.callers[:4]:
            md.append(f"{_bar(c.fraction)} {c.fraction:6.1%}  ↑ {c.function}")
        md.append(f"{_bar(s.total_fraction)} {s.total_fraction:6.1%}  ▶ {p.fn.qualname} (self {s.self_fraction:.1%})")
        for c in s.callees[:6]:
            md.append(f"{_bar(c.fraction)} {c.fraction:6.1%}    ↳ {c.function}")
        md.append("```")
        hot = sorted((lw for lw in s.lines if lw.total_weight > 0), key=lambda lw: -lw.self_weight)[:4]
        if hot:
            md.append("Hottest lines:")
            for lw in hot:
                ln = p.current_line(lw.line)
                code = src[ln - 1].strip() if 0 < ln <= len(src) else ""
                here = " ◀ here" if ln == line1 else ""
                md.append(f"- L{ln}: self {lw.self_weight / max(s.self_weight, 1e-300):.0%} of this function, "
                          f"{lw.fraction:.1%} of all · `{code[:60]}`{here}")
        if s.kernels:
            md.append("Kernels launched:")
            for k in s.kernels[:5]:
                metrics = ", ".join(f"{m} {v:.3g}{'%' if 'Throughput' in m or 'Occupancy' in m else ''}"
                                    for m, v in k.metrics.items() if m != "Duration")
                md.append(f"- `{k.name[:70]}` ×{k.count}, {_us(k.time_s)}" + (f" ({metrics})" if metrics else ""))
        stalls = [lw for lw in s.lines if lw.metrics.get("Warp Stall Sampling (All Samples)")]
        if stalls:
            top = max(stalls, key=lambda lw: lw.metrics["Warp Stall Sampling (All Samples)"])
            md.append(f"Most warp stalls: L{p.current_line(top.line)} "
                      f"({top.metrics['Warp Stall Sampling (All Samples)']:.0f} samples)")
        md.append("")
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value="\n".join(md).rstrip()),
                     range=_def_range(text, p.fn) if line1 == p.fn.line else None)


def line_heat(placed: list[Placed]) -> list[dict[str, float]]:
    """Per-line heat (0-1, of the hottest line in the file) for gutter decorations; 0-based lines."""
    weights: dict[int, float] = {}
    fractions: dict[int, float] = {}
    for p in placed:
        s = p.primary
        for lw in s.lines:
            ln = p.current_line(lw.line) - 1
            if p.fn.line - 1 <= ln <= p.fn.end_line - 1:
                weights[ln] = max(weights.get(ln, 0.0), lw.self_weight or lw.total_weight * 0.25)
                fractions[ln] = max(fractions.get(ln, 0.0), lw.fraction)
    top = max(weights.values(), default=0.0)
    if top <= 0:
        return []
    return [{"line": ln, "heat": w / top, "fraction": fractions[ln]} for ln, w in sorted(weights.items())]
