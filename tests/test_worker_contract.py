"""The worker's replies against their models (evaluator/protocol.py), every operation on a real CPU worker.

The harness reads a reply that breaks its model as the candidate's crash ("malformed reply"), so a
worker operation that replies with a key its model lacks turns a candidate's own error into the
harness's. Each operation runs here on a sandboxed worker of a captured target, as it answers an
honest candidate and one that raises, and each reply must validate against the model its request
names, the error replies included. A new operation without a case here fails the coverage check.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from helpers import redline
from redline.evaluator.evaluate import Evaluator
from redline.evaluator.models import EvalSettings
from redline.evaluator.protocol import (
    REPLY,
    Check,
    Energy,
    Locals,
    Oracle,
    ProfiledCalls,
    Reproduce,
    Request,
    Time,
    Variants,
)
from redline.evaluator.target import load_target

MODULE = "def scale(xs, k):\n    return [x * k for x in xs]\n"
WORK = "from m import scale\nfor n in range(1, 40):\n    scale([float(i) for i in range(n)], 1.5)\n"
RAISES = "def scale(xs, k):\n    raise ValueError('the candidate blew up')\n"
BAD_IMPORT = "raise ImportError('no such thing')\n\ndef scale(xs, k):\n    return xs\n"


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory) -> Any:
    work = tmp_path_factory.mktemp("contract")
    (work / "m.py").write_text(MODULE)
    (work / "work.py").write_text(WORK)
    cap = redline("capture", "--target", "m.py::scale", "--", sys.executable, "work.py", cwd=work)
    assert cap.returncode == 0, cap.stderr
    ev = Evaluator(load_target(f"{work / 'm.py'}::scale"), EvalSettings(), probe=False)
    assert ev.plan.captured
    yield ev
    ev.close()


def replies(ev: Evaluator, code: str | None, requests: list[Request[Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The load reply, then each request's reply, raw, from one worker of `code` (None: the target)."""
    ch = ev.workers.start(code, trusted=code is None, who="the worker")
    try:
        out = [("load", ch.worker.read_reply(30))]
        if out[0][1].get("ok"):
            out += [(req.op, ch.worker.request(req.model_dump(), 30)) for req in requests]
        return out
    finally:
        ch.worker.close()


def every_request() -> list[Request[Any]]:
    return [Check(seeds=[0, 1], repeat=2), Variants(seeds=[0]), Variants(seeds=[0], inputs=1, only=[0]),
            Time(seeds=[0, 1, 2], keep=[0]), Reproduce(seeds=[0, 1]), Locals(seeds=[0, 1]), Oracle(seeds=[0]),
            ProfiledCalls(seeds=[0]), Energy(seeds=[0], min_s=0.01)]


def validated(op: str, raw: dict[str, Any]) -> Any:
    reply = REPLY.validate_python(raw)  # raises on a key the model lacks or a value of the wrong type
    assert reply.op == op and type(reply).__name__.lower() == f"{op}reply", (op, type(reply).__name__)
    return reply


def test_every_operation_is_covered() -> None:
    classes, ops = list(Request.__subclasses__()), set()
    while classes:  # Check subclasses Request[CheckReply], which subclasses Request
        cls = classes.pop()
        classes += cls.__subclasses__()
        if isinstance(cls.model_fields["op"].default, str):
            ops.add(cls.model_fields["op"].default)
    assert ops == {req.op for req in every_request()}, "a worker operation has no contract case here"


def test_replies_to_the_target_validate(evaluator: Evaluator) -> None:
    got = replies(evaluator, None, every_request())
    assert [op for op, _ in got] == ["load", *[r.op for r in every_request()]]
    for op, raw in got:
        reply = validated(op, raw)
        assert reply.ok and reply.error is None, (op, raw)
    by_op = {op: validated(op, raw) for op, raw in got}
    assert len(by_op["check"].results) == 2 and by_op["time"].batch_error is None
    assert all(r.recorded is not None for r in by_op["reproduce"].reproduced)
    assert by_op["locals"].types["xs"] == ["builtins.list"]


def test_a_candidates_errors_are_replies_of_the_right_model(evaluator: Evaluator) -> None:
    got = dict(replies(evaluator, RAISES, [Check(seeds=[0]), Time(seeds=[0]), ProfiledCalls(seeds=[0])]))
    check = validated("check", got["check"])
    assert check.results[0].runs[0].error.type == "builtins.ValueError"
    timed = validated("time", got["time"])
    # The exception's line, and its traceback apart (the report's tail).
    assert timed.batch_error == "ValueError: the candidate blew up" and "Traceback" in timed.batch_traceback
    # The profile's error is the candidate's (Nsight Compute and compute-sanitizer read it as its crash).
    assert "ValueError: the candidate blew up" in validated("profile", got["profile"]).batch_error


def test_a_failed_operation_and_a_failed_load_are_error_replies(evaluator: Evaluator) -> None:
    _, (op, raw) = replies(evaluator, None, [Reproduce(seeds=[999])])  # no captured call 999
    failed = validated(op, raw)
    assert not failed.ok and failed.error is not None and failed.error.type == "IndexError"
    ((op, raw),) = replies(evaluator, BAD_IMPORT, [])
    bad = validated(op, raw)
    assert not bad.ok and bad.error.type == "ImportError" and "no such thing" in bad.error.message
