"""What is being optimised: `FILE::QUALNAME`, its source span, its inputs, its project."""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from redline.profilers.source import FunctionDef, defined, parse_source

from .inputs import InputSource
from .inputs.store import StoreError, capture_hint, read_manifest, store_dir


class TargetError(Exception):
    """The target or its inputs cannot be used (CLI exit 2)."""


class UnsupportedTarget(TargetError):
    """redline cannot judge candidates for this target: it cannot compare what the target returns or
    changes, or the comparison would lose what tells two outcomes apart. redline's own limit, reported
    as `unsupported`, never as a candidate's failure."""


class EditError(TargetError):
    """A candidate's code cannot be written into the target's file as a valid module."""


class NoInputs(TargetError):
    """The target has no inputs yet: no --inputs, no make_inputs, no captured calls."""

    def __init__(self, message: str, spec: str) -> None:
        super().__init__(message)
        self.spec = spec  # FILE::QUALNAME to capture


@dataclass(frozen=True)
class Target:
    file: Path
    qualname: str
    fn: FunctionDef
    source: str  # the whole file, as read when the run began
    project_root: Path
    inputs: InputSource

    @property
    def function_source(self) -> str:
        lines = self.source.splitlines(keepends=True)
        return "".join(lines[self.fn.line - 1:self.fn.end_line])

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    @property
    def module_name(self) -> str:
        return module_name_of(self.file, self.project_root)

    @property
    def kernelbench(self) -> bool:
        return self.inputs.kind == "kernelbench"

    @property
    def spec(self) -> str:
        """FILE::QUALNAME with FILE relative to the project root."""
        return f"{self.file.relative_to(self.project_root).as_posix()}::{self.qualname}"

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]


def module_name_of(file: Path, root: Path) -> str:
    """The dotted module name of `file` within the project `root` (its stem outside it)."""
    try:
        rel = file.relative_to(root).with_suffix("")
    except ValueError:
        return file.stem
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts) or file.stem


def project_root(file: Path) -> Path:
    """The nearest folder above `file` with pyproject.toml, setup.py, redline.toml or .git; else its folder."""
    for parent in file.parents:
        if any((parent / m).exists() for m in ("pyproject.toml", "setup.py", "setup.cfg", "redline.toml", ".git")):
            return parent
    return file.parent


@dataclass(frozen=True)
class Located:
    """A function named `FILE::QUALNAME`, found in its file's current text."""

    file: Path
    file_part: str  # FILE as the user gave it, for messages
    qualname: str
    fn: FunctionDef
    source: str


@lru_cache(maxsize=32)
def _parsed(source: str) -> tuple[SyntaxError | None, tuple[FunctionDef, ...]]:
    """Why `source` does not parse (None where it does), and its functions: once per text (`redline
    capture` locates several hot functions of one large module), Python's parser only where
    tree-sitter's met an error."""
    functions, broken = parse_source(source.encode())
    if broken:
        try:
            ast.parse(source)
        except SyntaxError as exc:
            return exc, ()
    return None, tuple(functions)


def locate(spec: str) -> Located:
    """Find `FILE::QUALNAME`, or raise TargetError saying what is wrong with it."""
    if "::" not in spec:
        raise TargetError(f"{spec}: expected FILE::QUALNAME, e.g. app.py::smooth or model.py::Model.forward")
    file_part, qual = spec.rsplit("::", 1)
    file = Path(file_part).resolve()
    if not file.is_file():
        raise TargetError(f"{file_part}: no such file")
    try:
        source = file.read_bytes().decode("utf-8")  # exact bytes: the digest must match the file
    except (OSError, UnicodeDecodeError) as exc:
        raise TargetError(f"{file_part}: cannot read ({exc})")
    error, fns = _parsed(source)
    if error is not None:
        raise TargetError(f"{file_part}:{error.lineno}: the file does not parse ({error.msg})")
    fn = defined(fns, qual)
    if fn is None:
        known = ", ".join(f.qualname for f in fns[:12])
        raise TargetError(f"{file_part}: no function {qual!r} (functions here: {known or 'none'})")
    return Located(file, file_part, qual, fn, source)


