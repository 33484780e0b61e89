"""The code action "Optimise hotspot" on a hot function."""

from __future__ import annotations

from lsprotocol import types as lsp

from ..core import RedlineServer, guarded
from ..placement import OPTIMISE_COMMAND, Placed, hot
from ..settings import ServerSettings


def code_actions(uri: str, placed: list[Placed], settings: ServerSettings, rng: lsp.Range) -> list[lsp.CodeAction]:
    out = []
    for p in placed:
        if p.fn.line - 1 <= rng.end.line and rng.start.line <= p.fn.end_line - 1 and hot(p, settings):
            out.append(lsp.CodeAction(
                title="Optimise hotspot", kind=lsp.CodeActionKind.RefactorRewrite,
                command=lsp.Command(title="Optimise hotspot", command=OPTIMISE_COMMAND,
                                    arguments=[{"uri": uri, "function": p.fn.qualname}])))
    return out




def register(ls: RedlineServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.RefactorRewrite]))
    @guarded([])
    def code_action(ls: RedlineServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        _, placed = ls.placed(params.text_document.uri)
        return code_actions(params.text_document.uri, placed, ls.settings, params.range)
