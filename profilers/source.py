"""Source-side knowledge: function spans from tree-sitter, and trace paths mapped onto a workspace."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

_SKIP_DIRS = {".git", ".hg", ".venv", "venv", "node_modules", "__pycache__", ".redline", ".mypy_cache",
              ".ruff_cache", ".pytest_cache", "site-packages", "dist", "build", ".tox"}
# File names every package has: a match on the name alone says nothing (a trace's `re/__init__.py` is not
# the workspace's `tabulate/__init__.py`).
_GENERIC_NAMES = {"__init__.py", "__main__.py"}
_PYTHON_DIR = re.compile(r"python\d+(\.\d+)?t?", re.IGNORECASE)


def _skipped(folder: str) -> bool:
    """A folder whose files are not the workspace's own code (a virtual environment, a cache, a build)."""
    return folder in _SKIP_DIRS or folder.startswith(".")


def standard_library(parts: Sequence[str]) -> bool:
    """Whether a path is in a Python installation's standard library (`lib/python3.X/...`, outside
    site-packages): such a file is never the workspace's, wherever the trace was recorded."""
    for i in range(1, len(parts) - 1):
        if parts[i - 1].lower() == "lib" and _PYTHON_DIR.fullmatch(parts[i]):
            return not any(x in ("site-packages", "dist-packages") for x in parts[i + 1:])
    return False


@dataclass(frozen=True, slots=True)
class FunctionDef:
    """A `def` in a source file: qualified name as Python spells it, 1-based inclusive lines."""

    qualname: str
    name: str
    line: int
    end_line: int
    decorators: tuple[str, ...] = ()

    @property
    def is_triton_kernel(self) -> bool:
        return any(d.split("(")[0].strip().endswith(("triton.jit", "triton.autotune", "triton.heuristics"))
                   or d.split("(")[0].strip() in ("jit", "autotune") for d in self.decorators)


@lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter_python
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_python.language()))


def parse_functions(source: bytes) -> list[FunctionDef]:
    """Every function and method in `source`, outermost first, with Python-style qualnames."""
    return parse_source(source)[0]


def parse_source(source: bytes) -> tuple[list[FunctionDef], bool]:
    """parse_functions, and whether the parser met anything it could not parse (tree-sitter goes on
    past errors; the caller asks Python's own parser what it is)."""
    tree = _parser().parse(source)
    out: list[FunctionDef] = []

    def visit(node: Any, prefix: str, decorators: tuple[str, ...]) -> None:
        for child in node.children:
            kind = child.type
            if kind == "decorated_definition":
                decs = tuple(source[d.start_byte + 1:d.end_byte].decode("utf-8", "replace").strip()
                             for d in child.children if d.type == "decorator")
                definition = child.child_by_field_name("definition")
                if definition is not None:
                    handle(definition, prefix, decs, start=child)
            elif kind in ("function_definition", "class_definition"):
                handle(child, prefix, (), start=child)
            elif kind in ("block", "if_statement", "try_statement", "with_statement", "else_clause",
                          "except_clause", "finally_clause", "elif_clause", "for_statement", "while_statement"):
                visit(child, prefix, decorators)

    def handle(node: Any, prefix: str, decs: tuple[str, ...], start: Any) -> None:
        name_node = node.child_by_field_name("name")
        if name_node is None:
            return
        name = source[name_node.start_byte:name_node.end_byte].decode("utf-8", "replace")
        qual = prefix + name
        body = node.child_by_field_name("body")
        if node.type == "function_definition":
            out.append(FunctionDef(qual, name, node.start_point[0] + 1, node.end_point[0] + 1, decs))
            if body is not None:
                visit(body, qual + ".<locals>.", ())
        elif body is not None:
            visit(body, qual + ".", ())

    visit(tree.root_node, "", ())
    return out, tree.root_node.has_error


@lru_cache(maxsize=4096)
def _functions_cached(path: str, mtime_ns: int, size: int) -> tuple[FunctionDef, ...]:
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ()
    return tuple(parse_functions(data))


def functions_in(path: str | Path) -> tuple[FunctionDef, ...]:
    """Functions of a file on disk (cached until the file changes); empty if unreadable."""
    try:
        st = os.stat(path)
    except OSError:
        return ()
    return _functions_cached(str(path), st.st_mtime_ns, st.st_size)


def enclosing(functions: tuple[FunctionDef, ...], line: int) -> FunctionDef | None:
    """The innermost function whose span holds `line`."""
    best: FunctionDef | None = None
    for fn in functions:
        if fn.line <= line <= fn.end_line and (best is None or fn.line >= best.line):
            best = fn
    return best


