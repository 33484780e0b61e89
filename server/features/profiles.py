"""The workspace and its profiles: initialisation and settings, loading traces (on start, when they
change on disk, on `redline.loadProfile`) and refreshing every open document after a load."""

from __future__ import annotations

import asyncio
import fnmatch
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.uris import to_fs_path
from redline.profilers import ParseError

from ..core import CommandError, RedlineServer, command, guarded
from ..settings import ServerSettings
from ..state import ProfileStore, Snapshot
from .diagnostics import publish

log = logging.getLogger("redline.server")


async def reload(ls: RedlineServer, announce: str | None = None) -> None:
    """Load the profiles in a worker thread, then refresh every open document. With `announce` (a trace
    the user loaded by name), say what was loaded."""
    loop = asyncio.get_running_loop()
    snap = await loop.run_in_executor(None, ls.store.load, ls.settings.profileGlobs, ls.settings.mergeProfiles)
    c = ls.store.comparison
    if c is not None and not c.holds(snap.traces):
        ls.store.comparison = None  # it compared other traces, or older versions of them: compare again
    ls.forget()
    for err in snap.errors:
        ls.warn(f"redline: {err}")
    ls.protocol.notify("redline/profileLoaded", {
        "traces": list(snap.traces), "samples": snap.samples, "totals": snap.totals, "unit": snap.unit,
        "errors": list(snap.errors), "files": len(snap.by_file), "superseded": list(snap.superseded),
        "loaded": [{"trace": t.trace, "samples": t.samples, "recordedAt": t.recorded_at, "command": list(t.command)}
                   for t in snap.loaded]})
    if announce is not None:
        ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Info, loaded_message(snap, announce)))
    if snap.loaded:  # functions changed before the newest trace was written are measured by it
        ls.runs.profiled_since(max(t.written for t in snap.loaded))
    for uri in list(ls.workspace.text_documents):
        publish(ls, uri)
    refresh_views(ls)


def refresh_views(ls: RedlineServer) -> None:
    """Ask the client to request lenses and inlay hints again, where it can be asked."""
    ws = ls.client_capabilities.workspace
    if ws and ws.code_lens and ws.code_lens.refresh_support:
        ls.background(_refresh(ls.workspace_code_lens_refresh_async))
    if ws and ws.inlay_hint and ws.inlay_hint.refresh_support:
        ls.background(_refresh(ls.workspace_inlay_hint_refresh_async))


async def _refresh(request: Callable[[None], Awaitable[Any]]) -> None:
    try:
        await request(None)
    except Exception as exc:  # a client that claims refresh support but fails it loses only the refresh
        log.info("refresh request failed: %s", exc)


def loaded_message(snap: Snapshot, path: str) -> str:
    """What loading `path` by name gave: its samples and when it was recorded, and the whole snapshot."""
    one = next((t for t in snap.loaded if t.trace == path), None)
    if one is None:
        problem = next((e for e in snap.errors if path in e), "it could not be read")
        return f"redline: {path} not loaded: {problem}"
    what = f"redline: loaded {Path(path).name}: {one.samples} samples, recorded {one.recorded_at}"
    if one.command:
        what += f" ({' '.join(one.command)})"
    others = len(snap.loaded) - 1
    return what + (f"; {others} other trace(s) loaded with it, {snap.samples} samples in all" if others else "")


def globbed(ls: RedlineServer, path: Path) -> bool:
    """Whether the `profileGlobs` setting loads `path` (relative to the workspace where it is in it)."""
    try:
        rel = path.resolve().relative_to(ls.store.root).as_posix()
    except ValueError:
        rel = str(path)
    return any(fnmatch.fnmatch(rel, g.lstrip("./")) for g in ls.settings.profileGlobs)


def schedule_reload(ls: RedlineServer, announce: str | None = None) -> None:
    if ls.loading is not None and not ls.loading.done():
        ls.loading.cancel()
    ls.loading = asyncio.ensure_future(reload(ls, announce))


def _merge_settings(ls: RedlineServer, raw: Any) -> None:
    ls.settings, problem = ServerSettings.merged(ls.settings, raw)
    if problem:
        ls.warn(problem)


