"""Before a winner is offered: the project's own tests that cover the target, run against a scratch
copy of the workspace with the winner applied, inside the sandbox."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from .models import Limits, Regression
from .sandbox import ExecutionBackend
from .target import Target

_IGNORE = shutil.ignore_patterns(".git", ".venv", "venv", "node_modules", ".redline", "__pycache__", ".mypy_cache",
                                 ".ruff_cache", ".pytest_cache", "*.egg-info")


def import_root(file: Path) -> Path:
    """The folder `file`'s top package is imported from (its own folder for a plain module): the
    project root in a flat layout, `src/` in a src layout."""
    folder = file.parent
    while (folder / "__init__.py").exists():
        folder = folder.parent
    return folder


def import_name(file: Path) -> str:
    """`file`'s module name as the program imports it, from its import root."""
    parts = list(file.relative_to(import_root(file)).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def covering_tests(target: Target) -> list[Path]:
    """Test files under the project that import the target's module, or a package it is in (tests that
    reach it through the package's own imports: `from mylib import parse`)."""
    dotted = import_name(target.file)
    parts = dotted.split(".")
    names = {target.module_name, dotted, parts[-1], *(".".join(parts[:i]) for i in range(1, len(parts)))}
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    pattern = re.compile(rf"^\s*(from\s+({alternatives})\s+import|import\s+({alternatives})\b)", re.M)
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
            return Regression(ran=False, passed=True, command=[], output_tail="no test file imports the target's module or a package it is in")
        command = [python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                   *[str(t.relative_to(target.project_root)) for t in tests]]
    scratch = Path(tempfile.mkdtemp(prefix="redline-regress-"))
    try:
        copy = scratch / "workspace"
        # The copy's own package first on the path: an installed copy of it (editable ones point at the
        # workspace itself) would otherwise be what the tests import, and pass without the winner.
        found = import_root(target.file)
        root = copy / found.relative_to(target.project_root) if found.is_relative_to(target.project_root) else copy
        command = ["env", f"PYTHONPATH={os.pathsep.join(p for p in (str(root), os.environ.get('PYTHONPATH')) if p)}",
                   *command]
        shutil.copytree(target.project_root, copy, ignore=_IGNORE, symlinks=True)
        (copy / target.file.relative_to(target.project_root)).write_text(new_source)
        rc, out = backend.run(command, scratch, copy, python, limits, timeout)
        if rc is None:
            return Regression(ran=True, passed=False, command=command, output_tail="timed out\n" + out)
        return Regression(ran=True, passed=rc == 0, command=command, output_tail=out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
