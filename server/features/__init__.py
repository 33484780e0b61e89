"""The language server's features, one module each; each registers its own handlers and commands on
the server (`register(ls)`). A feature that fails to register is logged and left out; the others stay."""

from __future__ import annotations

import importlib
import logging

from ..core import RedlineServer

log = logging.getLogger("redline.server")

FEATURES = ("profiles", "documents", "hover", "inlay_hints", "lenses", "actions", "optimise", "reprofile", "attach", "capture")


def register_all(ls: RedlineServer) -> None:
    for name in FEATURES:
        try:
            importlib.import_module(f"{__name__}.{name}").register(ls)
        except Exception:
            log.exception("the %s feature could not be registered; the others run without it", name)