def load_target(spec: str, inputs: str | None = None) -> Target:
    """Parse `FILE::QUALNAME` (and `--inputs FILE::FUNC`) into a Target, or raise TargetError."""
    found = locate(spec)
    file, file_part, qual, fn, source = found.file, found.file_part, found.qualname, found.fn, found.source
    root = project_root(file)
    if _defines(source, "get_inputs") and qual.split(".")[0] == "Model":
        source_of_inputs = InputSource("kernelbench")
    elif inputs:
        if "::" not in inputs:
            raise TargetError(f"{inputs}: expected FILE::FUNC for --inputs")
        ifile, ifunc = inputs.rsplit("::", 1)
        inputs_file = Path(ifile).resolve()
        if not inputs_file.is_file():
            raise TargetError(f"{ifile}: no such file (--inputs)")
        if not _defines(inputs_file.read_text(), ifunc):
            raise TargetError(f"{ifile}: no top-level function {ifunc}() (--inputs)")
        source_of_inputs = InputSource("make_inputs", inputs_file, ifunc)
    elif _defines(source, "make_inputs"):
        source_of_inputs = InputSource("make_inputs", file, "make_inputs")
    else:
        source_of_inputs = _captured(file, qual, root, file_part)
    return Target(file, qual, fn, source, root, source_of_inputs)


def _captured(file: Path, qual: str, root: Path, file_part: str) -> InputSource:
    """The calls `redline capture` kept for the target, or TargetError naming the command to run."""
    folder = store_dir(root, module_name_of(file, root), qual)
    try:
        manifest = read_manifest(folder)
    except StoreError as exc:
        raise TargetError(str(exc))
    if manifest is None or manifest.calls_kept == 0:
        why = "no inputs" if manifest is None else "the last capture kept no calls"
        raise NoInputs(f"{file_part}: {why} for {qual}: record real calls with\n  "
                          f"{capture_hint(f'{file_part}::{qual}', root)}\n(or define make_inputs(seed) in the module, or pass "
                          "--inputs FILE::FUNC)", f"{file}::{qual}")
    return InputSource("captured", store=folder, manifest=manifest)


def _defines(source: str, name: str) -> bool:
    """Whether `source` has a top-level `def name(`."""
    return re.search(rf"^def {re.escape(name)}\(", source, re.M) is not None


def extract_code(reply: str) -> str | None:
    """The first fenced ```python block of an LLM reply (docs/cli.md, Candidate files), else None."""
    m = re.search(r"```(?:python|py)[^\n]*\n(.*?)```", reply, re.S)
    return textwrap.dedent(m.group(1)) if m else None


def imports_of(code: str) -> list[str]:
    """Top-level module names a candidate imports (the harness imports them before the sandbox hook)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return sorted(set(names))


def check_candidate(code: str, target: Target) -> str | None:
    """Why a candidate cannot even be built (syntax, missing function), or None."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}: {exc.msg}"
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if target.name not in names:
        return f"the code does not define {target.name}() at top level"
    return None


_RAW_MEMORY_MODULES = {"ctypes", "_ctypes", "cffi", "mmap"}


def raw_memory_use(code: str) -> str | None:
    """Why a candidate reaches raw memory (ctypes, cffi, mmap, numpy's `.ctypes`), or None.

    Python's audit hooks do not see every ctypes call (`ctypes.memset` raises no event), so this
    is checked on the source before the candidate runs.
    """
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in _RAW_MEMORY_MODULES:
                    return f"imports {a.name} (raw memory access is not allowed in candidates)"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _RAW_MEMORY_MODULES:
            return f"imports from {node.module} (raw memory access is not allowed in candidates)"
        elif isinstance(node, ast.Attribute) and node.attr in ("ctypes", "__array_interface__"):
            return f"uses .{node.attr} (raw memory access is not allowed in candidates)"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in _RAW_MEMORY_MODULES:
            return f"names the module {node.value!r} (raw memory access is not allowed in candidates)"
    return None


