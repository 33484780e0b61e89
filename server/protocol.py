"""pygls's protocol, answering every request: one whose params fail to parse gets an error reply
(pygls on its own logs it and sends nothing, which leaves the client waiting)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger("redline.server")


class RedlineProtocol(LanguageServerProtocol):
    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                log.warning("invalid params for %s (id %s): %s", data.get("method"), data.get("id"), exc.__cause__)
                self._send_response(data["id"], error=lsp.ResponseError(
                    code=lsp.ErrorCodes.InvalidParams,
                    message=f"invalid params for {data['method']}: {str(exc.__cause__ or exc)[:300]}"))
            # handle_message ignores messages that are not JSON-RPC 2.0
            return SimpleNamespace(jsonrpc="answered-invalid")
