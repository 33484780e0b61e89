from __future__ import annotations

from pathlib import Path

import pytest
from helpers import TESTS, py_spy_record
from hypothesis import settings

# Property tests draw the same examples on every run, so a verdict never depends on the draw;
# `--hypothesis-profile fuzz` draws new ones, many more, to look for what these miss.
settings.register_profile("ci", max_examples=250, deadline=None, derandomize=True, print_blob=True)
settings.register_profile("fuzz", max_examples=20_000, deadline=None)
settings.load_profile("ci")


@pytest.fixture(scope="session")
def cpu_recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One real py-spy recording of tests/workloads/cpu_work.py in each format."""
    d = tmp_path_factory.mktemp("cpu")
    script = TESTS / "workloads" / "cpu_work.py"
    return {
        "speedscope": py_spy_record(script, d / "cpu.speedscope.json", "speedscope"),
        "raw": py_spy_record(script, d / "cpu.txt", "raw"),
        "nolineno": py_spy_record(script, d / "cpu_nolineno.txt", "raw", extra=("--nolineno",)),
    }
