"""redline's own rewrites of plain Python, where no linter has them.

Each rewrite edits the target's source text at the positions of its syntax tree's nodes, so what it
does not change (comments, formatting) stays as the user wrote it. Each is a candidate the gate
verifies on the target's calls; none is assumed safe:
- lookups bound to locals: builtins and module globals read inside loops, and bound methods called
  in a loop on a name the loop does not rebind (`out.append`), are read once;
- regexes compiled once: `re.match(CONSTANT, s)` and the like, and `re.compile(CONSTANT)` in the
  body, become module-level compiled patterns;
- membership in constant lists: `x in NAMES`, where NAMES is a module-level list or tuple of
  literals the module never changes, tests a frozenset of it;
- strings built in loops: `s = ""` then only `s += piece` in a loop collects the pieces in a list and
  joins them once after it;
- queues: a local list only appended to, tested and popped from the front (`q.pop(0)`) becomes a
  `collections.deque` popped with `popleft()`.
"""

from __future__ import annotations

import ast
import builtins
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..target import Target
from . import Context, Proposal, Proposer
from .lint import heat

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@dataclass
class Edits:
    """Text edits on a source, at syntax-tree positions (lines 1-based, columns in UTF-8 bytes)."""

    source: str
    replace: list[tuple[int, int, int, int, str]] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)  # module-level lines the rewrite needs
    rows: set[int] = field(default_factory=set)  # the lines it changed
    blocked: bool = False  # a line could not be inserted (a statement not at the start of its line)

    def node(self, node: ast.expr | ast.stmt, text: str) -> None:
        assert node.end_lineno is not None and node.end_col_offset is not None
        self.replace.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, text))
        self.rows.add(node.lineno)

    def insert_line(self, before: ast.stmt, *statements: str) -> None:
        """Statements on their own lines above `before`, at its indentation."""
        line = self.source.splitlines()[before.lineno - 1]
        indent = line[:len(line) - len(line.lstrip())]
        if len(indent.encode()) != before.col_offset:  # `def f(x): return ...`, `a = 1; for ...`
            self.blocked = True
        text = "".join(f"{indent}{statement}\n" for statement in statements)
        self.replace.append((before.lineno, 0, before.lineno, 0, text))
        self.rows.add(before.lineno)

    def insert_after(self, after: ast.stmt, statement: str) -> None:
        """A statement on its own line below `after` (all of it), at its indentation."""
        assert after.end_lineno is not None
        line = self.source.splitlines()[after.lineno - 1]
        indent = line[:len(line) - len(line.lstrip())]
        if len(indent.encode()) != after.col_offset:
            self.blocked = True
        self.replace.append((after.end_lineno + 1, 0, after.end_lineno + 1, 0, f"{indent}{statement}\n"))
        self.rows.add(after.end_lineno)

    def apply(self) -> str:
        lines = [line.encode() for line in self.source.splitlines(keepends=True)]
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line))
        data = b"".join(lines)
        # From the end, so earlier positions still hold; an insertion sorts before a replacement at the same place.
        for l1, c1, l2, c2, text in sorted(self.replace, key=lambda e: (e[0], e[1], e[2] != e[0] or e[3] != e[1]),
                                           reverse=True):
            a, b = starts[l1 - 1] + c1, starts[l2 - 1] + c2
            data = data[:a] + text.encode() + data[b:]
        return data.decode()


@dataclass(frozen=True)
class Rewrite:
    name: str
    code: str  # the candidate: helpers, then the rewritten function
    rows: frozenset[int]


