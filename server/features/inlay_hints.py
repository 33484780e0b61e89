"""Shares as inlay hints after a hot function's name."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet

from lsprotocol import types as lsp
from redline.profilers import Hotspot
from redline.profilers.diff import FunctionChange

from ..core import RedlineServer, guarded
from ..placement import STALE, STALE_DETAIL, Placed, compared, def_range, shares
from ..settings import ServerSettings


def inlay_hints(text: str, placed: list[Placed], settings: ServerSettings, rng: lsp.Range,
                changed: AbstractSet[str] = frozenset(),
                change: Callable[[Hotspot], FunctionChange | None] = lambda h: None) -> list[lsp.InlayHint]:
    if not settings.inlayHints:
        return []
    out = []
    for p in placed:
        r = def_range(text, p.fn)
        if r.start.line < rng.start.line or r.start.line > rng.end.line:
            continue
        if max(s.total_fraction for s in p.spots) < settings.threshold:
            continue  # a cold function gets no hint
        stale = p.fn.qualname in changed
        label = shares(p) + compared(p, change) + (f" · {STALE}" if stale else "")
        out.append(lsp.InlayHint(position=r.end, label=label, padding_left=True,
                                 tooltip=f"redline: share of the loaded profile's weight in {p.fn.qualname}"
                                 + (f"; {STALE_DETAIL}" if stale else "")))
    return out




def register(ls: RedlineServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
    @guarded([])
    def inlay_hint(ls: RedlineServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
        text, placed = ls.placed(params.text_document.uri)
        return inlay_hints(text, placed, ls.settings, params.range, ls.runs.changed_in(params.text_document.uri),
                           ls.store.change)