def defined(functions: Sequence[FunctionDef], qualname: str) -> FunctionDef | None:
    """The definition of `qualname` that Python binds: the last one where it is defined more than once
    (after `@overload` stubs, the implementation)."""
    return next((fn for fn in reversed(functions) if fn.qualname == qualname), None)


def by_name(functions: tuple[FunctionDef, ...], name: str) -> FunctionDef | None:
    """The function called `name` (qualified, or a dotted suffix of the qualname, or bare)."""
    exact = defined(functions, name)
    if exact is not None:
        return exact
    plain = name.replace(".<locals>", "")
    for fn in functions:
        q = fn.qualname.replace(".<locals>", "")
        if q.endswith("." + plain) or plain.endswith("." + q) or q == plain:
            return fn
    for fn in functions:
        if fn.name == name.rsplit(".", 1)[-1]:
            return fn
    return None


def _same_contents(elsewhere: Path, mine: Path) -> bool:
    """Whether a file outside the workspace holds what the workspace's does (a copy installed into a
    virtual environment); a path that does not exist here (a trace from another machine) is taken as
    the same."""
    try:
        return elsewhere.read_bytes() == mine.read_bytes()
    except FileNotFoundError:
        return True
    except OSError:
        return False


class Workspace:
    """Maps the paths a trace names onto files under one root.

    A trace recorded elsewhere names `/home/dev/project/model/kernels.py` or just `kernels.py`;
    the match is the workspace file sharing the longest path suffix with it, and only when that
    longest match is unique. The suffix is at least the file name, and the folder too for a name
    every package has (`__init__.py`). A standard-library path never matches, and neither does a
    file that exists on this machine outside the root and shares only its name with a workspace file
    of other contents (a library's own `utils.py`).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self._by_basename: dict[str, list[tuple[str, ...]]] | None = None
        self._cache: dict[str, str | None] = {}

    def _index(self) -> dict[str, list[tuple[str, ...]]]:
        if self._by_basename is None:
            index: dict[str, list[tuple[str, ...]]] = {}
            for dirpath, dirnames, filenames in os.walk(self.root):
                dirnames[:] = [d for d in dirnames if not _skipped(d)]
                rel = Path(dirpath).relative_to(self.root).parts
                for fn in filenames:
                    if fn.endswith((".py", ".pyx", ".pyi")):
                        index.setdefault(fn, []).append((*rel, fn))
            self._by_basename = index
        return self._by_basename

    def resolve(self, trace_path: str | None) -> str | None:
        """Absolute path of the workspace file a trace path names, or None."""
        if not trace_path or trace_path.startswith("<"):
            return None
        if trace_path in self._cache:
            return self._cache[trace_path]
        found: str | None = None
        p = Path(trace_path)
        if p.is_absolute():
            try:
                inside = p.resolve().relative_to(self.root).parts[:-1]
                if p.is_file() and not any(_skipped(d) for d in inside):
                    found = str(p.resolve())
            except (ValueError, OSError):
                found = None
        if found is None:
            parts = tuple(x for x in p.parts if x not in ("/", ""))
            if parts and not standard_library(parts):
                best_len, best = 0, []
                for cand in self._index().get(parts[-1], []):
                    n = 0
                    while n < min(len(cand), len(parts)) and cand[-1 - n] == parts[-1 - n]:
                        n += 1
                    if n > best_len:
                        best_len, best = n, [cand]
                    elif n == best_len:
                        best.append(cand)
                if len(best) == 1 and best_len >= (2 if parts[-1] in _GENERIC_NAMES else 1):
                    found = str(self.root.joinpath(*best[0]))
                    if best_len == 1 and p.is_absolute() and not _same_contents(p, Path(found)):
                        found = None
        self._cache[trace_path] = found
        return found

    def display(self, path: str) -> str:
        """`path` relative to the root when inside it, else unchanged."""
        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return path

    def triton_kernels(self) -> dict[str, tuple[str, FunctionDef]]:
        """`@triton.jit` functions in the workspace by name (only files that mention triton are parsed)."""
        found: dict[str, tuple[str, FunctionDef]] = {}
        for rel_paths in self._index().values():
            for rel in rel_paths:
                path = self.root.joinpath(*rel)
                try:
                    if b"triton" not in path.read_bytes():
                        continue
                except OSError:
                    continue
                for fn in functions_in(path):
                    if fn.is_triton_kernel:
                        found.setdefault(fn.name, (str(path), fn))
        return found
