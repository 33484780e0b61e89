"""Optimise from the editor: a run in the background with progress and cancel (capturing inputs first
where the function has none), and the verified winner offered for review as a versioned edit."""

from __future__ import annotations

import asyncio
import difflib
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pydantic import BaseModel, ConfigDict
from pygls.uris import from_fs_path, to_fs_path
from redline.evaluator.apply import unchanged
from redline.evaluator.models import Report
from redline.evaluator.progress import (
    Event,
    ProfileStarted,
    ProposerFailed,
    SanitizerStarted,
    VersusCompile,
    describe,
)
from redline.evaluator.report import verified
from redline.evaluator.run import LLMOptions, RunOptions, execute
from redline.evaluator.sandbox import isolation_line
from redline.evaluator.target import NoInputs, Target, TargetError, apply_candidate, load_target
from redline.profilers import Hotspot

from ..core import CommandError, RedlineServer, command, parse_args
from ..runs import Accepted, Offer
from ..settings import ServerSettings
from .capture import capture_command, capture_first
from .profiles import refresh_views
from .reprofile import last_profile


class OptimiseArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    uri: str
    function: str


class RunArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    runId: str


def run_options(settings: ServerSettings, root: Path) -> RunOptions:
    """The run the editor's settings ask for (candidatesDir relative to the workspace `root`)."""
    s = settings
    return RunOptions(builtin=s.builtinProposers, llm=LLMOptions(base_url=s.llmBaseUrl, model=s.llmModel)
                      if s.llmBaseUrl else None, candidates=root / s.candidatesDir if s.candidatesDir else None,
                      device=s.device, candidate_timeout=s.candidateTimeout,
                      budget=s.budget, rounds=s.rounds, time_limit=s.timeLimit, backend=s.backend,
                      ray_address=s.rayAddress or None)


async def start(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
    """`redline.optimise`: start a run in the background and answer at once."""
    a: OptimiseArgs = parse_args(OptimiseArgs, args)
    path = to_fs_path(a.uri)
    if path is None or not Path(path).is_file():
        raise CommandError(f"{a.uri} is not a file on disk")
    doc = ls.workspace.text_documents.get(a.uri)
    if doc is not None and doc.source != Path(path).read_bytes().decode("utf-8", "replace"):
        raise CommandError("the file has unsaved changes; save it before optimising")
    spec = f"{path}::{a.function}"
    capture: tuple[list[str], Path] | None = None
    target: Target | None = None
    try:
        target = load_target(spec)
    except NoInputs:
        capture = capture_command(ls, a.function)
    except TargetError as exc:
        raise CommandError(str(exc))
    options = run_options(ls.settings, ls.store.root)
    if not options.builtin and options.llm is None and options.candidates is None:
        raise CommandError("no proposer: enable redline.builtinProposers, set redline.llmBaseUrl or "
                           "redline.candidatesDir")
    if options.candidates is not None and not options.candidates.is_dir():
        raise CommandError(f"redline.candidatesDir: {options.candidates} is not a folder")
    spot = next((h for h in ls.store.for_path(Path(path)) if h.function == a.function), None)
    job = _Job(ls, a, spec, options, doc.version if doc is not None else None, spot)
    ls.background(job.run(target, capture))
    return {"runId": job.run_id, "started": True, "capturing": capture is not None}


class _Job:
    """One optimise run started from the editor: its progress in a work-done report, its cancel, its end."""

    def __init__(self, ls: RedlineServer, a: OptimiseArgs, spec: str, options: RunOptions, version: int | None,
                 spot: Hotspot | None) -> None:
        self.ls, self.a, self.spec, self.options, self.version, self.spot = ls, a, spec, options, version, spot
        self.run_id = uuid.uuid4().hex[:10]
        self.cancel = threading.Event()
        ls.runs.running[self.run_id] = self.cancel
        self.loop = asyncio.get_running_loop()
        self.token = ""

    def report_progress(self, event: Event) -> None:
        if not self.token or isinstance(event, (VersusCompile, SanitizerStarted, ProfileStarted, ProposerFailed)):
            return
        self.loop.call_soon_threadsafe(self.ls.work_done_progress.report, self.token, lsp.WorkDoneProgressReport(
            message=describe(event, reason_chars=120)))

    async def run(self, target: Target | None, capture: tuple[list[str], Path] | None) -> None:
        ls, a = self.ls, self.a
        if target is None:  # no inputs yet: capture them first (the user is asked)
            assert capture is not None
            target = await capture_first(ls, a.function, self.spec, capture, self.cancel)
            if target is None:
                ls.runs.running.pop(self.run_id, None)
                return
        self.token = await ls.begin_progress(f"redline-optimise-{self.run_id}", f"redline: optimising {a.function}",
                                             self.cancel)
        sandbox = await self.loop.run_in_executor(None, isolation_line, self.options.backend)
        if self.token:
            ls.work_done_progress.report(self.token, lsp.WorkDoneProgressReport(message=sandbox))
        if "process isolation only" in sandbox:
            ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, f"redline: {sandbox}"))
        found = target
        try:
            report = await self.loop.run_in_executor(
                None, lambda: execute(found, self.options, self.report_progress, self.cancel, hotspot=self.spot))
        except Exception as exc:  # an evaluator failure must not take the server down
            ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"redline: optimise failed: {exc}"))
            if self.token:
                ls.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(message=f"failed: {exc}"))
            return
        finally:
            ls.runs.running.pop(self.run_id, None)
        await finish(ls, a, target, report, self.run_id, self.version, self.token, self.cancel.is_set())


