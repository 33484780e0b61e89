"""Shared test helpers: paths, the real CLI, real py-spy recordings."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent
REPO = TESTS.parent
FIXTURES = REPO.parent / "shared" / "fixtures"
if not FIXTURES.exists():
    FIXTURES = Path(os.environ.get("REDLINE_FIXTURES", REPO / "shared" / "fixtures"))
GPU = FIXTURES / "gpu"
WORKLOAD = GPU / "workload"


def redline(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the real `redline` console script."""
    exe = Path(sys.executable).with_name("redline")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "redline.cli"]
    return subprocess.run([*cmd, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def py_spy_record(script: Path, out: Path, fmt: str, rate: int = 200, extra: tuple[str, ...] = ()) -> Path:
    """Record a real program with py-spy."""
    exe = Path(sys.executable).with_name("py-spy")
    spy = str(exe) if exe.exists() else shutil.which("py-spy")
    assert spy, "py-spy is a dev dependency"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([spy, "record", "--rate", str(rate), "--format", fmt, "--output", str(out), *extra, "--",
                    sys.executable, str(script)], check=True, capture_output=True, timeout=300)
    return out


def has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())
