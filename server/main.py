"""`redline serve`: the language server on stdio. Handlers unpack params and call features/."""

from __future__ import annotations

import asyncio
import fnmatch
import logging
from collections.abc import Awaitable, Callable, Coroutine
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from redline import __version__

from . import features, optimise
from .features import Placed
from .protocol import RedlineProtocol
from .settings import ServerSettings
from .state import ProfileStore

log = logging.getLogger("redline.server")
T = TypeVar("T")


class RedlineServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("redline", __version__, protocol_cls=RedlineProtocol)
        self.settings = ServerSettings()
        self.store = ProfileStore(Path.cwd())
        self.runs = optimise.Runs()
        self._placed: dict[str, tuple[int | None, str, list[Placed]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loading: asyncio.Task[Any] | None = None

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
        placed = features.place(text, spots) if spots else []
        self._placed[uri] = (doc.version, text, placed)
        return text, placed

    def publish(self, uri: str) -> None:
        text, placed = self.placed(uri)
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri=uri, diagnostics=features.diagnostics(text, placed, self.settings)))
        if self.settings.lineHeat:
            self.protocol.notify("redline/lineHeat", {"uri": uri, "lines": features.line_heat(placed)})

    async def reload(self) -> None:
        """Load the profiles in a worker thread, then refresh every open document."""
        loop = asyncio.get_running_loop()
        snap = await loop.run_in_executor(None, self.store.load, self.settings.profileGlobs)
        self._placed.clear()
        for err in snap.errors:
            self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, f"redline: {err}"))
        self.protocol.notify("redline/profileLoaded", {
            "traces": list(snap.traces), "samples": snap.samples, "totals": snap.totals, "unit": snap.unit,
            "errors": list(snap.errors), "files": len(snap.by_file)})
        for uri in list(self.workspace.text_documents):
            self.publish(uri)
        ws = self.client_capabilities.workspace
        if ws and ws.code_lens and ws.code_lens.refresh_support:
            self.background(self._refresh(self.workspace_code_lens_refresh_async))
        if ws and ws.inlay_hint and ws.inlay_hint.refresh_support:
            self.background(self._refresh(self.workspace_inlay_hint_refresh_async))

    async def _refresh(self, request: Callable[[None], Awaitable[Any]]) -> None:
        try:
            await request(None)
        except Exception as exc:  # a client that claims refresh support but fails it loses only the refresh
            log.info("refresh request failed: %s", exc)

    def schedule_reload(self) -> None:
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()
        self._loading = asyncio.ensure_future(self.reload())


F = TypeVar("F", bound=Callable[..., Any])


def guarded(default: Any) -> Callable[[F], F]:
    """A feature that fails is logged and answers `default`; it never takes the server down."""

    def wrap(fn: F) -> F:
        if asyncio.iscoroutinefunction(fn):
            @wraps(fn)
            async def run_async(ls: RedlineServer, *args: Any) -> Any:
                try:
                    return await fn(ls, *args)
                except Exception as exc:
                    log.exception("%s failed", fn.__name__)
                    ls.window_log_message(lsp.LogMessageParams(lsp.MessageType.Error, f"redline: {fn.__name__}: {exc}"))
                    return default
            return run_async  # type: ignore[return-value]

        @wraps(fn)
        def run(ls: RedlineServer, *args: Any) -> Any:
            try:
                return fn(ls, *args)
            except Exception as exc:
                log.exception("%s failed", fn.__name__)
                ls.window_log_message(lsp.LogMessageParams(lsp.MessageType.Error, f"redline: {fn.__name__}: {exc}"))
                return default
        return run  # type: ignore[return-value]
    return wrap


def command(ls: RedlineServer, fn: Callable[[RedlineServer, tuple[Any, ...]], Awaitable[T] | T]) -> Callable[..., Any]:
    """A command whose failure is shown to the user and answered as `{"error": ...}`."""

    async def run(ls_: RedlineServer, *args: Any) -> Any:
        try:
            result = fn(ls_, args)
            if asyncio.iscoroutine(result):
                result = await result
            return result
        except optimise.CommandError as exc:
            ls_.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"redline: {exc}"))
            return {"error": str(exc)}
        except Exception as exc:
            log.exception("command failed")
            ls_.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"redline: command failed: {exc}"))
            return {"error": str(exc)}
    return run


