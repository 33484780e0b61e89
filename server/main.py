"""`redline serve`: the language server on stdio. Its features live in features/, one module each."""

from __future__ import annotations

import logging

from .core import RedlineServer
from .features import register_all


def build() -> RedlineServer:
    ls = RedlineServer()
    register_all(ls)
    return ls


def serve() -> None:
    """Run on stdio. Logs go to stderr (stdout carries only LSP)."""
    logging.basicConfig(level=logging.WARNING, format="redline %(levelname)s %(message)s")
    build().start_io()
