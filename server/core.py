"""The language server's state and the guards every handler runs under. Feature modules import this;
it imports none of them."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types as lsp
from pydantic import BaseModel, ValidationError
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from redline import __version__

from .placement import Placed, place
from .protocol import RedlineProtocol
from .runs import Runs
from .settings import ServerSettings
from .state import ProfileStore

log = logging.getLogger("redline.server")
F = TypeVar("F", bound=Callable[..., Any])


class CommandError(Exception):
    """A command that cannot be carried out; the message goes to the user."""


class RedlineServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("redline", __version__, protocol_cls=RedlineProtocol)
        self.settings = ServerSettings()
        self.store = ProfileStore(Path.cwd())
        self.runs = Runs()
        self._placed: dict[str, tuple[int | None, str, list[Placed]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.loading: asyncio.Task[Any] | None = None

    def background(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def placed(self, uri: str) -> tuple[str, list[Placed]]:
        """The document's text and its hot functions, placed in that text (cached per version)."""
        doc = self.workspace.get_text_document(uri)
        try:
            text = doc.source
        except (OSError, UnicodeDecodeError):
            return "", []  # a file deleted or unreadable under us: nothing to show
        cached = self._placed.get(uri)
        if cached and cached[0] == doc.version and cached[1] == text and doc.version is not None:
            return text, cached[2]
        path = to_fs_path(uri)
        spots = self.store.for_path(Path(path)) if path else []
        placed = place(text, spots) if spots else []
        self._placed[uri] = (doc.version, text, placed)
        return text, placed

    def forget(self, uri: str | None = None) -> None:
        """Drop the placements of one document (or all: the profiles changed)."""
        if uri is None:
            self._placed.clear()
        else:
            self._placed.pop(uri, None)

    def warn(self, message: str) -> None:
        self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, message))

    def cancelling(self, token: str, cancel: threading.Event) -> None:
        """Cancel a run: its progress says "cancelling…" until the run ends it (its workers and any LLM
        request are stopped by then)."""
        cancel.set()
        if token in self.work_done_progress.tokens:
            self.work_done_progress.report(token, lsp.WorkDoneProgressReport(message="cancelling…"))

    async def begin_progress(self, token: str, title: str, cancel: threading.Event) -> str:
        """A cancellable work-done progress (its token), or "" for a client that has none or refuses it."""
        window = self.client_capabilities.window
        if not (window and window.work_done_progress):
            return ""
        progress = self.work_done_progress
        try:
            await progress.create_async(token)
            fut = progress.tokens.get(token)
            if fut is not None:
                fut.add_done_callback(lambda f: self.cancelling(token, cancel) if f.cancelled() else None)
        except Exception:  # a client that refuses progress still gets the result
            return ""
        # No percentage: a client shows a progress with one only where each report has one too
        # (vscode-languageclient drops a report's message otherwise), and most of a run's reports (the
        # sandbox, the candidate being evaluated, "cancelling…") have none to give.
        progress.begin(token, lsp.WorkDoneProgressBegin(title=title, cancellable=True, message="starting"))
        return token


def guarded(default: Any) -> Callable[[F], F]:
    """A handler that fails is logged and answers `default`; it never takes the server down."""

    def report(ls: RedlineServer, name: str, exc: Exception) -> None:
        log.exception("%s failed", name)
        ls.window_log_message(lsp.LogMessageParams(lsp.MessageType.Error, f"redline: {name}: {exc}"))

    def wrap(fn: F) -> F:
        if asyncio.iscoroutinefunction(fn):
            @wraps(fn)
            async def run_async(ls: RedlineServer, *args: Any) -> Any:
                try:
                    return await fn(ls, *args)
                except Exception as exc:
                    report(ls, fn.__name__, exc)
                    return default
            return run_async  # type: ignore[return-value]

        @wraps(fn)
        def run(ls: RedlineServer, *args: Any) -> Any:
            try:
                return fn(ls, *args)
            except Exception as exc:
                report(ls, fn.__name__, exc)
                return default
        return run  # type: ignore[return-value]
    return wrap


def command(fn: Callable[[RedlineServer, tuple[Any, ...]], Any]) -> Callable[..., Any]:
    """A command whose failure is shown to the user and answered as `{"error": ...}`."""

    async def run(ls: RedlineServer, *args: Any) -> Any:
        try:
            result = fn(ls, args)
            if asyncio.iscoroutine(result):
                result = await result
            return result
        except CommandError as exc:
            ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"redline: {exc}"))
            return {"error": str(exc)}
        except Exception as exc:
            log.exception("command failed")
            ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"redline: command failed: {exc}"))
            return {"error": str(exc)}
    return run


def parse_args(model: type[BaseModel], args: tuple[Any, ...]) -> Any:
    """A command's one argument object, validated (pygls hands it over unconverted)."""
    if len(args) != 1:
        raise CommandError(f"expected one argument object, got {len(args)}")
    try:
        return model.model_validate(args[0])
    except ValidationError as exc:
        err = exc.errors()[0]
        raise CommandError(f"bad argument {'.'.join(str(x) for x in err['loc']) or 'object'}: {err['msg']}")