async def finish(ls: RedlineServer, a: OptimiseArgs, target: Target, report: Report, run_id: str,
                 version: int | None, token: str, cancelled: bool) -> None:
    progress = ls.work_done_progress
    w = report.winner
    if w is None:
        summary = "cancelled; no verified winner" if cancelled else "no candidate was verified faster"
        if token:
            progress.end(token, lsp.WorkDoneProgressEnd(message=summary))
        ls.protocol.notify("redline/runFinished", {"runId": run_id, "uri": a.uri, "function": a.function,
                                                   "winner": None, "report": report.model_dump(mode="json")})
        if cancelled:
            ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Info, f"redline: {a.function}: {summary}"))
        else:
            await dead_end(ls, a.function, report)
        return
    winner_code = next(c.code for c in report.candidates if c.id == w.id)
    new_source = apply_candidate(target, winner_code)
    offer = Offer(run_id, a.uri, target, report, new_source, version)
    ls.runs.offers[run_id] = offer
    headline = f"{a.function}: {w.speedup:.2f}x faster (95% CI {w.speedup_ci95[0]:.2f}-{w.speedup_ci95[1]:.2f}), verified"
    if cancelled:  # what was verified before the cancel stands, and says so
        headline = f"best so far (cancelled): {headline}"
    if token:
        progress.end(token, lsp.WorkDoneProgressEnd(message=headline))
    ls.protocol.notify("redline/winner", {
        "runId": run_id, "uri": a.uri, "function": a.function, "speedup": w.speedup, "ci95": list(w.speedup_ci95),
        "diff": w.diff, "original": target.source, "proposed": new_source, "title": headline,
        "verified": verified(report)})
    if _client_reviews(ls):
        return  # the client shows its own diff review and answers with applyWinner / discardWinner
    choice = await ls.window_show_message_request_async(lsp.ShowMessageRequestParams(
        type=lsp.MessageType.Info, message=f"redline: {headline}. {verified(report)}",
        actions=[lsp.MessageActionItem("Review"), lsp.MessageActionItem("Apply"), lsp.MessageActionItem("Discard")]))
    title = choice.title if choice is not None else ""
    if title == "Apply":
        await apply(ls, (RunArgs(runId=run_id).model_dump(),))
    elif title == "Discard":
        ls.runs.offers.pop(run_id, None)
    elif title == "Review":
        diff_path = target.project_root / ".redline" / "runs" / report.run_id / "winner.diff"
        diff_path.parent.mkdir(parents=True, exist_ok=True)
        diff_path.write_text(w.diff)
        uri = from_fs_path(str(diff_path))
        if uri:
            await ls.window_show_document_async(lsp.ShowDocumentParams(uri=uri, take_focus=True))


# The next steps a run without a winner offers: the button, and the setting it opens.
NEXT_STEPS = {"llm": ("Set an LLM endpoint", "redline.llmBaseUrl"),
              "files": ("Use candidate files", "redline.candidatesDir")}