def _function(source: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    node = ast.parse(source).body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return node


def _stored(tree: ast.AST) -> set[str]:
    """Every name bound anywhere in `tree`, nested scopes included (arguments, targets, imports, defs)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (*_SCOPES[:2], ast.ClassDef)) and node is not tree:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif (isinstance(node, ast.ExceptHandler) and node.name) or (isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name):
            names.add(node.name)
    return names


def _module_names(module: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in module.body:
        names |= _stored(node) if not isinstance(node, _SCOPES) else {node.name}
    return names


def _declared_global(module: ast.Module) -> set[str]:
    """Names some function of the module rebinds with `global`: their value can change during a call."""
    return {name for node in ast.walk(module) if isinstance(node, ast.Global) for name in node.names}


def _per_iteration(loop: ast.For | ast.AsyncFor | ast.While) -> Iterator[ast.AST]:
    """The nodes of a loop evaluated on every iteration: its body and a while loop's test."""
    for part in [*loop.body, *([loop.test] if isinstance(loop, ast.While) else [])]:
        yield from ast.walk(part)


def _in_loops(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes evaluated once per iteration of a loop or comprehension in `fn`."""
    for node in ast.walk(fn):
        if isinstance(node, _LOOPS):
            yield from _per_iteration(node)
        elif isinstance(node, _COMPREHENSIONS):
            parts: list[ast.AST] = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            parts += [cond for gen in node.generators for cond in gen.ifs]
            parts += [gen.iter for gen in node.generators[1:]]
            for part in parts:
                yield from ast.walk(part)


def _fresh(name: str, taken: set[str]) -> str:
    fresh = f"_{name}"
    while fresh in taken:
        fresh = f"_{fresh}"
    taken.add(fresh)
    return fresh


def _body_start(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.stmt:
    """The first statement after the docstring (where bindings read once go)."""
    body = fn.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1]
    return body[0]


def local_lookups(source: str, module: ast.Module, at: int) -> Edits | None:
    """Builtins and module globals read in loops, bound to locals once at the top of the function."""
    fn = _function(source)
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(fn)):
        return None
    local = _stored(fn)
    known = (_module_names(module) | set(dir(builtins))) - _declared_global(module) - {"__class__", "super"}
    reads: dict[str, list[ast.Name]] = {}
    seen: set[int] = set()
    for node in _in_loops(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and id(node) not in seen \
                and node.id in known and node.id not in local:
            seen.add(id(node))
            reads.setdefault(node.id, []).append(node)
    if not reads:
        return None
    edits, taken = Edits(source), local | _module_names(module)
    aliases = []
    for name in sorted(reads):
        alias = _fresh(name, taken)
        aliases.append(f"{alias} = {name}")
        # Every read in the function's body, so the loop's and the rest agree on one lookup (not its
        # defaults, annotations or decorators: the module evaluates those, where the alias is not bound).
        for node in (n for stmt in fn.body for n in ast.walk(stmt)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id == name:
                edits.node(node, alias)
    edits.insert_line(_body_start(fn), *aliases)
    return None if edits.blocked else edits


def hoisted_methods(source: str, module: ast.Module, at: int) -> Edits | None:
    """`name.method(...)` called in a loop that never rebinds `name`: the bound method read once, above
    the outermost such loop."""
    fn = _function(source)
    taken = _stored(fn) | _module_names(module)
    edits = Edits(source)
    outer = [n for n in ast.walk(fn) if isinstance(n, _LOOPS)
             and not any(n is not m and n in ast.walk(m) for m in ast.walk(fn) if isinstance(m, _LOOPS))]
    for loop in outer:
        rebound = _stored(loop) | _stored_attributes(loop)
        calls: dict[tuple[str, str], list[ast.Attribute]] = {}
        for node in _per_iteration(loop):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id not in rebound \
                    and not node.func.attr.startswith("__"):
                calls.setdefault((node.func.value.id, node.func.attr), []).append(node.func)
        for (owner, attr), funcs in sorted(calls.items()):
            alias = _fresh(f"{owner}_{attr}".lstrip("_"), taken)
            edits.insert_line(loop, f"{alias} = {owner}.{attr}")
            for func in funcs:
                edits.node(func, alias)
    return edits if edits.replace and not edits.blocked else None


def _stored_attributes(tree: ast.AST) -> set[str]:
    """Names whose attributes `tree` assigns or deletes (`x.append = ...`): their methods may change."""
    return {n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)
            and isinstance(n.value, ast.Name)}


# re's functions and how many positional arguments the compiled pattern's method takes in their place
# (a further positional one would be re's `flags`, where the method would read it as a position).
_RE_FUNCTIONS = {"match": 1, "search": 1, "fullmatch": 1, "findall": 1, "finditer": 1, "split": 2, "sub": 3,
                 "subn": 3, "compile": 0}


def _re_module(module: ast.Module) -> str | None:
    for node in module.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "re":
                    return alias.asname or "re"
    return None


def _constant_flags(node: ast.expr, re_name: str) -> bool:
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id == re_name and node.attr.isupper()
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _constant_flags(node.left, re_name) and _constant_flags(node.right, re_name)
    return isinstance(node, ast.Constant) and isinstance(node.value, int)


def _segment(source: str, node: ast.expr) -> str:
    """The node's text as written (a raw string stays raw); one line when it spans several."""
    text = ast.get_source_segment(source, node) or ast.unparse(node)
    return text if "\n" not in text else ast.unparse(node)


def compiled_regexes(source: str, module: ast.Module, at: int) -> Edits | None:
    """`re.f(CONSTANT, ...)` and `re.compile(CONSTANT)` in the function: compiled once at module level."""
    re_name = _re_module(module)
    fn = _function(source)
    if re_name is None or re_name in _stored(fn):
        return None
    edits, taken = Edits(source), _stored(fn) | _module_names(module)
    patterns: dict[str, str] = {}
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == re_name
                and node.func.attr in _RE_FUNCTIONS and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, (str, bytes))):
            continue
        kind = node.func.attr
        flags = [k.value for k in node.keywords if k.arg == "flags"]
        rest = [k for k in node.keywords if k.arg != "flags"]
        positional = 1 if kind == "compile" else 1 + _RE_FUNCTIONS[kind]
        if kind == "compile" and len(node.args) == 2:
            flags, positional = [node.args[1]], 2
        if len(node.args) > positional or any(k.arg is None for k in rest) or not all(
                _constant_flags(f, re_name) for f in flags) or (kind == "compile" and rest):
            continue
        text = [_segment(source, a) for a in [node.args[0], *flags]]
        compiled = f"{re_name}.compile({', '.join(text)})"
        if compiled not in patterns:
            patterns[compiled] = _fresh(f"redline_re_{len(patterns)}", taken).lstrip("_")
        name = patterns[compiled]
        if kind == "compile":
            edits.node(node, name)
            continue
        args = [_segment(source, a) for a in node.args[1:]] + [f"{k.arg}={_segment(source, k.value)}" for k in rest]
        edits.node(node, f"{name}.{kind}({', '.join(args)})")
    if not patterns:
        return None
    edits.helpers = [f"import {re_name}" if re_name == "re" else f"import re as {re_name}", "",
                     *(f"{name} = {compiled}" for compiled, name in patterns.items())]
    return edits