def function_node(source: str, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The top-level definition of `name` in `source` (ValueError where there is none)."""
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    raise ValueError(f"no function {name}() at the top level")


def rename_def(code: str, name: str, new: str) -> str:
    """`code` with the header of its top-level `def name` renamed to `new` (the body, and any recursive
    calls in it, untouched)."""
    fn = function_node(code, name)
    lines = code.splitlines(keepends=True)
    i = fn.lineno - 1
    head = "async def " if isinstance(fn, ast.AsyncFunctionDef) else "def "
    at = lines[i].index(head + name, fn.col_offset)
    lines[i] = lines[i][:at] + head + new + lines[i][at + len(head + name):]
    return "".join(lines)


def apply_candidate(target: Target, code: str) -> str:
    """The target file with the function replaced by the candidate (new imports go to the top).

    For a method, the candidate's definition of it replaces the method in its class and everything else
    the candidate defines (helpers, constants, kernels) goes to module level just above the class's
    top-level statement: where the evaluator ran it, in the candidate's module namespace, which is
    what the method's bare names refer to. `from __future__` imports go to the top of the module. A
    definition of a name the module already defines is dropped where it is the file's own, copied (the
    file's moves up with the target where it stood below it and the target's decorators read it), and
    is an EditError where it differs; so is a result that does not compile: nothing is offered or
    written that would not behave as it did when verified."""
    lines = target.source.splitlines(keepends=True)
    start, end = target.fn.line - 1, target.fn.end_line
    first = lines[start]
    indent = first[:len(first) - len(first.lstrip())]
    module = ast.parse(target.source)
    futures, imports, body, helpers, moved = _placed(target, module, code)
    for a, b in sorted(moved, reverse=True):  # below everything else this edit touches
        lines = [*lines[:a], *lines[b:]]
    # Definitions are set apart as PEP 8 asks: two blank lines at module level, one inside a class.
    replacement = ("\n\n" if indent else "\n\n\n").join(b.rstrip("\n") for b in body) + "\n"
    if indent:
        replacement = textwrap.indent(replacement, indent)
    new = [*lines[:start], replacement, *lines[end:]]
    # Each insertion is at or above the one before it, so the original file's line numbers still hold.
    if helpers:
        at = _top_level_start(module, target.fn.line)
        new = [*new[:at], "\n\n\n".join(h.rstrip("\n") for h in helpers) + "\n\n\n", *new[at:]]
    if imports:
        at = _prologue_end(module, futures_only=False)
        new = new[:at] + imports + new[at:]
    if futures:
        at = _prologue_end(module, futures_only=True)
        new = new[:at] + futures + new[at:]
    text = "".join(new)
    try:
        compile(text, str(target.file), "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise EditError(f"{target.file.name} with the candidate written in does not compile: {exc.msg} "
                        f"(line {exc.lineno})")
    return text


def _placed(target: Target, module: ast.Module,
            code: str) -> tuple[list[str], list[str], list[str], list[str], list[tuple[int, int]]]:
    """The candidate's top-level statements by where apply_candidate puts them: `from __future__` imports,
    other new imports, what replaces the target, and (for a method) what goes to module level; and the
    line ranges of the file's own copies of them that lie below the target, which move up with it."""
    futures: list[str] = []
    imports: list[str] = []
    body: list[str] = []
    helpers: list[str] = []
    moved: list[tuple[int, int]] = []
    lines = target.source.splitlines(keepends=True)
    top = _top_level_start(module, target.fn.line)
    method = target.qualname.rsplit(".", 1)[-1] if "." in target.qualname else None
    name = method or target.qualname
    taken = {n for node in module.body for n in _bound(node)} - ({name} if method is None else set())
    code_lines = code.splitlines(keepends=True)
    tree = ast.parse(code)
    early = _read_when_defined(tree, name)
    file_decorators = [_normal(d) for d in target.fn.decorators]
    for node in tree.body:
        seg = "".join(code_lines[node.lineno - 1 - len(getattr(node, "decorator_list", [])):node.end_lineno])
        is_target = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
        decorators = getattr(node, "decorator_list", [])
        if is_target and file_decorators and \
                [ast.unparse(d) for d in decorators[:len(file_decorators)]] == file_decorators:
            # The target's decorators, repeated: the file keeps its own above the def (the worker's
            # with_decorators runs the candidate so).
            kept = decorators[len(file_decorators):]
            seg = "".join(code_lines[(kept[0].lineno if kept else node.lineno) - 1:node.end_lineno])
        clash = [] if is_target else sorted(_bound(node) & taken)
        if clash and seg.strip() in target.source:
            own = _own_copy(module, lines, seg) if set(clash) & early else None
            if own is None or own[0] < top:
                continue  # the file's own definition, copied: it stays where it is
            # Below the target, whose decorators or defaults read it when the module is imported (a second
            # compiled winner above the first): it moves up with the target.
            moved.append(own)
            clash = []
        if clash:
            # The evaluator ran the candidate's version for the target alone; written in, it would replace
            # the file's for every caller in the module, which nothing verified.
            raise EditError(f"the candidate defines {', '.join(clash)} differently from {target.file.name}, whose "
                            "other code uses it too")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if seg.strip() not in target.source:
                future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
                (futures if future else imports).append(seg if seg.endswith("\n") else seg + "\n")
        elif method is None or is_target:
            body.append(seg)
        else:
            helpers.append(seg)
    return futures, imports, body, helpers, moved


