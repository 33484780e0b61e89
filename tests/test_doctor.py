"""`redline doctor` on this machine as it is and with bubblewrap taken off the PATH, and the sandbox
level an optimise states when it starts."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from helpers import TESTS, redline


def path_without_bwrap(tmp_path: Path) -> str:
    """A PATH with the tools redline looks for beside bwrap (a C compiler), but not bwrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("gcc", "cc"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


def checks(run_stdout: str) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(run_stdout)["checks"]}


def test_doctor_reports_each_part_with_its_fix(tmp_path: Path) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (scripts/system-deps.sh)")
    run = redline("doctor", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    found = checks(run.stdout)
    assert found["sandbox"]["status"] == "ok" and "bubblewrap" in found["sandbox"]["detail"]
    assert found["py-spy"]["status"] == "ok"  # CI runs as root: py-spy attaches
    assert found["interpreter"]["detail"].startswith(sys.executable)
    assert {"C compiler", "Cython", "numba", "torch"} <= set(found)

    without = redline("doctor", "--json", cwd=tmp_path, env={**os.environ, "PATH": path_without_bwrap(tmp_path)})
    assert without.returncode == 0  # process isolation works, with less: limited, not missing
    sandbox = checks(without.stdout)["sandbox"]
    assert sandbox["status"] == "limited" and "process isolation only" in sandbox["detail"]
    assert sandbox["fix"].startswith("sudo apt-get install bubblewrap")
    table = redline("doctor", cwd=tmp_path, env={**os.environ, "PATH": path_without_bwrap(tmp_path / "t")})
    assert "limited  sandbox" in table.stdout and "fix: sudo apt-get install bubblewrap" in table.stdout


@pytest.mark.slow
def test_an_optimise_states_its_sandbox_level_at_the_start(tmp_path: Path) -> None:
    shutil.copy(TESTS / "workloads" / "plain_ties.py", tmp_path / "plain_ties.py")
    env = {**os.environ, "PATH": path_without_bwrap(tmp_path)}
    run = redline("optimise", "plain_ties.py::latest", "--builtin", "ruff-fixes", "--budget", "1",
                  "--json", str(tmp_path / "r.json"), cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    line = run.stderr.splitlines()[1]
    assert line.startswith("sandbox: process isolation only") and "redline doctor" in line
    assert json.loads((tmp_path / "r.json").read_text())["isolation"].startswith("process")
