"""The code action "Optimise hotspot" on a hot function."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types as lsp

from ..core import RedlineServer, guarded
from ..placement import OPTIMISE_COMMAND, Placed, optimisable
from ..settings import ServerSettings


def code_actions(uri: str, placed: list[Placed], settings: ServerSettings, rng: lsp.Range,
                 diagnostics: Sequence[lsp.Diagnostic] = ()) -> list[lsp.CodeAction]:
    """"Optimise hotspot" on each hot function the range touches (and on each whose callees compiled with
    it reach the threshold): a quick fix of its diagnostic where the client sent that diagnostic (the
    editor lists it under the diagnostic's hover), else a rewrite."""
    ours = {d.data.get("function"): d for d in diagnostics
            if d.source == "redline" and d.code == "hotspot" and isinstance(d.data, dict)}
    out = []
    for p in placed:
        if p.fn.line - 1 <= rng.end.line and rng.start.line <= p.fn.end_line - 1 and optimisable(p, settings):
            diagnostic = ours.get(p.fn.qualname)
            out.append(lsp.CodeAction(
                title="Optimise hotspot",
                kind=lsp.CodeActionKind.QuickFix if diagnostic else lsp.CodeActionKind.RefactorRewrite,
                diagnostics=[diagnostic] if diagnostic else None, is_preferred=True if diagnostic else None,
                command=lsp.Command(title="Optimise hotspot", command=OPTIMISE_COMMAND,
                                    arguments=[{"uri": uri, "function": p.fn.qualname}])))
    return out


def register(ls: RedlineServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(
        code_action_kinds=[lsp.CodeActionKind.QuickFix, lsp.CodeActionKind.RefactorRewrite]))
    @guarded([])
    def code_action(ls: RedlineServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        _, placed = ls.placed(params.text_document.uri)
        return code_actions(params.text_document.uri, placed, ls.settings, params.range,
                            params.context.diagnostics)
