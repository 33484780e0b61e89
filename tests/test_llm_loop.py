"""The LLM path end to end: `redline optimise` against a real local OpenAI-protocol server."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import TESTS, redline
from openai_server import ScriptedOpenAI

GOOD = "Here you go:\n```python\ndef affine(x, w):\n    return x * w + 1.0\n```\n"
WRONG = "```python\ndef affine(x, w):\n    return x * w\n```"
GARBAGE = "I think vectorising would help, but I am not sure how."


def run(tmp_path: Path, server: ScriptedOpenAI, *extra: str) -> tuple[dict, object]:
    shutil.copy(TESTS / "adversarial" / "target.py", tmp_path / "target.py")
    env = {**os.environ, "OPENAI_API_KEY": "sk-local-test"}
    report = tmp_path / "r.json"
    res = redline("optimise", f"{tmp_path / 'target.py'}::affine", "--no-builtin", "--base-url", server.url,
                  "--model", "tiny", "--json", str(report), *extra, cwd=tmp_path, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(report.read_text()), res


def test_round_two_prompt_carries_round_one_feedback_and_the_winner_is_verified(tmp_path: Path) -> None:
    with ScriptedOpenAI([{"reply": GARBAGE}, {"reply": WRONG}, {"reply": GOOD}, {"reply": GARBAGE}]) as server:
        doc, _ = run(tmp_path, server, "--rounds", "2", "--budget", "4")
    statuses = [c["status"] for c in doc["candidates"]]
    assert statuses[:2] == ["build_error", "incorrect"] or statuses[:2] == ["incorrect", "build_error"], statuses
    assert doc["winner"] is not None and doc["candidates"][[c["status"] for c in doc["candidates"]].index("ok")]["origin"] == "llm:tiny"
    round2 = server.requests[2]["messages"][-1]["content"]
    assert "incorrect" in round2 and "wrong result" in round2 and "build_error" in round2
    assert all(r["stream"] for r in server.requests)
    assert "sk-local-test" not in json.dumps(doc)
    # The prompt says what the function is timed on: argument types and shapes, and the hardware.
    prompt = server.requests[0]["messages"][-1]["content"]
    assert "argument 1: numpy.ndarray float64 shape (3000,)" in prompt and "argument 2: numpy.ndarray" in prompt
    assert "cores" in prompt.split("Hardware:", 1)[1].split("\n", 1)[0]


def test_retries_429_and_500_then_succeeds(tmp_path: Path) -> None:
    with ScriptedOpenAI([{"status": 429}, {"status": 500}, {"reply": GOOD}, {"reply": GOOD}]) as server:
        doc, _ = run(tmp_path, server, "--rounds", "1", "--budget", "2")
    assert len(server.requests) >= 4 and doc["winner"] is not None


def test_client_errors_are_not_retried_and_do_not_crash(tmp_path: Path) -> None:
    with ScriptedOpenAI([{"status": 400}] * 10) as server:
        doc, _ = run(tmp_path, server, "--rounds", "1")
    assert len(server.requests) == 2  # one per requested candidate, no retries on 400
    assert doc["winner"] is None and "llm failed" in " ".join(doc["notes"])


def test_resume_keeps_the_measured_candidates_and_goes_on(tmp_path: Path) -> None:
    with ScriptedOpenAI([{"reply": WRONG}, {"reply": GARBAGE}]) as server:
        first, _ = run(tmp_path, server, "--rounds", "1", "--budget", "2")
    assert first["winner"] is None and len(first["candidates"]) == 2
    with ScriptedOpenAI([{"reply": GOOD}, {"reply": WRONG}]) as server:
        doc, _ = run(tmp_path, server, "--rounds", "1", "--budget", "4", "--resume", first["run_id"])
        prompt = server.requests[0]["messages"][-1]["content"]
    assert doc["run_id"] == first["run_id"] and "resumed with 2 earlier candidates" in doc["notes"]
    assert [c["round"] for c in doc["candidates"]][:2] == [1, 1] and doc["candidates"][2]["round"] == 2
    assert doc["winner"] is not None and "wrong result" in prompt  # round 2 learnt from the resumed round 1
    ids = [c["id"] for c in doc["candidates"]]
    assert len(ids) == len(set(ids)) == 3  # WRONG again is the same code: not measured twice


def test_resume_refuses_a_changed_file(tmp_path: Path) -> None:
    with ScriptedOpenAI([{"reply": WRONG}, {"reply": WRONG}]) as server:
        first, _ = run(tmp_path, server, "--rounds", "1", "--budget", "1")
    (tmp_path / "target.py").write_text((tmp_path / "target.py").read_text() + "\n# edited\n")
    env = {**os.environ, "OPENAI_API_KEY": "x"}
    res = redline("optimise", f"{tmp_path / 'target.py'}::affine", "--no-builtin", "--base-url", "http://127.0.0.1:9/v1",
                  "--resume", first["run_id"], cwd=tmp_path, env=env)
    assert res.returncode == 2 and "cannot resume" in res.stderr


def test_prompt_carries_the_hotspot_from_a_profile(tmp_path: Path) -> None:
    from helpers import py_spy_record

    shutil.copy(TESTS / "adversarial" / "target.py", tmp_path / "target.py")
    (tmp_path / "run.py").write_text("from target import affine, make_inputs\nfor s in range(300):\n"
                                     "    affine(*make_inputs(s))\n")
    trace = py_spy_record(tmp_path / "run.py", tmp_path / "t.json", "speedscope")
    with ScriptedOpenAI([{"reply": GOOD}, {"reply": GOOD}]) as server:
        doc, _ = run(tmp_path, server, "--rounds", "1", "--budget", "1", "--profile", str(trace))
        prompt = server.requests[0]["messages"][-1]["content"]
    assert "Profile: CPU self" in prompt and "hottest lines L" in prompt
    assert doc["winner"] is not None


def test_several_choices_from_one_request_are_each_a_candidate(tmp_path: Path) -> None:
    with ScriptedOpenAI([{"replies": [WRONG, GOOD]}]) as server:
        doc, _ = run(tmp_path, server, "--rounds", "1", "--llm-candidates", "2", "--llm-choices", "2")
    assert len(server.requests) == 1 and server.requests[0]["n"] == 2
    assert sorted(c["status"] for c in doc["candidates"]) == ["incorrect", "ok"]
    assert doc["winner"] is not None


def test_non_streamed_replies_work_and_their_usage_is_counted(tmp_path: Path) -> None:
    with ScriptedOpenAI([{"reply": GOOD}, {"reply": GARBAGE}]) as server:
        doc, _ = run(tmp_path, server, "--rounds", "1", "--no-stream")
    assert [r["stream"] for r in server.requests] == [False, False]
    assert doc["winner"] is not None and doc["cost"]["tokens"] == 40  # the server's usage: 20 per reply
    assert sorted(c["status"] for c in doc["candidates"]) == ["build_error", "ok"]


def test_a_slow_stream_within_the_timeout_is_used(tmp_path: Path) -> None:
    # Each 40-character chunk is held back 0.3 s: the reply takes ~1 s, under the 5 s timeout.
    with ScriptedOpenAI([{"reply": GOOD, "chunk_delay": 0.3}]) as server:
        doc, _ = run(tmp_path, server, "--rounds", "1", "--llm-candidates", "1", "--llm-timeout", "5")
    assert len(server.requests) == 1 and doc["winner"] is not None


def test_a_reply_slower_than_the_timeout_is_retried_then_given_up(tmp_path: Path) -> None:
    with ScriptedOpenAI([{"reply": GOOD, "delay": 4}] * 4) as server:
        doc, _ = run(tmp_path, server, "--rounds", "1", "--llm-candidates", "1", "--llm-timeout", "1",
                       "--llm-retries", "1")
    assert len(server.requests) == 2  # the first try and one retry, then no more
    assert doc["candidates"] == [] and doc["winner"] is None
    assert any("llm failed in round 1" in n and "timed out" in n.lower() for n in doc["notes"]), doc["notes"]


def test_the_cost_counts_device_seconds(tmp_path: Path) -> None:
    with ScriptedOpenAI([{"reply": GOOD}, {"reply": WRONG}]) as server:
        doc, _ = run(tmp_path, server, "--rounds", "1")
    cost = doc["cost"]
    per_candidate = [c["eval_s"] for c in doc["candidates"]]
    assert all(s > 0 for s in per_candidate) and abs(cost["device_s"] - sum(per_candidate)) < 1e-6
    assert cost["device_s"] <= cost["wall_s"] and cost["accepted_rate"] == 0.5
    assert all(c["host"] for c in doc["candidates"])
    timed = next(c for c in doc["candidates"] if c["status"] == "ok")
    assert timed["hardware"] and doc["hardware"] == timed["hardware"]


def test_feedback_says_where_a_gpu_calls_time_went() -> None:
    """The next prompt tells the model, per CUDA candidate, GPU time against the host's time to issue the
    call (figures of a compiled rmsnorm on the H200), so a launch-bound rewrite is named as such."""
    from redline.evaluator.models import CandidateResult
    from redline.evaluator.proposers.llm import _feedback

    r = CandidateResult(id="c1", origin="llm:tiny", status="ok", reason="5.52x faster", median_s=315.3e-6,
                        speedup=5.52, gpu={"name": "NVIDIA H200", "gpu_time_s": 128.6e-6, "issue_s": 323.0e-6,
                                           "baseline_gpu_time_s": 1739.4e-6, "baseline_issue_s": 248.5e-6})
    line = _feedback([r])
    assert "candidate 128.6 µs on the GPU, 323.0 µs to issue, launch-bound" in line
    assert "baseline 1739.4 µs on the GPU, 248.5 µs to issue" in line and "baseline 1739.4 µs on the GPU, 248.5 µs to issue," not in line
    cpu = CandidateResult(id="c2", origin="llm:tiny", status="ok", reason="2x", median_s=1e-3, speedup=2.0)
    assert "per call" not in _feedback([cpu])


@pytest.mark.parametrize("stream", [True, False])
def test_cancel_stops_an_llm_request_in_flight_and_offers_the_best_so_far(tmp_path: Path, stream: bool) -> None:
    # Round 1's reply is verified; round 2's request is held for a minute: Ctrl-C while it is in flight.
    shutil.copy(TESTS / "adversarial" / "target.py", tmp_path / "target.py")
    with ScriptedOpenAI([{"reply": GOOD}, {"reply": WRONG, "delay": 60}]) as server:
        exe = Path(sys.executable).with_name("redline")
        proc = subprocess.Popen([str(exe), "optimise", f"{tmp_path / 'target.py'}::affine", "--no-builtin",
                                 "--base-url", server.url, "--model", "m", "--rounds", "2", "--llm-candidates", "1",
                                 "--json", str(tmp_path / "r.json"), *([] if stream else ["--no-stream"])],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        server.wait_requests(2)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    assert proc.returncode == 130, err[-2000:]
    assert took < 15, f"the run went on for {took:.0f} s after the cancel (the reply was held 60 s)"
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["cancelled"] and [c["id"] for c in doc["candidates"]] == ["c1"] and doc["winner"]["id"] == "c1"
    assert "best so far (cancelled) c1:" in out


SCALE = "```python\ndef scale(values, factor, lock=None):\n    return [v * factor for v in values]\n```"


def test_captured_values_stay_out_of_the_prompt_unless_redline_toml_allows_them(tmp_path: Path) -> None:
    shutil.copy(TESTS / "captured" / "app.py", tmp_path / "app.py")
    (tmp_path / "redline.toml").write_text("")
    cap = redline("capture", "--target", "app.py::scale", "--", sys.executable, "app.py", cwd=tmp_path)
    assert cap.returncode == 0, cap.stderr

    def prompt() -> str:
        with ScriptedOpenAI([{"reply": SCALE}]) as server:
            res = redline("optimise", "app.py::scale", "--no-builtin", "--base-url", server.url, "--model", "m",
                          "--rounds", "1", "--llm-candidates", "1", cwd=tmp_path)
            assert res.returncode == 0, res.stderr[-2000:]
            return server.requests[0]["messages"][-1]["content"]

    withheld = prompt()
    assert "- argument 2: int\n" in withheld and "e.g." not in withheld  # the type, not the program's value
    assert f"In the captured run (`{sys.executable} app.py`) it was called 30 times." in withheld
    (tmp_path / "redline.toml").write_text("prompt_values = true\n")
    assert "- argument 2: int (e.g. 2)\n" in prompt()


def test_a_description_without_its_values() -> None:
    from redline.evaluator.proposers.llm import without_values

    assert [without_values(d) for d in ["int (e.g. 5)", "list of 3 x float (e.g. 0.5)", "dict of 2 ('user', 'token')",
                                        "str of length 12", "numpy.ndarray float64 shape (3,)"]] == \
        ["int", "list of 3 x float", "dict of 2", "str of length 12", "numpy.ndarray float64 shape (3,)"]


def test_once_timed_the_prompt_says_what_a_call_of_the_original_costs(tmp_path: Path) -> None:
    with ScriptedOpenAI([{"reply": GOOD}, {"reply": GOOD}]) as server:
        run(tmp_path, server, "--rounds", "2", "--llm-candidates", "1")
    first, second = (r["messages"][-1]["content"] for r in server.requests)
    assert "One call of the original takes" not in first  # nothing timed yet
    assert "One call of the original takes " in second and " ms (median, as timed here)." in second
