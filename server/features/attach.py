"""`redline.attach [{pid, duration?}]`: sample a running Python process (a service under its real
traffic) with py-spy in windows of a few seconds, the trace so far loaded after each, so heat, hints
and lenses fill in while it runs; it stops when the user stops it (its progress is cancellable, and
`redline.cancel [{runId: "attach-PID"}]`), after `duration` seconds, or when the process ends."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pydantic import BaseModel, ConfigDict, Field
from redline.evaluator.inputs.store import remember_profile
from redline.profilers.record import AttachError, RecordError, Sampling, attach, command_of, redline_dir

from ..core import RedlineServer, command, parse_args
from .profiles import globbed, schedule_reload

WINDOW_S = 2.0  # seconds per py-spy window: how often the heat refreshes, and how long a Stop may take


def attach_trace(root: Path, pid: int) -> Path:
    """Where a recording of running process `pid` goes (collapsed stacks, loaded by the default globs)."""
    return redline_dir(root) / f"attach-{pid}-{time.strftime('%Y%m%d-%H%M%S')}.txt"


class AttachArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pid: int = Field(gt=0)
    duration: float | None = Field(None, gt=0)


async def start(ls: RedlineServer, args: tuple[Any, ...]) -> dict[str, Any]:
    a: AttachArgs = parse_args(AttachArgs, args)
    run_id = f"attach-{a.pid}"
    if run_id in ls.runs.running:
        return {"attached": a.pid, "already": True}
    stop = threading.Event()
    ls.runs.running[run_id] = stop
    trace = attach_trace(ls.store.root, a.pid)
    token = await ls.begin_progress(f"redline-{run_id}", f"redline: sampling process {a.pid}", stop)
    ls.background(_sample(ls, a, trace, token, stop, run_id))
    return {"attached": a.pid, "trace": str(trace), "runId": run_id}


async def _sample(ls: RedlineServer, a: AttachArgs, trace: Path, token: str, stop: threading.Event,
                  run_id: str) -> None:
    loop = asyncio.get_running_loop()
    window = trace.with_suffix(".window")  # not a trace the globs load: only what it adds to `trace` is
    started, windows, ended = time.monotonic(), 0, "stopped"
    try:
        while not stop.is_set():
            left = a.duration - (time.monotonic() - started) if a.duration else WINDOW_S
            if left < 0.5:
                ended = f"{a.duration:g} s sampled"
                break
            try:
                await loop.run_in_executor(None, attach, a.pid, window, Sampling(fmt="raw"), min(WINDOW_S, left))
            except (AttachError, RecordError) as exc:
                ended = f"the process ended ({exc})" if windows else str(exc)
                if not windows:
                    ls.warn(f"redline: cannot sample process {a.pid}: {exc}")
                break
            with trace.open("a") as out:  # collapsed stacks: the windows' lines add up
                out.write(window.read_text())
            window.unlink(missing_ok=True)
            windows += 1
            if windows == 1 and not globbed(ls, trace):
                ls.store.add_explicit(str(trace))  # the user's globs leave .redline/ out: load it by name
            schedule_reload(ls)
            if token:
                ls.work_done_progress.report(token, lsp.WorkDoneProgressReport(
                    message=f"{time.monotonic() - started:.0f} s sampled; the heat shows it so far"))
        if windows:  # profiled again, this service is sampled again (Profile again and compare)
            running = command_of(a.pid)
            if running is not None:
                remember_profile(ls.store.root, running[0], trace, running[1], time.monotonic() - started)
    finally:
        ls.runs.running.pop(run_id, None)
        window.unlink(missing_ok=True)
        if token:
            ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(
                message=f"{ended}; {trace.name}" if windows else ended))


def register(ls: RedlineServer) -> None:
    ls.command("redline.attach")(command(start))
