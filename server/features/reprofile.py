"""`redline.reprofile`: run the last profiled command again under py-spy, load the new trace in place of
the old one, compare the two, and put the program's change next to what each accepted winner was
verified at and what its function's share of the old profile predicted (Amdahl's law)."""

from __future__ import annotations

import asyncio
import shlex
import threading
import uuid
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from redline.evaluator.inputs.store import LastProfile, StoreError, read_last_profile, remember_profile
from redline.profilers import ParseError
from redline.profilers.diff import FunctionChange
from redline.profilers.record import (
    AttachError,
    RecordError,
    Sampling,
    attach,
    default_output,
    process_running,
    record,
)

from ..core import CommandError, RedlineServer, command
from ..runs import Accepted
from .attach import attach_trace
from .profiles import reload, show_comparison


def last_profile(ls: RedlineServer) -> LastProfile | None:
    """The workspace's last `redline profile` run, None where there is none or it cannot be read."""
    try:
        return read_last_profile(ls.store.root)
    except StoreError:
        return None


def predicted(share: float, speedup: float) -> float:
    """The whole program's speedup when a part taking `share` of its time gets `speedup` faster."""
    return 1.0 / ((1.0 - share) + share / speedup)


def effect(a: Accepted, before: dict[tuple[str, str], FunctionChange]) -> dict[str, Any]:
    """An accepted winner next to the program: its function's inclusive share of the recording before
    (None where that program does not run it) and the program speedup the share predicted."""
    found = before.get((a.file, a.function))
    share = found.before_total if found is not None and found.status != "appeared" else None
    return {"function": a.function, "file": a.file, "verified": a.speedup, "share": share,
            "predicted": predicted(share, a.speedup) if share else None}


async def reprofile(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
    last = last_profile(ls)
    if last is None:
        raise CommandError("nothing to profile again: profile the program once with `redline profile -- CMD` "
                           "(or redline: Profile a command…)")
    cwd = Path(last.cwd) if last.cwd else ls.store.root
    pid = None
    if last.attached_s is not None:  # a service sampled while it ran: sample it again (restarted, a new pid)
        pid = process_running(last.command)
        if pid is None:
            raise CommandError(f"`{shlex.join(last.command)}` is not running: start it again with the change, "
                               "then profile it again")
    out = attach_trace(ls.store.root, pid) if pid else default_output("speedscope", ls.store.root)
    token = await ls.begin_progress(f"redline-reprofile-{uuid.uuid4().hex[:10]}",
                                    f"redline: profiling `{shlex.join(last.command)}` again", threading.Event())
    loop = asyncio.get_running_loop()
    try:
        if pid is not None:
            rc = await loop.run_in_executor(None, attach, pid, out, Sampling(fmt="raw"), last.attached_s)
        else:
            rc = await loop.run_in_executor(None, lambda: record(last.command, out, Sampling(), stdio_to_stderr=True,
                                                                 cwd=cwd))
    except (RecordError, AttachError) as exc:
        end(ls, token, f"failed: {exc}")
        raise CommandError(str(exc))
    # The new recording replaces the old one.
    remember_profile(ls.store.root, last.command, out, cwd, last.attached_s)
    await reload(ls)
    try:  # the two recordings of the command, and nothing else loaded: the views show this change alone
        doc = await loop.run_in_executor(None, ls.store.compare, [last.trace], [str(out)])
    except ParseError as exc:
        end(ls, token, f"recorded; not compared: {exc}")
        raise CommandError(f"recorded {out}, but it cannot be compared with {last.trace}: {exc}")
    before, after = doc.before_total_weight, doc.after_total_weight
    program = {"before": before, "after": after, "speedup": before / after if after else None,
               "unit": doc.unit, "exit_code": rc}
    before_of = {(file, function): c for (kind, file, function), c in doc.changes.items() if kind == "cpu"}
    winners = [effect(a, before_of) for a in ls.runs.accepted.values()]
    message = summary(program, winners)
    show_comparison(ls)
    end(ls, token, message)
    ls.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Info, f"redline: {message}"))
    return {"trace": str(out), "before": last.trace, "program": program, "winners": winners,
            "functions": [c.model_dump(mode="json") for c in doc.order[:10]]}


def end(ls: RedlineServer, token: str, message: str) -> None:
    if token:
        ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=message))


def summary(program: dict[str, Any], winners: list[dict[str, Any]]) -> str:
    """One line: the program before and after, then each accepted winner's verified and predicted speedups."""
    unit = "s" if program["unit"] == "seconds" else f" {program['unit']}"
    line = f"the program: {program['before']:.3g}{unit} → {program['after']:.3g}{unit}"
    if program["speedup"]:
        line += f" ({program['speedup']:.2f}x)"
    for w in winners:
        line += f"; {w['function']} verified {w['verified']:.2f}x"
        if w["predicted"] is not None:
            line += f", at {w['share']:.0%} of the program it predicted {w['predicted']:.2f}x"
    return line


def register(ls: RedlineServer) -> None:
    ls.command("redline.reprofile")(command(reprofile))
