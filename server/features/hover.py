"""The hover anywhere in a hot function: a text flame graph around it (callers, the function,
callees with bars and shares), its hottest lines, and the kernels it launches."""

from __future__ import annotations

from collections.abc import Callable

from lsprotocol import types as lsp
from redline.profilers import Hotspot
from redline.profilers.diff import FunctionChange

from ..core import RedlineServer, guarded
from ..placement import Placed, def_range, shares


def _bar(fraction: float, width: int = 12) -> str:
    n = max(0, min(width, round(fraction * width)))
    return "█" * n + "░" * (width - n)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def _reach(p: Placed) -> list[str]:
    """What compiling it with the functions it calls reaches, where that is more than it alone."""
    if p.reach < p.hottest + 0.005:
        return []
    return [f"Compiled with the functions it calls (Cython and mypyc compile them with it), it reaches "
            f"{p.reach:.0%} of the time; changed alone, {p.hottest:.0%}.", ""]


def hover(text: str, placed: list[Placed], pos: lsp.Position,
          change: Callable[[Hotspot], FunctionChange | None] = lambda h: None, uri: str = "",
          link: Callable[[str, str], str | None] = lambda file, function: None) -> lsp.Hover | None:
    """The hover at `pos`; `uri` (the document's) and `link` (a function's file and name -> its place)
    make the hottest lines, callers and callees links."""
    line1 = pos.line + 1
    inside = [p for p in placed if p.fn.line <= line1 <= p.fn.end_line]
    if not inside:
        return None
    p = max(inside, key=lambda q: q.fn.line)  # innermost
    src = text.splitlines()
    md = [f"**redline** · `{p.fn.qualname}` — {shares(p)}", "", *_reach(p)]
    for s in p.spots:
        kind = "CPU" if s.kind == "cpu" else "GPU"
        moved = change(s)
        if moved is not None:
            md.append(f"Against the earlier profile: self {moved.before_self:.1%} → {moved.after_self:.1%} "
                      f"({moved.self_delta * 100:+.1f}pt), total {moved.before_total:.1%} → {moved.after_total:.1%} "
                      f"({moved.total_delta * 100:+.1f}pt); own time {moved.before_self_weight:.3g} → "
                      f"{moved.after_self_weight:.3g}")
            md.append("")
        md.append(f"**{kind} flame graph around it**")
        md.append("```text")
        for c in s.callers[:4]:
            md.append(f"{_bar(c.fraction)} {c.fraction:6.1%}  ↑ {c.function}")
        md.append(f"{_bar(s.total_fraction)} {s.total_fraction:6.1%}  ▶ {p.fn.qualname} (self {s.self_fraction:.1%})")
        for c in s.callees[:6]:
            md.append(f"{_bar(c.fraction)} {c.fraction:6.1%}    ↳ {c.function}")
        md.append("```")
        edges = [("↑", c) for c in s.callers[:4]] + [("↳", c) for c in s.callees[:6]]
        links = [f"{arrow} [{c.function}]({to})" for arrow, c in edges if (to := link(c.file, c.function))]
        if links:
            md.append("Go to: " + " · ".join(links))
            md.append("")
        hot = sorted((lw for lw in s.lines if lw.total_weight > 0), key=lambda lw: -lw.self_weight)[:4]
        if hot:
            md.append("Hottest lines:")
            for lw in hot:
                ln = p.current_line(lw.line)
                code = src[ln - 1].strip() if 0 < ln <= len(src) else ""
                here = " ◀ here" if ln == line1 else ""
                label = f"[L{ln}]({uri}#L{ln})" if uri else f"L{ln}"
                md.append(f"- {label}: self {lw.self_weight / max(s.self_weight, 1e-300):.0%} of this function, "
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
                     range=def_range(text, p.fn) if line1 == p.fn.line else None)




def register(ls: RedlineServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_HOVER)
    @guarded(None)
    def on_hover(ls: RedlineServer, params: lsp.HoverParams) -> lsp.Hover | None:
        text, placed = ls.placed(params.text_document.uri)
        return hover(text, placed, params.position, ls.store.change, params.text_document.uri, ls.store.link)
