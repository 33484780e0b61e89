"""compute-sanitizer's verdicts read from its own logs: the real logs recorded on the H200
(tests/fixtures/sanitizer/, made by `tests/perf/device_proof.sh sanitizer`) of the planted kernels in
tests/gpu/checked and an honest Triton kernel."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import FIXTURES, TESTS
from redline.evaluator.sanitizer import LOG, Finding, read_log, tools_for

LOGS = FIXTURES / "sanitizer"


def finding(tmp_path: Path, name: str, tool: str) -> Finding | None:
    shutil.copy(LOGS / f"{tool}_{name}.log", tmp_path / LOG)
    return read_log(tmp_path, tool)


def test_an_out_of_bounds_store_is_an_error_named_as_the_tool_names_it(tmp_path: Path) -> None:
    got = finding(tmp_path, "oob_write", "memcheck")
    assert got is not None and got.errors >= 1 and got.first.startswith("Invalid __global__ write"), got
    assert got.errors == 98 and got.first == "Invalid __global__ write of size 16 bytes", got  # as recorded


def test_a_shared_memory_race_is_an_error_of_racecheck(tmp_path: Path) -> None:
    got = finding(tmp_path, "shared_race", "racecheck")
    assert got is not None and got.errors >= 1 and "Race" in got.first, got
    # As recorded: 1 error and 1 warning ("Maximum number of hazards reached"); the warning is neither
    # counted nor named as the finding.
    assert got.errors == 1 and got.first.startswith("Error: Race reported between Write access"), got


# The honest Triton kernel under each tool, and the racing kernel under memcheck: a race is no memory error.
@pytest.mark.parametrize(("name", "tool"), [("clean", "memcheck"), ("clean", "initcheck"), ("clean", "racecheck"),
                                            ("shared_race", "memcheck")])
def test_what_a_tool_does_not_look_for_is_no_error(tmp_path: Path, name: str, tool: str) -> None:
    got = finding(tmp_path, name, tool)
    assert got is not None and got.errors == 0 and got.first == "", got


def test_a_log_without_a_summary_is_no_verdict(tmp_path: Path) -> None:
    text = (LOGS / "memcheck_oob_write.log").read_text()
    (tmp_path / LOG).write_text(text.split("ERROR SUMMARY")[0])  # the tool stopped before its summary
    assert read_log(tmp_path, "memcheck") is None
    assert read_log(tmp_path / "missing", "memcheck") is None


def test_racecheck_runs_where_the_code_can_use_shared_memory() -> None:
    checked = TESTS / "gpu" / "checked"
    assert "racecheck" in tools_for((checked / "shared_race.py").read_text())
    assert "racecheck" not in tools_for((checked / "oob_write.py").read_text())
