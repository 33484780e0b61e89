"""Optimise runs started from the editor: progress, cancel, and the winner offered for review."""

from __future__ import annotations

import asyncio
import difflib
import shlex
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp
from pydantic import BaseModel, ConfigDict, ValidationError
from pygls.uris import from_fs_path, to_fs_path
from redline.evaluator.apply import unchanged
from redline.evaluator.inputs.capture import CaptureError, capture_target, run_capture
from redline.evaluator.inputs.store import StoreError, read_last_profile
from redline.evaluator.models import Report
from redline.evaluator.progress import CandidateDone, Event, ProposerFailed, VersusCompile, describe
from redline.evaluator.proposers import hotspot_note
from redline.evaluator.run import LLMOptions, RunOptions, execute
from redline.evaluator.target import NoInputs, Target, TargetError, apply_candidate, load_target

from .settings import ServerSettings

if TYPE_CHECKING:
    from .main import RedlineServer


class OptimiseArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    uri: str
    function: str


class RunArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    runId: str


class CommandError(Exception):
    """A command that cannot be carried out; the message goes to the user."""


@dataclass
class Offer:
    """A verified winner waiting for the user's decision."""

    run_id: str
    uri: str
    target: Target
    report: Report
    new_source: str
    version: int | None


@dataclass
class Runs:
    offers: dict[str, Offer] = field(default_factory=dict)
    running: dict[str, threading.Event] = field(default_factory=dict)


def parse_args(model: type[BaseModel], args: tuple[Any, ...]) -> Any:
    if len(args) != 1:
        raise CommandError(f"expected one argument object, got {len(args)}")
    try:
        return model.model_validate(args[0])
    except ValidationError as exc:
        err = exc.errors()[0]
        raise CommandError(f"bad argument {'.'.join(str(x) for x in err['loc']) or 'object'}: {err['msg']}")


def run_options(settings: ServerSettings) -> RunOptions:
    """The run the editor's settings ask for."""
    s = settings
    return RunOptions(builtin=s.builtinProposers, llm=LLMOptions(base_url=s.llmBaseUrl, model=s.llmModel)
                      if s.llmBaseUrl else None, device=s.device, candidate_timeout=s.candidateTimeout,
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
    options = run_options(ls.settings)
    if not options.builtin and options.llm is None:
        raise CommandError("no proposer: enable redline.builtinProposers or set redline.llmBaseUrl")
    run_id = uuid.uuid4().hex[:10]
    cancel = threading.Event()
    ls.runs.running[run_id] = cancel
    loop = asyncio.get_running_loop()
    progress = ls.work_done_progress
    version = doc.version if doc is not None else None
    token = ""

    def report_progress(event: Event) -> None:
        if not token or isinstance(event, (VersusCompile, ProposerFailed)):
            return
        pct = min(99, int(100 * event.tried / options.budget)) if isinstance(event, CandidateDone) else None
        loop.call_soon_threadsafe(progress.report, token, lsp.WorkDoneProgressReport(
            message=describe(event, reason_chars=120), percentage=pct))

    spot = next((h for h in ls.store.for_path(Path(path)) if h.function == a.function), None)
    note = hotspot_note(spot) if spot is not None else ""

    def work() -> Report:
        assert target is not None
        return execute(target, options, report_progress, cancel, hotspot_note=note)

    async def run() -> None:
        nonlocal target, token
        if target is None:
            assert capture is not None
            target = await capture_first(ls, a, spec, capture, cancel)
            if target is None:
                ls.runs.running.pop(run_id, None)
                return
        token = await begin_progress(ls, f"redline-optimise-{run_id}", f"redline: optimising {a.function}", cancel)
        try:
            report = await loop.run_in_executor(None, work)
        except Exception as exc:  # an evaluator failure must not take the server down
            ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"redline: optimise failed: {exc}"))
            if token:
                progress.end(token, lsp.WorkDoneProgressEnd(message=f"failed: {exc}"))
            return
        finally:
            ls.runs.running.pop(run_id, None)
        assert target is not None
        await finish(ls, a, target, report, run_id, version, token, cancel.is_set())

    ls.background(run())
    return {"runId": run_id, "started": True, "capturing": capture is not None}


async def begin_progress(ls: RedlineServer, token: str, title: str, cancel: threading.Event) -> str:
    """A cancellable work-done progress (its token), or "" for a client that has none or refuses it."""
    if not _supports_progress(ls):
        return ""
    progress = ls.work_done_progress
    try:
        await progress.create_async(token)
        fut = progress.tokens.get(token)
        if fut is not None:
            fut.add_done_callback(lambda f: cancel.set() if f.cancelled() else None)
    except Exception:  # a client that refuses progress still gets the result
        return ""
    progress.begin(token, lsp.WorkDoneProgressBegin(title=title, cancellable=True, message="starting", percentage=0))
    return token


