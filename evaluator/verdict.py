"""How a stage turns what a worker did into a verdict: the channel to a worker (a reply, or the
reason it is not one), and the rejection that ends a candidate's evaluation with its status."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from .models import Stage, Status
from .protocol import REPLY, ErrorInfo, LoadReply, R, Request
from .sandbox import Worker, WorkerDied, WorkerTimeout


class Rejected(Exception):
    """A stage's verdict on the candidate: it ends the evaluation with this status and reason."""

    def __init__(self, status: Status, reason: str, tail: str = "", stage: Stage | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.tail = tail
        self.stage = stage  # the stage that raised it, where not the one running (see stages.py::at)
        self.correct_at: list[str] = []  # wrong only at edge variants: the inputs it was right on (Gate.check)


def error_line(err: ErrorInfo | None) -> str:
    return f"{err.type}: {err.message}".strip() if err else "unknown error"


def died_hint(rc: int | None) -> str:
    if rc is None:
        return ""
    if rc in (-9, 137):
        return " (killed: memory or CPU limit, or escaped processes)"
    if rc in (-11, 139):
        return " (segmentation fault)"
    if rc == -6:
        return " (aborted)"
    return ""


def validated(raw: dict[str, Any], who: str, op: str) -> Any:
    """`raw` read as the reply to an `op` request (its model chosen by the operation it names)."""
    try:
        reply = REPLY.validate_python(raw)
    except ValidationError as exc:
        raise Rejected("crashed", f"{who} sent a malformed reply ({exc.errors()[0]['msg']} at "
                       f"{'.'.join(str(x) for x in exc.errors()[0]['loc'])})")
    if reply.op != op:
        raise Rejected("crashed", f"{who} answered a {op} request with a {reply.op} reply")
    return reply


class Channel:
    """One worker as a stage talks to it: requests with the run's deadline, replies validated, and
    every way a reply can fail (a deadline passed, the process died, the audit hook's findings,
    patched harness functions, an error) turned into the verdict it means."""

    def __init__(self, worker: Worker, who: str, wall_s: float) -> None:
        self.worker, self.who, self.wall_s = worker, who, wall_s

    def ask(self, req: Request[R]) -> R:
        who = self.who
        try:
            reply: R = validated(self.worker.request(req.model_dump(), self.wall_s), who, req.op)
        except WorkerTimeout:
            raise Rejected("timeout", f"{who} did not finish within {self.wall_s:g}s (killed)")
        except WorkerDied as exc:
            raise Rejected("crashed", f"{who} {exc}" + died_hint(exc.returncode), exc.stderr_tail)
        if reply.violations:
            raise Rejected("rejected_exploit", f"{who} " + "; ".join(reply.violations))
        if reply.tamper:
            raise Rejected("rejected_exploit", f"{who} " + "; ".join(reply.tamper) + " (the harness's timer and "
                           "checks are bound before candidate code runs)")
        if not reply.ok:
            raise Rejected("crashed", f"{who} failed: {error_line(reply.error)}", reply.error.tb if reply.error else "")
        return reply

    def load(self) -> LoadReply:
        """The worker's first reply: whether the code loaded (not judged here: a failed load is the
        caller's to name)."""
        reply: LoadReply = validated(self.worker.read_reply(self.wall_s), self.who, "load")
        return reply

    def cpu_seconds(self) -> float:
        return self.worker.cpu_seconds()

    def own_cpu_seconds(self) -> float:
        return self.worker.own_cpu_seconds()

    def main_thread_cpu_seconds(self) -> float:
        return self.worker.main_thread_cpu_seconds()
