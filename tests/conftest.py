from __future__ import annotations

from pathlib import Path

import pytest
from helpers import TESTS, py_spy_record


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
