"""Capturing a real HTTP service (tests/captured/service.py) however it is stopped: SIGTERM to its
process group (as `docker stop` and systemd do), SIGINT, and pre-forked workers that end with
os._exit. Each keeps every call the service made, `redline capture` prints its summary and passes the
service's status through. The test reads the service's "listening" line from redline's stdout (no
sleeps) and talks to it over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from helpers import TESTS
from redline.evaluator.inputs.recorder._redline_capture import EXAMINE_ALL, THIN

REQUESTS = 40


@pytest.fixture()
def service(tmp_path: Path) -> Path:
    shutil.copy(TESTS / "captured" / "service.py", tmp_path / "service.py")
    (tmp_path / "redline.toml").write_text("")
    return tmp_path


def start(work: Path, *args: str, duration: str = "") -> tuple[subprocess.Popen[str], int]:
    stop = ["--duration", duration] if duration else []
    proc = subprocess.Popen([sys.executable, "-m", "redline.cli", "capture", "--target", "service.py::score", *stop,
                             "--", sys.executable, "service.py", *args], cwd=work, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("listening on "), line + proc.stderr.read() if proc.stderr else line
    return proc, int(line.split()[-1])


def post(port: int, i: int) -> float:
    body = json.dumps({"text": " ".join(["alpha", "beta", "gamma"][: 1 + i % 3] * (i + 1)),
                       "weights": {"alpha": 2.0, "beta": 0.5}}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/", data=body), timeout=30) as r:
        return json.loads(r.read())["score"]


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def seen(work: Path) -> dict:
    return json.loads((work / ".redline" / "inputs" / "service.score" / "manifest.json").read_text())


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["sigterm", "sigint", "sighup"])
def test_a_service_stopped_by_a_signal_to_its_group_keeps_its_calls(service: Path, how: signal.Signals) -> None:
    proc, port = start(service)
    for i in range(REQUESTS):
        post(port, i)
    os.killpg(proc.pid, how)  # redline and the service together, as a service manager stops them
    rc, out, err = finish(proc)
    m = seen(service)
    assert m["calls_seen"] == REQUESTS and m["calls_kept"] == REQUESTS, (out, err)
    assert f"service.py::score: kept {REQUESTS} of {REQUESTS} calls" in out
    if how == signal.SIGINT:
        assert rc != 0  # the service's KeyboardInterrupt exit status, passed through
    else:
        assert rc == 128 + how and f"the command exited with {128 + how}" in err


def test_sigterm_to_redline_alone_is_passed_to_the_service(service: Path) -> None:
    proc, port = start(service)
    for i in range(REQUESTS):
        post(port, i)
    proc.send_signal(signal.SIGTERM)  # only redline: it forwards the signal and waits for the service
    rc, out, _ = finish(proc)
    assert rc == 128 + signal.SIGTERM and seen(service)["calls_seen"] == REQUESTS, out


def test_pre_forked_workers_that_end_with_os_exit_keep_their_calls(service: Path) -> None:
    proc, port = start(service, "--prefork", "2", "--requests", str(REQUESTS // 2))
    for i in range(REQUESTS):
        post(port, i)
    rc, out, err = finish(proc)  # each worker ends with os._exit after its share; the parent then exits
    m = seen(service)
    assert rc == 0, err
    assert m["calls_seen"] == REQUESTS and m["calls_kept"] == REQUESTS and m["processes"] == 2, out


def test_a_service_run_for_a_duration_is_stopped_and_keeps_its_calls(service: Path) -> None:
    proc, port = start(service, duration="3")
    served = 0
    while True:  # until the service stops accepting: --duration ends it, however many were served by then
        try:
            post(port, served)
        except OSError:
            break
        served += 1
    rc, out, err = finish(proc)
    assert rc == 0, err  # stopped as asked: not an error
    m = seen(service)
    # Every answered request was counted; one the stop cut off mid-answer may be too. Past the first
    # EXAMINE_ALL calls each examined call counts for the calls skipped after it (the thinning stride),
    # so the count may run over by the last stride's skipped calls.
    stride = 1 + max(0, m["calls_examined"] - EXAMINE_ALL) // THIN
    assert served > 0 and served <= m["calls_seen"] <= served + stride, (served, m["calls_seen"], stride)
    assert f"service.py::score: kept {m['calls_kept']} of {m['calls_seen']} calls" in out and m["calls_kept"] > 0
    assert "running for 3 s, then stopping it" in err