def build() -> RedlineServer:
    ls = RedlineServer()

    @ls.feature(lsp.INITIALIZE)
    def initialize(ls: RedlineServer, params: lsp.InitializeParams) -> None:
        root = (params.root_uri and to_fs_path(params.root_uri)) or params.root_path
        if params.workspace_folders:
            root = to_fs_path(params.workspace_folders[0].uri) or root
        if root:
            ls.store = ProfileStore(Path(root))
        ls.settings, problem = ServerSettings.merged(ls.settings, params.initialization_options)
        if problem:
            ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, problem))

    @ls.feature(lsp.INITIALIZED)
    async def initialized(ls: RedlineServer, params: lsp.InitializedParams) -> None:
        ws = ls.client_capabilities.workspace
        if ws and ws.did_change_watched_files and ws.did_change_watched_files.dynamic_registration:
            watchers = [lsp.FileSystemWatcher(glob_pattern=f"**/{g.lstrip('./')}") for g in ls.settings.profileGlobs]
            ls.background(ls.client_register_capability_async(lsp.RegistrationParams(registrations=[lsp.Registration(
                id="redline-traces", method=lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=lsp.DidChangeWatchedFilesRegistrationOptions(watchers=watchers))])))
        if ws and ws.configuration:
            try:
                cfg = await asyncio.wait_for(ls.workspace_configuration_async(lsp.ConfigurationParams(
                    items=[lsp.ConfigurationItem(section="redline")])), 5)
                if cfg:
                    ls.settings, problem = ServerSettings.merged(ls.settings, cfg[0])
                    if problem:
                        ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, problem))
            except Exception as exc:
                log.warning("workspace/configuration failed: %s", exc)
        ls.schedule_reload()

    @ls.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: RedlineServer, params: lsp.DidChangeConfigurationParams) -> None:
        old = ls.settings
        ls.settings, problem = ServerSettings.merged(ls.settings, params.settings)
        if problem:
            ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, problem))
        if ls.settings.profileGlobs != old.profileGlobs:
            ls.schedule_reload()
        else:
            for uri in list(ls.workspace.text_documents):
                ls.publish(uri)

    @ls.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched(ls: RedlineServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        root = ls.store.root
        for change in params.changes:
            path = to_fs_path(change.uri)
            if not path:
                continue
            try:
                rel = Path(path).resolve().relative_to(root).as_posix()
            except ValueError:
                rel = path
            if any(fnmatch.fnmatch(rel, g.lstrip("./")) for g in ls.settings.profileGlobs) \
                    or path in ls.store.snapshot.traces:
                ls.schedule_reload()
                return

    @ls.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    @guarded(None)
    def did_open(ls: RedlineServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.publish(params.text_document.uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    @guarded(None)
    def did_change(ls: RedlineServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.publish(params.text_document.uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    @guarded(None)
    def did_save(ls: RedlineServer, params: lsp.DidSaveTextDocumentParams) -> None:
        ls.publish(params.text_document.uri)

    @ls.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    @guarded(None)
    def did_close(ls: RedlineServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls._placed.pop(params.text_document.uri, None)
        ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

    @ls.feature(lsp.TEXT_DOCUMENT_HOVER)
    @guarded(None)
    def hover(ls: RedlineServer, params: lsp.HoverParams) -> lsp.Hover | None:
        text, placed = ls.placed(params.text_document.uri)
        return features.hover(text, placed, params.position)

    @ls.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
    @guarded([])
    def inlay_hint(ls: RedlineServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
        text, placed = ls.placed(params.text_document.uri)
        return features.inlay_hints(text, placed, ls.settings, params.range)

    @ls.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
    @guarded([])
    def code_lens(ls: RedlineServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
        text, placed = ls.placed(params.text_document.uri)
        return features.code_lenses(text, params.text_document.uri, placed, ls.settings)

    @ls.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.RefactorRewrite]))
    @guarded([])
    def code_action(ls: RedlineServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        _, placed = ls.placed(params.text_document.uri)
        return features.code_actions(params.text_document.uri, placed, ls.settings, params.range)

    def load_profile(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
        if len(args) != 1 or not isinstance(args[0], str):
            raise optimise.CommandError("redline.loadProfile takes one argument: the trace's path")
        p = Path(args[0])
        path = p if p.is_absolute() else ls.store.root / p
        if not path.is_file():
            raise optimise.CommandError(f"{args[0]}: no such trace file")
        ls.store.add_explicit(str(path))
        ls.schedule_reload()
        return {"loading": str(path)}

    def status(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
        snap = ls.store.snapshot
        return {"traces": list(snap.traces), "samples": snap.samples, "errors": list(snap.errors),
                "running": list(ls.runs.running), "offers": list(ls.runs.offers)}

    for name, fn in (("redline.loadProfile", load_profile), ("redline.optimise", optimise.start),
                     ("redline.applyWinner", optimise.apply), ("redline.discardWinner", optimise.discard),
                     ("redline.cancel", optimise.cancel), ("redline.status", status)):
        ls.command(name)(command(ls, fn))
    return ls


def serve() -> None:
    """Run on stdio. Logs go to stderr (stdout carries only LSP)."""
    logging.basicConfig(level=logging.WARNING, format="redline %(levelname)s %(message)s")
    build().start_io()
