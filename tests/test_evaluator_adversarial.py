"""Every cheat docs/trust-model.md lists as a candidate, fed through the real `redline optimise` CLI.

One CLI run evaluates the whole directory; each candidate's status and the words of its reason
are asserted. The honest vectorised rewrite must win; the exact copy must not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ADVERSARIAL_EXPECT as EXPECT
from helpers import TESTS, redline

ADV = TESTS / "adversarial"



@pytest.fixture(scope="module")
def adversarial_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    work = tmp_path_factory.mktemp("adv")
    shutil.copy(ADV / "target.py", work / "target.py")
    before = (work / "target.py").read_text()
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-SECRET-never-leaks", "MY_SECRET": "hunter2"}
    env.pop("OPENAI_BASE_URL", None)
    report = work / "report.json"
    res = redline("optimise", f"{work / 'target.py'}::affine", "--candidates", str(ADV / "candidates"),
                  "--no-builtin", "--budget", "100", "--timeout", "6", "--json", str(report), cwd=work, env=env,
                  timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (work / "target.py").read_text() == before, "the workspace must not be written without --apply"
    assert not (work / "owned.txt").exists()
    doc = json.loads(report.read_text())
    assert "sk-test-SECRET" not in report.read_text() and "hunter2" not in report.read_text()
    by_file = {c["origin"].removeprefix("file:"): c for c in doc["candidates"]}
    by_file["__report__"] = doc
    return by_file


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_cheat_is_rejected_with_its_reason(adversarial_report: dict[str, dict[str, object]], name: str) -> None:
    statuses, words = EXPECT[name]
    got = adversarial_report[name]
    assert got["status"] in statuses, (got["status"], got["reason"])
    for word in words:
        assert word in str(got["reason"]), got["reason"]


# The stage that turns each away (models.py::Stage), where only one can.
DECIDED_AT = {"garbage_reply.md": "checks", "hang_at_import.py": "load", "warmup_then_cheap.py": "timing",
              "patched_comparison.py": "gate", "crashes.py": "gate", "fake_equality.py": "gate",
              "mutates_only.py": "gate", "background_thread.py": "gate", "patched_timer.py": "load"}


def test_each_verdict_names_the_stage_that_decided_it(adversarial_report: dict[str, dict[str, object]]) -> None:
    for name, want in DECIDED_AT.items():
        got = adversarial_report[name]
        assert got["stage"] == want, (name, got["stage"], got["status"], got["reason"])
    for name in EXPECT:
        got = adversarial_report[name]
        if got["status"] in ("ok", "not_faster"):  # a timing decided it (the target's own code: same_code)
            assert got["stage"] in ("timing", "pairs", "same_code"), (name, got["stage"])
        assert got["trusted"] is False


def test_honest_rewrite_wins_with_an_interval(adversarial_report: dict[str, dict[str, object]]) -> None:
    doc = adversarial_report["__report__"]
    winner = doc["winner"]
    honest = adversarial_report["honest_vectorised.py"]
    assert winner is not None and winner["id"] == honest["id"]
    low, high = winner["speedup_ci95"]
    assert winner["speedup"] > 10 and 1 < low <= winner["speedup"] <= high
    assert "+    return x * w + 1.0" in winner["diff"]
    copy = adversarial_report["exact_copy.py"]
    assert copy["speedup_ci95"][0] <= 1.0 <= copy["speedup_ci95"][1] or copy["speedup"] < 1.05


def test_no_escaped_process_survives(adversarial_report: dict[str, dict[str, object]]) -> None:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert "sleep 12345" not in out


def test_trivial_output_against_a_tiny_reference_is_caught(tmp_path: Path) -> None:
    shutil.copy(ADV / "tiny" / "target.py", tmp_path / "target.py")
    cands = tmp_path / "cands"
    cands.mkdir()
    shutil.copy(ADV / "tiny" / "zeros.py", cands / "zeros.py")
    res = redline("optimise", f"{tmp_path / 'target.py'}::tiny", "--candidates", str(cands), "--no-builtin",
                  "--json", str(tmp_path / "r.json"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    cand = json.loads((tmp_path / "r.json").read_text())["candidates"][0]
    assert cand["status"] == "incorrect" and "tolerance" in cand["reason"]


def test_bad_targets_exit_2(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def f(x):\n    return x\n")
    for target, words in ((f"{tmp_path / 'm.py'}", "FILE::QUALNAME"), (f"{tmp_path / 'nope.py'}::f", "no such file"),
                          (f"{tmp_path / 'm.py'}::g", "no function 'g'"), (f"{tmp_path / 'm.py'}::f", "make_inputs")):
        res = redline("optimise", target, "--no-builtin", "--candidates", str(tmp_path))
        assert res.returncode == 2 and words in res.stderr and "Traceback" not in res.stderr, (target, res.stderr)


def test_no_proposer_is_exit_3(tmp_path: Path) -> None:
    shutil.copy(ADV / "target.py", tmp_path / "target.py")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    res = redline("optimise", f"{tmp_path / 'target.py'}::affine", "--no-builtin", env=env)
    assert res.returncode == 3 and "no proposer" in res.stderr


def test_apply_writes_only_an_unchanged_file(tmp_path: Path) -> None:
    shutil.copy(ADV / "target.py", tmp_path / "target.py")
    cands = tmp_path / "cands"
    cands.mkdir()
    shutil.copy(ADV / "candidates" / "honest_vectorised.py", cands / "v.py")
    res = redline("optimise", f"{tmp_path / 'target.py'}::affine", "--candidates", str(cands), "--no-builtin",
                  "--apply", cwd=tmp_path)
    assert res.returncode == 0 and "applied" in res.stdout, res.stderr
    text = (tmp_path / "target.py").read_text()
    assert "return x * w + 1.0" in text and "for i in range" not in text.split("def make_inputs")[0]
    assert "def make_inputs" in text


RACING = ("background_thread.py", "daemon_thread.py", "threads_joined.py")


def test_racing_verdicts_are_the_same_on_every_run(tmp_path: Path) -> None:
    """Cheats that race the harness (and the honest candidate nearest to them) five times each: every
    copy gets the same verdict, because the harness wins the race by construction (threads started in
    a checked call wait before running, and their end is judged against the call's actual return)."""
    cands = tmp_path / "cands"
    cands.mkdir()
    for name in RACING:
        for i in range(5):
            (cands / f"{Path(name).stem}_{i}.py").write_text((ADV / "candidates" / name).read_text() + f"# copy {i}\n")
    shutil.copy(ADV / "target.py", tmp_path / "target.py")
    res = redline("optimise", f"{tmp_path / 'target.py'}::affine", "--candidates", str(cands), "--no-builtin",
                  "--budget", "100", "--json", str(tmp_path / "r.json"), cwd=tmp_path, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    got = {c["origin"].removeprefix("file:"): c for c in json.loads((tmp_path / "r.json").read_text())["candidates"]}
    for name in RACING:
        statuses, words = EXPECT[name]
        runs = [got[f"{Path(name).stem}_{i}.py"] for i in range(5)]
        assert all(r["status"] in statuses for r in runs), [(r["status"], r["reason"]) for r in runs]
        assert all(w in r["reason"] for r in runs for w in words)
        if "ok" not in statuses:  # a cheat's verdict is one verdict; an honest one's speed is measured
            assert len({r["status"] for r in runs}) == 1, [r["status"] for r in runs]


def test_the_worker_clock_is_checked_against_the_kernels_count_not_the_harness_wall() -> None:
    """The timer rule on its own: a worker whose clock reports less time than the kernel counted as CPU
    for its main thread is rejected; one whose request took far longer on the wall than it says (the
    harness's reader scheduled late under load) is not, since wall time no longer enters the rule. The
    worker process's CPU counters are a stand-in here (they are read from /proc in a real run)."""
    from redline.evaluator.inputs.plan import InputPlan
    from redline.evaluator.models import EvalSettings
    from redline.evaluator.protocol import TimeReply
    from redline.evaluator.timing import Timing
    from redline.evaluator.verdict import Rejected

    class Counters:
        who = "the candidate"

        def own_cpu_seconds(self) -> float:
            return 1.0

    timing = Timing(EvalSettings(), InputPlan.__new__(InputPlan), None, trusted=False)  # type: ignore[arg-type]
    honest = TimeReply(op="time", ok=True, worker_s=0.004, batch_s=0.003)
    timing._candidate_rules(Counters(), honest, 1.0, main_cpu=0.0)  # type: ignore[arg-type]
    timing._candidate_rules(Counters(), honest, 1.0, main_cpu=0.02)  # type: ignore[arg-type]  # within a tick
    with pytest.raises(Rejected, match="patched timer") as exc:
        timing._candidate_rules(Counters(), honest, 1.0, main_cpu=0.06)  # type: ignore[arg-type]
    assert exc.value.status == "rejected_exploit" and "0.0600s of CPU" in exc.value.reason


class _ScriptedWorker:
    """The candidate's side of `Timing._candidate_rules`, with the worker process's CPU count scripted:
    the gaps between real batches last what the scheduler gives them, so a real worker cannot show a
    chosen amount of work in a chosen gap on every run."""

    def __init__(self) -> None:
        self.cpu = 0.0

    def own_cpu_seconds(self) -> float:
        return self.cpu


def _gaps(idle: list[float], trusted: bool = False) -> list[str]:
    """Batches of 0.02 s CPU with `idle` s of CPU in the gap before each; the rules' verdict per batch."""
    from redline.evaluator.models import EvalSettings
    from redline.evaluator.protocol import TimeReply
    from redline.evaluator.timing import Timing
    from redline.evaluator.verdict import Rejected

    timing = Timing(EvalSettings(), plan=None, gate=None, trusted=trusted)  # type: ignore[arg-type]
    worker, seen = _ScriptedWorker(), []
    for gap in idle:
        worker.cpu += gap
        before = worker.cpu
        worker.cpu += 0.02
        try:
            timing._candidate_rules(worker, TimeReply(op="time", worker_s=0.02, batch_s=0.02), before, 0.02)  # type: ignore[arg-type]
            seen.append("ok")
        except Rejected as e:
            seen.append(e.reason)
            break
    return seen


def test_work_between_batches_rejects_when_it_recurs_not_when_a_library_settles_once() -> None:
    # One gap with work (a compiler's last step) passes; work in every gap (handed off by the calls) rejects
    # at the second, naming both amounts.
    assert _gaps([0, 0.3, 0, 0, 0, 0]) == ["ok"] * 6
    seen = _gaps([0, 0.08, 0, 0.09, 0, 0])
    assert seen[:3] == ["ok"] * 3 and "0.080s, 0.090s of CPU while idle" in seen[3] and len(seen) == 4
    assert _gaps([0, 0.04, 0.04, 0.04]) == ["ok"] * 4  # below the floor: a worker's own housekeeping
    assert _gaps([0, 0.3, 0.3, 0.3], trusted=True) == ["ok"] * 4  # redline's own proposers are not audited
