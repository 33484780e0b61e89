"""The wheel users install holds every module of the package.

An editable install imports the working tree, so a module the wheel leaves out goes unnoticed
until someone installs redline the normal way. scripts/check-wheel.sh (run by CI) installs the
wheel into a fresh venv and runs the demo and the server from it; this test is the quick check
that needs no network.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_SHIPPED = ("tests/", "scripts/", "vscode-extension/", "build/", ".venv/")


def package_sources() -> set[str]:
    """Every Python file of the package in this checkout, as its path in the wheel."""
    found = set()
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(NOT_SHIPPED) or relative == "setup.py" or "/." in f"/{relative}":
            continue
        found.add(f"redline/{relative}")
    return found


@pytest.mark.slow
def test_the_wheel_ships_every_module_and_the_recorder(tmp_path: Path) -> None:
    leftovers = [ROOT / "build", ROOT / "redline.egg-info"]
    existed = [path.exists() for path in leftovers]
    try:
        built = subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
            capture_output=True, text=True, cwd=tmp_path,
        )
    finally:
        for path, was_there in zip(leftovers, existed, strict=True):
            if not was_there:
                shutil.rmtree(path, ignore_errors=True)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = tmp_path.glob("redline-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {name for name in names if name.endswith(".py")}
    assert package_sources() - shipped == set()
    assert "redline/evaluator/inputs/recorder/_redline_capture.py" in shipped
    assert "redline/setup.py" not in names
    assert not any(name.startswith(("redline/tests/", "redline/scripts/")) for name in names)
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    assert "redline = redline.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
