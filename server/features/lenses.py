"""Code lenses on each hot function: its shares, and Optimise."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet

from lsprotocol import types as lsp
from redline.profilers import Hotspot
from redline.profilers.diff import FunctionChange

from ..core import RedlineServer, guarded
from ..placement import OPTIMISE_COMMAND, STALE, Placed, compared, def_range, hot, shares
from ..settings import ServerSettings


def code_lenses(text: str, uri: str, placed: list[Placed], settings: ServerSettings,
                changed: AbstractSet[str] = frozenset(),
                change: Callable[[Hotspot], FunctionChange | None] = lambda h: None) -> list[lsp.CodeLens]:
    if not settings.codeLenses:
        return []
    out = []
    for p in placed:
        if not hot(p, settings):
            continue
        r = def_range(text, p.fn)
        stale = f" · {STALE}" if p.fn.qualname in changed else ""
        out.append(lsp.CodeLens(range=r, command=lsp.Command(title=shares(p) + compared(p, change) + stale,
                                                             command="")))
        out.append(lsp.CodeLens(range=r, command=lsp.Command(
            title="Optimise", command=OPTIMISE_COMMAND, arguments=[{"uri": uri, "function": p.fn.qualname}])))
    return out




def register(ls: RedlineServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
    @guarded([])
    def code_lens(ls: RedlineServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
        text, placed = ls.placed(params.text_document.uri)
        return code_lenses(text, params.text_document.uri, placed, ls.settings,
                           ls.runs.changed_in(params.text_document.uri), ls.store.change)
