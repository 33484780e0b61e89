"""Capturing a function's real calls from the editor, for a function without inputs: offered to the
user, run with cancellable progress, then the target loaded with them."""

from __future__ import annotations

import asyncio
import shlex
import threading
import uuid
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pydantic import BaseModel, ConfigDict, Field
from redline.evaluator.inputs.capture import CaptureError, capture_target, hot_targets, run_capture
from redline.evaluator.inputs.store import StoreError, command_to_capture
from redline.evaluator.target import Target, TargetError, load_target

from ..core import CommandError, RedlineServer, command, parse_args


def capture_command(ls: RedlineServer, function: str) -> tuple[list[str], Path]:
    """The command whose calls are captured for a function without inputs, and where it runs:
    `redline.captureCommand`, else the command of the last `redline profile` in the workspace."""
    try:
        return command_to_capture(ls.store.root, shlex.split(ls.settings.captureCommand), (
            f"{function} has no inputs: set redline.captureCommand to the command that runs your program (or "
            "profile it with `redline profile -- CMD`) so that its real calls can be captured, or define "
            "make_inputs(seed) in its module"))
    except StoreError as exc:
        raise CommandError(str(exc))


async def capture_first(ls: RedlineServer, function: str, spec: str, capture: tuple[list[str], Path],
                        cancel: threading.Event) -> Target | None:
    """Offer to capture the function's real calls, capture them (progress, cancel), and load the target
    with them; None where the user declines or nothing usable was captured (the user is told why)."""
    cmd, cwd = capture
    choice = await ls.window_show_message_request_async(lsp.ShowMessageRequestParams(
        type=lsp.MessageType.Info,
        message=f"redline: {function} has no inputs. Capture its real calls by running `{shlex.join(cmd)}`?",
        actions=[lsp.MessageActionItem("Capture and optimise"), lsp.MessageActionItem("Cancel")]))
    if choice is None or choice.title != "Capture and optimise":
        return None
    token = await ls.begin_progress(f"redline-capture-{uuid.uuid4().hex[:10]}",
                                 f"redline: capturing calls of {function}", cancel)
    progress = ls.work_done_progress
    loop = asyncio.get_running_loop()
    summary, target = "", None
    try:
        targets = [capture_target(spec)]
        result = await loop.run_in_executor(
            None, lambda: run_capture(targets, cmd, cwd, cancel=cancel, stdio_to_stderr=True))
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




async def capture_service(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
    """`redline.captureService [{targets?, duration?}]`: start the program (`captureCommand`, else the last
    profiled command) with its calls recorded, while it serves real traffic; its progress says how many
    calls are kept so far, and its cancel (the editor's Stop) ends the program as Ctrl-C or a service
    manager would, keeping them. Then the targets (default: the hottest three of the loaded profile)
    can be optimised on those calls."""
    a: ServiceArgs = parse_args(ServiceArgs, args)
    root = ls.store.root
    try:
        cmd, cwd = command_to_capture(root, shlex.split(ls.settings.captureCommand), (
            "set redline.captureCommand to the command that starts your program (or profile it once with "
            "`redline profile -- CMD`)"))
        targets = [capture_target(t if Path(t.split("::")[0]).is_absolute() else str(root / t))
                   for t in a.targets] or hot_targets(root, 3)[1]
    except (CaptureError, StoreError) as exc:
        raise CommandError(str(exc))
    stop = threading.Event()
    run_id = f"capture-{uuid.uuid4().hex[:10]}"
    ls.runs.running[run_id] = stop
    token = await ls.begin_progress(f"redline-{run_id}", f"redline: capturing calls while `{shlex.join(cmd)}` runs",
                                    stop)
    ls.background(_service(ls, a, cmd, cwd, targets, stop, token, run_id))
    return {"runId": run_id, "command": cmd, "targets": [t.spec for t in targets]}


async def _service(ls: RedlineServer, a: ServiceArgs, cmd: list[str], cwd: Path, targets: list[Any],
                   stop: threading.Event, token: str, run_id: str) -> None:
    loop = asyncio.get_running_loop()

    def so_far(seen: int, kept: int) -> None:
        if token:
            loop.call_soon_threadsafe(ls.work_done_progress.report, token, lsp.WorkDoneProgressReport(
                message=f"{kept} calls kept of {seen} seen so far; Cancel stops the program and keeps them"))

    summary = ""
    try:
        result = await loop.run_in_executor(None, lambda: run_capture(
            targets, cmd, cwd, stdio_to_stderr=True, duration=a.duration, stop=stop, progress=so_far))
        summary = "; ".join(f"{t.spec}: kept {m.calls_kept} of {m.calls_seen} calls" for t, m, _ in result.manifests)
        ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Info, f"redline: captured {summary}"))
    except CaptureError as exc:
        summary = f"failed: {exc}"
        ls.warn(f"redline: capture: {exc}")
    finally:
        ls.runs.running.pop(run_id, None)
        if token:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=summary))


class ServiceArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    targets: list[str] = []  # FILE::QUALNAME, relative to the workspace root or absolute
    duration: float | None = Field(None, gt=0)


def register(ls: RedlineServer) -> None:
    ls.command("redline.captureService")(command(capture_service))
