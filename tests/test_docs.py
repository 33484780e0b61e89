"""The docs name the code as it is: every module path docs/architecture.md names exists, and so does
every function or class it names in one (`module.py::Class.method`) or on its own (`Class.method`);
and the code stays readable: no function in the package over 60 lines."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = (ROOT / "docs" / "architecture.md").read_text()
SOURCES = {p.relative_to(ROOT).as_posix(): p.read_text() for p in ROOT.rglob("*.py")
           if p.relative_to(ROOT).parts[0] not in (".venv", "build", "vscode-extension", "node_modules")}


def modules(named: str) -> list[str]:
    """The modules a path can name: from the root, or from the package folder the sentence is about."""
    if named in SOURCES:
        return [named]
    return [m for m in SOURCES if m.endswith("/" + named) and not m.startswith("tests/")]


def defines(source: str, qualname: str) -> bool:
    return all(re.search(rf"^\s*(?:async\s+def|def|class)\s+{re.escape(part)}\b|^\s*{re.escape(part)}\s*[:=]",
                         source, re.M) for part in qualname.split("."))


def test_every_module_architecture_md_names_exists() -> None:
    named = set(re.findall(r"`([\w/]+\.py)(?:::[\w.]+)?`", TEXT))
    assert len(named) > 20
    missing = sorted(n for n in named if not modules(n))
    assert missing == [], f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_function_architecture_md_names_is_defined() -> None:
    qualified = re.findall(r"`([\w/]+\.py)::([\w.]+)`", TEXT)
    assert len(qualified) > 20
    stale = sorted(f"{m}::{q}" for m, q in qualified if not any(defines(SOURCES[f], q) for f in modules(m)))
    # `Class.method` alone: the class is defined somewhere in the package, with that method.
    bare = set(re.findall(r"`([A-Z]\w+)\.(_?\w+)`", TEXT))
    for cls, attr in sorted(bare):
        if not any(re.search(rf"^class {cls}\b", src, re.M) and defines(src, attr) for m, src in SOURCES.items()
                   if not m.startswith("tests/")):
            stale.append(f"{cls}.{attr}")
    assert stale == [], f"docs/architecture.md names functions that are not defined where it says: {stale}"


def test_no_function_in_the_package_is_over_60_lines() -> None:
    import ast

    long = []
    for name, source in SOURCES.items():
        if name.startswith("tests/"):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None \
                    and node.end_lineno - node.lineno + 1 > 60:
                long.append(f"{name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert long == [], long