def _normal(decorator: str) -> str:
    """A decorator's text (without its `@`) as ast.unparse writes it."""
    try:
        return ast.unparse(ast.parse(decorator.strip(), mode="eval").body)
    except SyntaxError:
        return decorator.strip()


def _read_when_defined(tree: ast.Module, name: str) -> set[str]:
    """The names the def of `name` reads when the module runs it (in its decorators and defaults) and, in
    turn, those the candidate's definitions of them read when they run: a decorator's class reads its
    base class (mypyc's helper is a subclass of Cython's), which must be defined above it too."""
    defs = {bound: node for node in tree.body for bound in _bound(node)}
    found: set[str] = set()
    todo = [name]
    while todo:
        node = defs.get(todo.pop())
        for read in (_reads_when_run(node) - found) if node is not None else set():
            found.add(read)
            todo.append(read)
    return found


def _reads_when_run(node: ast.stmt) -> set[str]:
    """The names a module-level statement reads when it runs: a def's decorators and defaults; a class's
    decorators, bases and keywords, and its body's statements (its methods' decorators and defaults); any
    other statement, all it names."""
    def of_def(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.expr | None]:
        return [*fn.decorator_list, *fn.args.defaults, *fn.args.kw_defaults]

    parts: list[ast.AST | None]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parts = list(of_def(node))
    elif isinstance(node, ast.ClassDef):
        parts = [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]
        for stmt in node.body:
            parts += of_def(stmt) if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) else [stmt]
    else:
        parts = [node]
    return {n.id for part in parts if part is not None for n in ast.walk(part)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _own_copy(module: ast.Module, lines: list[str], seg: str) -> tuple[int, int] | None:
    """The line range (0-based, end exclusive, with the blank lines after it) of the module-level statement
    whose text is `seg`."""
    for node in module.body:
        start = _top_level_start(module, node.lineno)
        end = node.end_lineno or node.lineno
        if "".join(lines[start:end]).strip() == seg.strip():
            while end < len(lines) and not lines[end].strip():
                end += 1
            return start, end
    return None


def _bound(node: ast.stmt) -> set[str]:
    """The module-level names a statement defines (functions, classes, assigned names)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _top_level_start(module: ast.Module, line: int) -> int:
    """The index of the first line (decorators included) of the module-level statement holding `line`."""
    for node in module.body:
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            decorators = getattr(node, "decorator_list", [])
            return (decorators[0].lineno if decorators else node.lineno) - 1
    return line - 1


def _prologue_end(module: ast.Module, futures_only: bool) -> int:
    """The index of the line after the module's docstring and the imports that open it (only its
    `from __future__` imports where `futures_only`); 0 where it opens with neither."""
    last = 0
    for node in module.body:
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        docstring = last == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
            isinstance(node.value.value, str)
        if docstring or future or (not futures_only and isinstance(node, (ast.Import, ast.ImportFrom))):
            last = node.end_lineno or last
        else:
            break
    return last
