"""Running services and before/after: `redline profile --pid` attaches to a real HTTP service under
load, stacks sampled by default are consistent, and `redline diff` compares two real recordings."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import Service, redline
from redline.profilers import report

WORKLOADS = Path(__file__).resolve().parent / "workloads"


@pytest.fixture
def service(tmp_path: Path):
    svc = Service(tmp_path)
    try:
        svc.wait_served(5)
        yield svc
    finally:
        svc.close()


def hot(trace: Path, root: Path) -> dict[str, float]:
    return {h.function: h.total_fraction for h in report([trace], root).hotspots}


@pytest.mark.slow
def test_attach_to_a_service_under_load_for_a_duration(service: Service, tmp_path: Path) -> None:
    trace = tmp_path / "service.json"
    run = redline("profile", "--pid", str(service.proc.pid), "--duration", "2", "-o", str(trace), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "py-spy> Sampling process" in run.stderr and f"trace written to {trace}" in run.stdout
    shares = hot(trace, tmp_path)
    assert shares.get("render_report", 0) > 0.3, shares
    assert "CPU hotspots" in run.stdout
    assert service.proc.poll() is None  # sampling left the service running


@pytest.mark.slow
def test_ctrl_c_ends_an_attach_and_keeps_what_was_sampled(service: Service, tmp_path: Path) -> None:
    trace = tmp_path / "service.json"
    exe = Path(sys.executable).with_name("redline")
    # Its own process group, as a terminal's foreground job: Ctrl-C reaches redline and py-spy alike.
    attach = subprocess.Popen([str(exe), "profile", "--pid", str(service.proc.pid), "-o", str(trace)], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert attach.stderr is not None
    for line in attach.stderr:
        if line.startswith("py-spy> Sampling process"):
            break
    # Samples come at py-spy's rate (100 a second): a share is read from as many as the duration test's
    # (1.5 s of requests at least; 150 requests alone were 0.1 s on a fast run, 11 samples).
    started = time.monotonic()
    while time.monotonic() - started < 1.5:
        service.wait_served(25)
    os.killpg(attach.pid, signal.SIGINT)
    out, err = attach.communicate(timeout=60)
    assert attach.returncode == 0, err
    assert hot(trace, tmp_path).get("render_report", 0) > 0.3
    assert "CPU hotspots" in out


def test_attach_without_permission_is_one_clear_error(tmp_path: Path) -> None:
    if shutil.which("capsh") is None or os.geteuid() != 0:
        pytest.skip("needs root and capsh (scripts/system-deps.sh) to drop the capability to read processes")
    target = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"])
    try:
        exe = Path(sys.executable).with_name("redline")
        run = subprocess.run(["capsh", "--drop=cap_sys_ptrace", "--", "-c",
                              f"{exe} profile --pid {target.pid} --duration 1 -o {tmp_path / 't.json'}"],
                             capture_output=True, text=True, timeout=120)
    finally:
        target.kill()
        target.wait()
    assert run.returncode == 2
    message = run.stderr.strip().splitlines()[-1]
    assert message.startswith(f"redline profile: not allowed to read process {target.pid}'s memory; run redline as root")
    assert "SYS_PTRACE" in message
    missing = redline("profile", "--pid", "999999999", cwd=tmp_path)
    assert missing.returncode == 2 and "no process 999999999" in missing.stderr
    both = redline("profile", "--pid", "1", "--", "python", "x.py", cwd=tmp_path)
    assert both.returncode == 2 and "not both" in both.stderr


def collapsed(trace: Path) -> list[tuple[list[str], int]]:
    """py-spy's raw (collapsed) stacks: frames root first, and the sample count."""
    stacks = []
    for line in trace.read_text().splitlines():
        frames, _, count = line.rpartition(" ")
        if frames:  # a sample with no Python frame (the interpreter starting or ending)
            stacks.append((frames.split(";"), int(count)))
    return stacks