def capture_command(ls: RedlineServer, function: str) -> tuple[list[str], Path]:
    """The command whose calls are captured for a function without inputs, and where it runs:
    `redline.captureCommand`, else the command of the last `redline profile` in the workspace."""
    if ls.settings.captureCommand.strip():
        return shlex.split(ls.settings.captureCommand), ls.store.root
    try:
        last = read_last_profile(ls.store.root)
    except StoreError as exc:
        raise CommandError(str(exc))
    if last is None:
        raise CommandError(f"{function} has no inputs: set redline.captureCommand to the command that runs your "
                           "program (or profile it with `redline profile -- CMD`) so that its real calls can be "
                           "captured, or define make_inputs(seed) in its module")
    return last.command, Path(last.cwd)


async def capture_first(ls: RedlineServer, a: OptimiseArgs, spec: str, capture: tuple[list[str], Path],
                        cancel: threading.Event) -> Target | None:
    """Offer to capture the function's real calls, capture them (progress, cancel), and load the target
    with them; None where the user declines or nothing usable was captured (the user is told why)."""
    cmd, cwd = capture
    choice = await ls.window_show_message_request_async(lsp.ShowMessageRequestParams(
        type=lsp.MessageType.Info,
        message=f"redline: {a.function} has no inputs. Capture its real calls by running `{shlex.join(cmd)}`?",
        actions=[lsp.MessageActionItem("Capture and optimise"), lsp.MessageActionItem("Cancel")]))
    if choice is None or choice.title != "Capture and optimise":
        return None
    token = await begin_progress(ls, f"redline-capture-{uuid.uuid4().hex[:10]}",
                                 f"redline: capturing calls of {a.function}", cancel)
    progress = ls.work_done_progress
    loop = asyncio.get_running_loop()
    summary, target = "", None
    try:
        targets = [capture_target(spec)]
        result = await loop.run_in_executor(None, lambda: run_capture(targets, cmd, cwd, cancel=cancel))
        m = result.manifests[0][1]
        summary = f"kept {m.calls_kept} of {m.calls_seen} calls" + \
            (f" (the command exited with {result.exit_code})" if result.exit_code else "")
        target = load_target(spec)
    except (CaptureError, TargetError) as exc:
        summary = str(exc).splitlines()[0]
        ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Error, f"redline: capture: {exc}"))
    if token:
        progress.end(token, lsp.WorkDoneProgressEnd(message=summary))
    return target


def _supports_progress(ls: RedlineServer) -> bool:
    window = ls.client_capabilities.window
    return bool(window and window.work_done_progress)


async def finish(ls: RedlineServer, a: OptimiseArgs, target: Target, report: Report, run_id: str,
                 version: int | None, token: str, cancelled: bool) -> None:
    progress = ls.work_done_progress
    w = report.winner
    if w is None:
        summary = "cancelled; no verified winner" if cancelled else "no candidate was verified faster"
        if token:
            progress.end(token, lsp.WorkDoneProgressEnd(message=summary))
        ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Info, f"redline: {a.function}: {summary}"))
        ls.protocol.notify("redline/runFinished", {"runId": run_id, "uri": a.uri, "function": a.function,
                                                   "winner": None, "report": report.model_dump(mode="json")})
        return
    winner_code = next(c.code for c in report.candidates if c.id == w.id)
    new_source = apply_candidate(target, winner_code)
    offer = Offer(run_id, a.uri, target, report, new_source, version)
    ls.runs.offers[run_id] = offer
    headline = f"{a.function}: {w.speedup:.2f}x faster (95% CI {w.speedup_ci95[0]:.2f}-{w.speedup_ci95[1]:.2f}), verified"
    if token:
        progress.end(token, lsp.WorkDoneProgressEnd(message=headline))
    ls.protocol.notify("redline/winner", {
        "runId": run_id, "uri": a.uri, "function": a.function, "speedup": w.speedup, "ci95": list(w.speedup_ci95),
        "diff": w.diff, "original": target.source, "proposed": new_source, "title": headline})
    if _client_reviews(ls):
        return  # the client shows its own diff review and answers with applyWinner / discardWinner
    choice = await ls.window_show_message_request_async(lsp.ShowMessageRequestParams(
        type=lsp.MessageType.Info, message=f"redline: {headline}",
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
    edit = lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
        text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=offer.uri, version=version),
        edits=[_edit(offer.target.source, offer.new_source)])])
    result = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(
        edit=edit, label=f"redline: apply verified winner ({offer.report.winner.speedup:.2f}x)"
        if offer.report.winner else "redline: apply winner"))
    if not result.applied:
        return {"applied": False, "reason": result.failure_reason or "the client did not apply the edit"}
    ls.runs.offers.pop(a.runId, None)
    return {"applied": True}


def discard(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
    a: RunArgs = parse_args(RunArgs, args)
    return {"discarded": ls.runs.offers.pop(a.runId, None) is not None}


def cancel(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
    a: RunArgs = parse_args(RunArgs, args)
    ev = ls.runs.running.get(a.runId)
    if ev is not None:
        ev.set()
    return {"cancelled": ev is not None}
