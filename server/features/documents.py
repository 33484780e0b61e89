"""Open documents: their diagnostics and line heat are published on open, change and save."""

from __future__ import annotations

from lsprotocol import types as lsp

from ..core import RedlineServer, guarded
from .diagnostics import publish


def register(ls: RedlineServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    @guarded(None)
    def did_open(ls: RedlineServer, params: lsp.DidOpenTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    @guarded(None)
    def did_change(ls: RedlineServer, params: lsp.DidChangeTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    @guarded(None)
    def did_save(ls: RedlineServer, params: lsp.DidSaveTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    @guarded(None)
    def did_close(ls: RedlineServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.forget(params.text_document.uri)
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))
