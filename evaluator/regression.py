"""Before a winner is offered: the project's own tests that cover the target, run against a scratch
copy of the workspace with the winner applied, inside the sandbox."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from .models import Limits, Regression
from .sandbox import ExecutionBackend
from .target import Target

_IGNORE = shutil.ignore_patterns(".git", ".venv", "venv", "node_modules", ".redline", "__pycache__", ".mypy_cache",
                                 ".ruff_cache", ".pytest_cache", "*.egg-info")


def covering_tests(target: Target) -> list[Path]:
    """Test files under the project that import the target's module."""
    module = target.module_name
    stem = module.rsplit(".", 1)[-1]
    pattern = re.compile(rf"^\s*(from\s+{re.escape(module)}\s+import|import\s+{re.escape(module)}\b|"
                         rf"from\s+{re.escape(stem)}\s+import|import\s+{re.escape(stem)}\b)", re.M)
    found = []
    for path in sorted(target.project_root.rglob("*.py")):
        rel = path.relative_to(target.project_root).parts
        if any(p in (".venv", "venv", "node_modules", ".git", ".redline") for p in rel):
            continue
        if (path.name.startswith("test_") or path.name.endswith("_test.py")) and path != target.file:
            try:
                if pattern.search(path.read_text(errors="replace")):
                    found.append(path)
            except OSError:
                continue
    return found


def run_regression(target: Target, new_source: str, backend: ExecutionBackend, python: str,
                   command: list[str] | None, limits: Limits, timeout: float = 300.0) -> Regression:
    """Run `command` (or pytest on the covering tests) on a scratch copy with `new_source` applied."""
    if command is None:
        tests = covering_tests(target)
        if not tests:
            return Regression(ran=False, passed=True, command=[], output_tail="no test imports the target's module")
        command = [python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                   *[str(t.relative_to(target.project_root)) for t in tests]]
    scratch = Path(tempfile.mkdtemp(prefix="redline-regress-"))
    try:
        copy = scratch / "workspace"
        shutil.copytree(target.project_root, copy, ignore=_IGNORE, symlinks=True)
        (copy / target.file.relative_to(target.project_root)).write_text(new_source)
        rc, out = backend.run(command, scratch, copy, python, limits, timeout)
        if rc is None:
            return Regression(ran=True, passed=False, command=command, output_tail="timed out\n" + out)
        return Regression(ran=True, passed=rc == 0, command=command, output_tail=out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
