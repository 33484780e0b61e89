"""What a winner adds to the project: the packages its code imports that the target's module did not
(numba, Cython for a compiled one), and the `pyproject.toml` change that declares them, offered in the
same diff and written only with the winner."""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import sys
from pathlib import Path

from .models import FileEdit
from .target import Target, imports_of

# The compiling proposers' decorators import their compiler only when they first compile
# (proposers/compiled.py, proposers/mypyc.py): the distributions each needs.
# (mypyc builds through setuptools, which a Python 3.12 environment does not have by default).
_COMPILERS = [(re.compile(r"^\s*@_RedlineCython\(", re.M), ["cython"]),
              (re.compile(r"^\s*@_RedlineMypyc\(", re.M), ["mypy", "setuptools"])]


def needs(target: Target, code: str) -> list[str]:
    """Distributions the candidate needs where the program runs and the module did not: the top-level
    packages it imports beyond the module's own imports and the standard library."""
    own = {name.split(".")[0] for name in imports_of(target.source)}
    found: list[str] = []
    try:
        owners = importlib.metadata.packages_distributions()
    except Exception:  # a broken environment: name the import itself
        owners = {}
    for name in imports_of(code):
        top = name.split(".")[0]
        if top in own or top in sys.stdlib_module_names or top == "__future__" or _is_local(target, top):
            continue
        found.append((owners.get(top) or [top])[0])
    found += [name for used, names in _COMPILERS if used.search(code) and not used.search(target.source) for name in names]
    return sorted(dict.fromkeys(d.lower() for d in found))


def _is_local(target: Target, top: str) -> bool:
    """A module of the project itself (a sibling or a package under the project root)."""
    root = target.project_root
    return (root / f"{top}.py").exists() or (root / top / "__init__.py").exists() \
        or (target.file.parent / f"{top}.py").exists()


def dependency_edit(root: Path, requirements: list[str]) -> FileEdit | None:
    """The project's pyproject.toml with `requirements` added to `[project] dependencies` (those it does
    not name already); None where there is no such list to add to, or nothing to add."""
    path = root / "pyproject.toml"
    try:
        text = path.read_text()
    except OSError:
        return None
    project = re.search(r"(?ms)^\[project\]\s*$(.*?)(?=^\[|\Z)", text)
    deps = re.search(r"(?ms)^dependencies\s*=\s*\[(.*?)\]", project.group(1)) if project else None
    if project is None or deps is None:
        return None
    declared = {_name(d) for d in re.findall(r"[\"']([^\"']+)[\"']", deps.group(1))}
    missing = [r for r in requirements if _name(r) not in declared]
    if not missing:
        return None
    body = deps.group(1)
    indent = re.search(r"\n([ \t]+)[\"']", body)
    pad = indent.group(1) if indent else "    "
    added = "".join(f'{pad}"{r}",\n' for r in missing)
    if body.strip():
        new_body = body.rstrip() + ("" if body.rstrip().endswith(",") else ",") + "\n" + added
    else:
        new_body = "\n" + added
    at = project.start(1) + deps.start(1)
    new = text[:at] + new_body + text[at + len(body):]
    try:
        compile_toml(new)
    except ValueError:
        return None
    return FileEdit(path=str(path), sha256=hashlib.sha256(text.encode()).hexdigest(), text=new)


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def compile_toml(text: str) -> None:
    """ValueError where `text` is not TOML (the edit would break the file)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(str(exc))

