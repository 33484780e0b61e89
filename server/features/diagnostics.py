"""Hot functions as diagnostics (source `redline`) on their `def` line, and `publish`: a document's
diagnostics and line heat sent after every change."""

from __future__ import annotations

from lsprotocol import types as lsp

from ..core import RedlineServer
from ..placement import Placed, def_range, hot, shares
from ..settings import ServerSettings
from .heat import line_heat


def diagnostics(text: str, placed: list[Placed], settings: ServerSettings) -> list[lsp.Diagnostic]:
    severity = lsp.DiagnosticSeverity.Hint if settings.diagnosticSeverity == "hint" else \
        lsp.DiagnosticSeverity.Information
    out = []
    for p in placed:
        if not hot(p, settings):
            continue
        kinds = " and ".join("CPU time" if s.kind == "cpu" else "GPU time" for s in p.spots)
        out.append(lsp.Diagnostic(
            range=def_range(text, p.fn), severity=severity, source="redline", code="hotspot",
            message=f"hot function {p.fn.qualname}: {shares(p)} of {kinds}",
            data={"function": p.fn.qualname}))
    return out




def publish(ls: RedlineServer, uri: str) -> None:
    text, placed = ls.placed(uri)
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
        uri=uri, diagnostics=diagnostics(text, placed, ls.settings)))
    if ls.settings.lineHeat:
        ls.protocol.notify("redline/lineHeat", {"uri": uri, "lines": line_heat(placed)})