def load_profile(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
    """`redline.loadProfile [path]`: load one more trace, wherever it is."""
    if len(args) != 1 or not isinstance(args[0], str):
        raise CommandError("redline.loadProfile takes one argument: the trace's path")
    p = Path(args[0])
    path = p if p.is_absolute() else ls.store.root / p
    if not path.is_file():
        raise CommandError(f"{args[0]}: no such trace file")
    ls.store.add_explicit(str(path))
    schedule_reload(ls, announce=str(path))
    return {"loading": str(path)}


async def compare_profiles(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
    """`redline.compareProfiles [before]`: the loaded profile against `before` (default: the recording
    of the same command it replaced); hints, lenses and hovers then show each function's change.
    `redline.compareProfiles [""]` stops comparing."""
    if len(args) > 1 or (args and not isinstance(args[0], str)):
        raise CommandError("redline.compareProfiles takes at most one argument: the earlier trace's path")
    if args and args[0] == "":
        ls.store.comparison = None
        refresh_views(ls)
        return {"comparing": False}
    snap = ls.store.snapshot
    if args:
        before = Path(args[0]) if Path(args[0]).is_absolute() else ls.store.root / args[0]
        if not before.is_file():
            raise CommandError(f"{args[0]}: no such trace file")
    elif snap.superseded:
        before = max((Path(p) for p in snap.superseded), key=lambda p: p.stat().st_mtime)
    else:
        raise CommandError("no earlier recording of the loaded profile's command to compare with: profile it "
                           "again after a change, or give the earlier trace")
    if not snap.traces:
        raise CommandError("no profile is loaded to compare")
    loop = asyncio.get_running_loop()
    try:
        found = await loop.run_in_executor(None, ls.store.compare, [str(before)])
    except ParseError as exc:
        raise CommandError(str(exc))
    show_comparison(ls)
    top = found.order[:5]
    return {"comparing": True, "before": str(before), "after": list(snap.traces),
            "before_total_weight": found.before_total_weight, "after_total_weight": found.after_total_weight,
            "functions": [c.model_dump(mode="json") for c in top]}


def show_comparison(ls: RedlineServer) -> None:
    """Every open document's diagnostics, hints and lenses again, with the store's comparison."""
    ls.forget()
    for uri in list(ls.workspace.text_documents):
        publish(ls, uri)
    refresh_views(ls)


def status(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
    snap, c = ls.store.snapshot, ls.store.comparison
    return {"traces": list(snap.traces), "samples": snap.samples, "errors": list(snap.errors),
            "running": list(ls.runs.running), "offers": list(ls.runs.offers),
            "comparing": {"before": list(c.before), "after": list(c.after)} if c is not None else None}


async def _watch_and_configure(ls: RedlineServer) -> None:
    """Once initialized: watch the trace globs (where the client registers watchers dynamically) and read
    the client's `redline` settings (where it answers workspace/configuration)."""
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
                _merge_settings(ls, cfg[0])
        except Exception as exc:
            log.warning("workspace/configuration failed: %s", exc)


def register(ls: RedlineServer) -> None:
    @ls.feature(lsp.INITIALIZE)
    @guarded(None)
    def initialize(ls: RedlineServer, params: lsp.InitializeParams) -> None:
        root = (params.root_uri and to_fs_path(params.root_uri)) or params.root_path
        if params.workspace_folders:
            root = to_fs_path(params.workspace_folders[0].uri) or root
        if root:
            ls.store = ProfileStore(Path(root))
        _merge_settings(ls, params.initialization_options)

    @ls.feature(lsp.INITIALIZED)
    @guarded(None)
    async def initialized(ls: RedlineServer, params: lsp.InitializedParams) -> None:
        await _watch_and_configure(ls)
        schedule_reload(ls)

    @ls.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    @guarded(None)
    def did_change_configuration(ls: RedlineServer, params: lsp.DidChangeConfigurationParams) -> None:
        old = ls.settings
        _merge_settings(ls, params.settings)
        if ls.settings.profileGlobs != old.profileGlobs or ls.settings.mergeProfiles != old.mergeProfiles:
            schedule_reload(ls)
        else:
            for uri in list(ls.workspace.text_documents):
                publish(ls, uri)

    @ls.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    @guarded(None)
    def did_change_watched(ls: RedlineServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:
            path = to_fs_path(change.uri)
            if path and (globbed(ls, Path(path)) or path in ls.store.snapshot.traces):
                schedule_reload(ls)
                return

    ls.command("redline.loadProfile")(command(load_profile))
    ls.command("redline.compareProfiles")(command(compare_profiles))
    ls.command("redline.status")(command(status))