@pytest.mark.slow
def test_stacks_sampled_by_default_are_consistent(tmp_path: Path) -> None:
    shutil.copy(WORKLOADS / "deep_calls.py", tmp_path / "deep_calls.py")
    trace = tmp_path / "deep.txt"
    run = redline("profile", "--format", "raw", "--rate", "250", "-o", str(trace), "--", sys.executable,
                  "deep_calls.py", "150", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    # The program's own samples (not the interpreter's start-up imports, which run from C).
    stacks = [(frames, n) for frames, n in collapsed(trace) if any("deep_calls.py" in f for f in frames)]
    samples = sum(n for _, n in stacks)
    assert samples > 200
    # They start at the program's entry: a stack read half-way through a call or return does not. Paused
    # for each sample, py-spy still reads about 1 in 5,000 of this workload's stacks while CPython links a
    # resumed generator's frame; without pausing (--nonblocking), 27-45% (tests/perf/bench_sampling.py).
    torn = sum(n for frames, n in stacks if not frames[0].startswith("<module> (deep_calls.py"))
    assert torn <= 0.01 * samples, (torn, samples)
    inclusive: dict[str, int] = defaultdict(int)
    callers: dict[str, set[str]] = defaultdict(set)
    for frames, n in stacks:
        names = [f.rsplit(":", 1)[0] for f in frames]  # a function is its name and file (every module has a <module>)
        for name in set(names):
            inclusive[name] += n
        for parent, child in itertools.pairwise(names):
            if parent != child:
                callers[child].add(parent)
    # A function with one caller is not on more samples than that caller (give or take the rare torn one).
    for callee, (caller,) in ((c, tuple(p)) for c, p in callers.items() if len(p) == 1):
        assert inclusive[callee] <= inclusive[caller] + 0.01 * samples, (callee, caller, inclusive)
    assert any(c.startswith("walk (") for c in callers[next(k for k in callers if k.startswith("leaf_cost ("))])


def slow_parse_replaced(source: str) -> str:
    """orders_work.py with the known change: parse uses str.split instead of a character loop."""
    old = source[source.index("def parse(lines):"):source.index("def total(rows):")]
    return "# parse now splits with str.split\n\n" + source.replace(
        old, 'def parse(lines):\n    return [line.split(",") for line in lines]\n\n\n')


def profile_orders(work: Path, trace: Path) -> None:
    run = redline("profile", "--rate", "200", "-o", str(trace), "--", sys.executable, "orders_work.py", "400",
                  cwd=work)
    assert run.returncode == 0, run.stderr


@pytest.mark.slow
def test_diff_of_two_real_recordings_shows_the_change_where_it_was_made(tmp_path: Path) -> None:
    # As a user works: profile, change the file in place (every line below the change moves), profile again.
    work = tmp_path / "work"
    work.mkdir()
    source = (WORKLOADS / "orders_work.py").read_text()
    (work / "orders_work.py").write_text(source)
    profile_orders(work, tmp_path / "before.json")
    (work / "orders_work.py").write_text(slow_parse_replaced(source))
    profile_orders(work, tmp_path / "after.json")
    run = redline("diff", str(tmp_path / "before.json"), str(tmp_path / "after.json"), "--json", cwd=work)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    by_name = {c["function"]: c for c in doc["functions"]}
    parse, total = by_name["parse"], by_name["total"]
    assert parse["status"] == total["status"] == "changed", doc["functions"]
    # parse lost its share (total gained about as much: shares are of each trace's own total).
    assert parse["self_delta"] < -0.15 and parse in doc["functions"][:2], parse
    assert parse["after_self_weight"] < 0.5 * parse["before_self_weight"], parse
    # The rest about the same: total's own time, in seconds, within a third.
    assert 0.67 < total["after_self_weight"] / total["before_self_weight"] < 1.5, total
    assert doc["before_unit"] == doc["after_unit"] == "seconds"
    assert doc["after_total_weight"] < doc["before_total_weight"]
    table = redline("diff", str(tmp_path / "before.json"), str(tmp_path / "after.json"), cwd=work)
    row = next(line for line in table.stdout.splitlines() if line.rstrip().endswith(")") and " parse (" in line)
    assert "pt" in row and row.split()[2].startswith("-")


@pytest.mark.slow
def test_diff_names_what_vanished_and_what_appeared(tmp_path: Path) -> None:
    for name in ("cpu_work.py", "deep_calls.py"):
        shutil.copy(WORKLOADS / name, tmp_path / name)
        run = redline("profile", "-o", str(tmp_path / f"{name}.json"), "--", sys.executable, name, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
    run = redline("diff", "cpu_work.py.json", "deep_calls.py.json", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    status = {c["function"]: c["status"] for c in json.loads(run.stdout)["functions"]}
    assert status["checksum"] == status["Grid.relax"] == "vanished"
    assert status["walk"] == status["leaf_cost"] == "appeared"
    bad = redline("diff", "missing.json", "deep_calls.py.json", cwd=tmp_path)
    assert bad.returncode == 2 and "missing.json" in bad.stderr
