"""Per-line heat for gutter decorations (`redline/lineHeat`)."""

from __future__ import annotations

from ..placement import Placed


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