def _constant_sequences(module: ast.Module) -> dict[str, int]:
    """Module-level lists and tuples of literals that the module never changes: name -> their line."""
    found: dict[str, int] = {}
    for stmt in module.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, (ast.List, ast.Tuple)) and stmt.value.elts \
                and all(isinstance(e, ast.Constant) and e.value is not Ellipsis for e in stmt.value.elts):
            found[stmt.targets[0].id] = stmt.lineno
    changed: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and found.get(node.id) != node.lineno:
            changed.add(node.id)  # bound again somewhere (a local of the same name too: the check stays simple)
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.value, ast.Name) and (
                not isinstance(node.ctx, ast.Load) or getattr(node, "attr", "") in _MUTATORS):
            changed.add(node.value.id)  # NAMES[i] = ..., NAMES.append(...)
        elif isinstance(node, ast.Global):
            changed.update(node.names)
    return {name: line for name, line in found.items() if name not in changed}


_MUTATORS = {"append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse", "__setitem__", "__iadd__"}


def constant_membership(source: str, module: ast.Module, at: int) -> Edits | None:
    """`x in NAMES` (or `not in`) on a never-changed module-level list or tuple of literals: a frozenset."""
    fn = _function(source)
    # Defined above the target: the frozenset goes there, and is built when the module is imported.
    constants = {n for n, line in _constant_sequences(module).items() if line < at and n not in _stored(fn)}
    edits, taken = Edits(source), _stored(fn) | _module_names(module)
    sets: dict[str, str] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
                and isinstance(node.comparators[0], ast.Name) and node.comparators[0].id in constants:
            name = node.comparators[0].id
            if name not in sets:
                sets[name] = _fresh(f"{name}_set".lstrip("_"), taken)
            edits.node(node.comparators[0], sets[name])
    if not sets:
        return None
    edits.helpers = [f"{alias} = frozenset({name})" for name, alias in sets.items()]
    return edits