async def dead_end(ls: RedlineServer, function: str, report: Report) -> None:
    """A run with no winner says what was tried (each proposer's candidates, or why it was skipped) and
    offers what else the user can do: buttons that open the LLM endpoint's or the candidate folder's
    setting (`redline/openSetting`, which the VS Code extension opens; other clients read the text)."""
    counts: dict[str, int] = {}
    for c in report.candidates:
        counts[c.status] = counts.get(c.status, 0) + 1
    tried = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no candidate"
    skipped = [f"{u.name} ({u.skipped})" for u in report.proposers if u.skipped]
    steps = [NEXT_STEPS[name] for name in NEXT_STEPS if name not in {u.name for u in report.proposers}]
    message = (f"redline: {function}: no candidate was verified faster ({tried})."
               + (f" Not applicable here: {'; '.join(skipped)}." if skipped else "")
               + (" Next: " + " or ".join(f"{label.lower()} ({setting})" for label, setting in steps) + "."
                  if steps else ""))
    if not steps:
        ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Info, message))
        return
    choice = await ls.window_show_message_request_async(lsp.ShowMessageRequestParams(
        type=lsp.MessageType.Info, message=message, actions=[lsp.MessageActionItem(label) for label, _ in steps]))
    setting = next((s for label, s in steps if choice is not None and choice.title == label), None)
    if setting is not None:
        ls.protocol.notify("redline/openSetting", {"setting": setting})


def _client_reviews(ls: RedlineServer) -> bool:
    """Clients with their own review UI say so in `experimental.redlineWinnerReview`."""
    exp = ls.client_capabilities.experimental
    return isinstance(exp, dict) and bool(exp.get("redlineWinnerReview"))


def _edit(old: str, new: str) -> lsp.TextEdit:
    """One edit covering the changed lines."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    ops = [op for op in sm.get_opcodes() if op[0] != "equal"]
    i1, j1 = ops[0][1], ops[0][3]
    i2, j2 = ops[-1][2], ops[-1][4]
    return lsp.TextEdit(range=lsp.Range(lsp.Position(i1, 0), lsp.Position(i2, 0)), new_text="".join(b[j1:j2]))


async def apply(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
    """`redline.applyWinner`: a versioned edit, refused if the document changed since the run began."""
    a: RunArgs = parse_args(RunArgs, args)
    offer = ls.runs.offers.get(a.runId)
    if offer is None:
        raise CommandError(f"no winner waiting for run {a.runId} (already applied or discarded?)")
    doc = ls.workspace.text_documents.get(offer.uri)
    if doc is None:
        stale = not unchanged(offer.target.file, offer.target.digest)
    else:
        stale = doc.source != offer.target.source or (offer.version is not None and doc.version != offer.version)
    if stale:
        reason = "the document changed since the run began; run Optimise again"
        ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, f"redline: not applied: {reason}"))
        return {"applied": False, "reason": reason}
    version = doc.version if doc is not None else None
    changes = [lsp.TextDocumentEdit(text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=offer.uri, version=version),
                                    edits=[_edit(offer.target.source, offer.new_source)])]
    for extra in offer.report.winner.files if offer.report.winner else []:  # the dependencies it adds
        if not unchanged(Path(extra.path), extra.sha256):
            reason = f"{extra.path} changed since the run began; run Optimise again"
            ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, f"redline: not applied: {reason}"))
            return {"applied": False, "reason": reason}
        changes.append(lsp.TextDocumentEdit(
            text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=from_fs_path(extra.path) or extra.path,
                                                                      version=None),
            edits=[_edit(Path(extra.path).read_text(), extra.text)]))
    edit = lsp.WorkspaceEdit(document_changes=changes)
    result = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(
        edit=edit, label=f"redline: apply verified winner ({offer.report.winner.speedup:.2f}x)"
        if offer.report.winner else "redline: apply winner"))
    if not result.applied:
        return {"applied": False, "reason": result.failure_reason or "the client did not apply the edit"}
    ls.runs.offers.pop(a.runId, None)
    ls.runs.changed.setdefault(offer.uri, {})[offer.target.qualname] = time.time()
    if offer.report.winner is not None:
        file = offer.target.file.resolve()
        shown = file.relative_to(ls.store.root).as_posix() if file.is_relative_to(ls.store.root) else str(file)
        ls.runs.accepted[a.runId] = Accepted(offer.target.qualname, shown, offer.report.winner.speedup)
    ls.forget(offer.uri)
    refresh_views(ls)
    return {"applied": True, "reprofile": last_profile(ls) is not None}


def discard(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
    a: RunArgs = parse_args(RunArgs, args)
    return {"discarded": ls.runs.offers.pop(a.runId, None) is not None}


def cancel(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
    a: RunArgs = parse_args(RunArgs, args)
    ev = ls.runs.running.get(a.runId)
    if ev is not None:
        ls.cancelling(f"redline-optimise-{a.runId}", ev)
    return {"cancelled": ev is not None}


def register(ls: RedlineServer) -> None:
    for name, fn in (("redline.optimise", start), ("redline.applyWinner", apply), ("redline.discardWinner", discard),
                     ("redline.cancel", cancel)):
        ls.command(name)(command(fn))
