"""Capturing a function's real calls from the editor, for a function without inputs: offered to the
user, run with cancellable progress, then the target loaded with them."""

from __future__ import annotations

import asyncio
import shlex
import threading
import uuid
from pathlib import Path

from lsprotocol import types as lsp
from redline.evaluator.inputs.capture import CaptureError, capture_target, run_capture
from redline.evaluator.inputs.store import StoreError, command_to_capture
from redline.evaluator.target import Target, TargetError, load_target

from ..core import CommandError, RedlineServer


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