def joined_strings(source: str, module: ast.Module, at: int) -> Edits | None:
    """`s = ""` then `s += piece` in a loop that does nothing else with `s`: the pieces collected in a list
    and joined once after the loop (each `+=` may copy the string built so far)."""
    fn = _function(source)
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(fn)):
        return None
    edits, taken = Edits(source), _stored(fn) | _module_names(module)
    for block in (getattr(n, part) for n in ast.walk(fn) for part in ("body", "orelse", "finalbody")
                  if isinstance(getattr(n, part, None), list)):
        for i, stmt in enumerate(block):
            start = _empty_string(stmt)
            if start is None:
                continue
            name, empty = start
            loop = _only_appended_in(block[i + 1:], name)
            if loop is None:
                continue
            parts = _fresh(f"{name}_parts".lstrip("_"), taken)
            assert isinstance(stmt, ast.Assign)
            edits.node(stmt.targets[0], parts)
            edits.node(stmt.value, "[]")
            for node in ast.walk(loop):
                if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
                    edits.node(node, f"{parts}.append({_segment(source, node.value)})")
            edits.insert_after(loop, f"{name} = {empty!r}.join({parts})")
    return edits if edits.replace and not edits.blocked else None


def _empty_string(stmt: ast.stmt) -> tuple[str, str | bytes] | None:
    """(name, "") for `name = ""` (or b"")."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
            and isinstance(stmt.value, ast.Constant) and stmt.value.value in ("", b""):
        return stmt.targets[0].id, stmt.value.value
    return None


def _only_appended_in(rest: list[ast.stmt], name: str) -> ast.stmt | None:
    """The first statement of `rest` that uses `name`, where it is a loop that only appends to it
    (`name += piece`, the piece not reading `name`, no nested function seeing it); else None."""
    for stmt in rest:
        uses = [n for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id == name]
        if not uses:
            continue
        if not isinstance(stmt, _LOOPS) or any(isinstance(n, (*_SCOPES, *_COMPREHENSIONS)) for n in ast.walk(stmt)):
            return None
        augs = [n for n in ast.walk(stmt) if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
                and n.target.id == name]
        if not augs or not all(isinstance(a.op, ast.Add) for a in augs):
            return None
        reads = [n for a in augs for n in ast.walk(a.value) if isinstance(n, ast.Name) and n.id == name]
        return stmt if len(uses) == len(augs) and not reads else None
    return None


def deque_queues(source: str, module: ast.Module, at: int) -> Edits | None:
    """A local list used as a queue (`q = [...]`, then only `q.pop(0)`, `q.append`, `q.extend`, `len(q)`
    and tests of `q`): a `collections.deque`, whose `popleft` does not move every other item."""
    fn = _function(source)
    edits = Edits(source)
    assigned: dict[str, list[ast.Assign]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            assigned.setdefault(node.targets[0].id, []).append(node)
    parents = {child: parent for parent in ast.walk(fn) for child in ast.iter_child_nodes(parent)}
    for name, assigns in assigned.items():
        if len(assigns) != 1 or not isinstance(assigns[0].value, ast.List) or name in {a.arg for a in fn.args.args}:
            continue
        uses = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and n is not assigns[0].targets[0]]
        pops = [parents[parents[n]] for n in uses if _queue_call(parents, n) == "pop0"]
        if not pops or not all(_queue_call(parents, n) for n in uses) or _closure_sees(fn, name):
            continue
        value = assigns[0].value
        edits.node(value, f"collections.deque({_segment(source, value)})")
        for call in pops:
            assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            edits.node(call, f"{name}.popleft()")
    if not edits.replace:
        return None
    edits.helpers = ["import collections"]
    return edits


def _queue_call(parents: dict[ast.AST, ast.AST], use: ast.Name) -> str | None:
    """How a use of a queue's name uses it: "pop0" for `.pop(0)`, "ok" for what a deque does alike
    (append, extend, len, a test), None for anything else (an index, a slice, passing it on)."""
    parent = parents.get(use)
    if isinstance(parent, ast.Attribute) and isinstance(parents.get(parent), ast.Call) \
            and parents[parent].func is parent:  # type: ignore[attr-defined]
        call = parents[parent]
        assert isinstance(call, ast.Call)
        if parent.attr == "pop" and len(call.args) == 1 and isinstance(call.args[0], ast.Constant) \
                and call.args[0].value == 0 and not call.keywords:
            return "pop0"
        return "ok" if parent.attr in ("append", "extend") else None
    if isinstance(parent, (ast.While, ast.If)) and parent.test is use:
        return "ok"
    if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
        return "ok"
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "len":
        return "ok"
    return None


def _closure_sees(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for scope in ast.walk(fn)
               if isinstance(scope, (*_SCOPES, *_COMPREHENSIONS)) and scope is not fn for n in ast.walk(scope))


# In the order they are combined: the regexes and constants before lookups are bound to locals (which
# would hide `re.match` and `NAMES` from them).
# Each takes the function's source, the module's tree and the target's first line in the file.
REWRITES: dict[str, Callable[[str, ast.Module, int], Edits | None]] = {
    "regexes compiled once at module level": compiled_regexes,
    "membership in constant lists as frozensets": constant_membership,
    "strings joined once instead of += in loops": joined_strings,
    "list queues popped from the front as deques": deque_queues,
    "bound methods read once above loops": hoisted_methods,
    "lookups bound to locals in loops": local_lookups,
}


def rewrites(target: Target) -> list[Rewrite]:
    """Each rewrite that changes the target, then all of them together (applied one after another)."""
    module = ast.parse(target.source)
    source = textwrap.dedent(target.function_source)
    out = []
    combined, helpers, names = source, list[str](), list[str]()
    rows: set[int] = set()
    for name, rewrite in REWRITES.items():
        edits = rewrite(source, module, target.fn.line)
        if edits is not None:
            out.append(Rewrite(name, _code(edits.helpers, edits.apply()), frozenset(edits.rows)))
        step = rewrite(combined, module, target.fn.line)
        if step is not None:
            combined, helpers, rows = step.apply(), helpers + step.helpers, rows | step.rows
            names.append(name)
    if len(names) > 1:
        out.append(Rewrite(", ".join(names), _code(helpers, combined), frozenset(rows)))
    return out


def _code(helpers: list[str], function: str) -> str:
    imports = [h for h in helpers if h.startswith("import ")]
    rest = [h for h in helpers if h and not h.startswith("import ")]
    head = "\n".join(dict.fromkeys(imports)) + ("\n\n" if imports else "")
    head += "\n".join(rest) + ("\n\n\n" if rest else "\n" if imports else "")
    return head + function


class PlainPythonProposer(Proposer):
    """redline's own rewrites of plain Python (see the module's docstring), the ones that touch the
    profile's hottest lines first, and all of them together."""

    name = "python-rewrites"

    def skip(self, ctx: Context) -> str | None:
        return None if rewrites(ctx.target) else "none of its rewrites applies to this function"

    def propose(self, ctx: Context) -> list[Proposal]:
        if ctx.round != 1:
            return []
        found = rewrites(ctx.target)
        combined = [r for r in found if "," in r.name]
        single = sorted((r for r in found if "," not in r.name), key=lambda r: -heat(ctx, tuple(r.rows)))
        return [Proposal(code=r.code, origin="builtin:python-rewrites", approach=r.name, trusted=True)
                for r in [*combined, *single]]
