"""The target compiled with mypyc, alone and with the module's functions it calls: mypyc compiles by the
code's annotations (an unannotated name is any object), and calls between the functions it compiles
together are C calls.

A candidate is the target's own source with one decorator, `@_RedlineMypyc(...)`, and that decorator's
class (MYPYC_HELPER, a subclass of the Cython proposer's HELPER, both beside it). On first use the
decorator writes a module of the target and the functions it names, with the names of the module they
come from imported for mypy's type check alone, builds it with mypyc into the same on-disk cache, and
gives the loaded module the module's names as they are at that first call (as Cython's decorator does).
Where mypy, a C compiler or the source is missing at run time, the function runs as the plain Python it
still is. A method is not proposed: a function mypyc compiles does not bind to an instance. The
proposer builds each variant first: one mypy or mypyc rejects is not proposed, and the reason is
reported instead.
"""

from __future__ import annotations

import importlib.util
import os
import re
import tempfile
import textwrap
from typing import Any

from ..target import Target
from . import Context, NotApplicable, Proposal, Proposer
from .compiled import HELPER, _unsupported, callees, missing_toolchain

MYPYC_HELPER = '''
class _RedlineMypyc(_RedlineCython):
    """`@_RedlineMypyc("helper", ...)`: the function below compiled with mypyc when first used, with the
    module functions it names compiled with it (for its own calls to them), built once into
    $REDLINE_CYTHON_CACHE (default ~/.cache/redline-cython). mypyc compiles by the annotations and checks
    arguments against them when called (another type raises TypeError); the rest of the module stays
    as it is, the compiled module given its names. Needs mypy (which has mypyc), setuptools and a C compiler where it runs;
    without them it all runs as plain Python. Added by redline, which verified the compiled function on
    its calls."""

    COMMAND, STEM = ("mypyc", "--follow-imports=silent", "--ignore-missing-imports"), "_redline_mypyc_"
    # mypyc evaluates such a generator at once, as a list: not what the code asks for.
    EAGER = "Treating generator comprehension as list"

    def called(self, fn, cls):
        return [c for c in super().called(fn, cls) if not c[2]]

    def module_source(self, fn, called):
        import inspect
        import os
        spec = fn.__globals__.get("__spec__")
        path = getattr(spec, "origin", None) or fn.__code__.co_filename
        home = getattr(spec, "name", None) or os.path.splitext(os.path.basename(path))[0]
        with open(path) as fh:
            text = fh.read()
        return (self.typed_module(text, home, path.endswith("__init__.py"), inspect.getsource(fn),
                                  [inspect.getsource(f) for _, f, *_ in called]), self.root(path, home))

    @staticmethod
    def root(path, home):
        """The folder the module `home` (at `path`) is imported from."""
        import os
        root = os.path.dirname(path)
        for _ in range(home.count(".") + path.endswith("__init__.py")):
            root = os.path.dirname(root)
        return root

    @staticmethod
    def typed_module(text, home, package, target, functions):
        """What mypyc compiles: the defs without decorators, after the module-level names of the module
        they come from (`text`, named `home`) and its own `if TYPE_CHECKING:` imports, all imported for
        mypy's type check alone: the loaded module is given them (load)."""
        import ast
        import textwrap
        tree = ast.parse(text)
        scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
                  ast.DictComp, ast.GeneratorExp)

        def checking(node):
            test = node.test if isinstance(node, ast.If) else None
            return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")

        def bound(node):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                return {node.name}
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                return {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"} - {"annotations"}
            names = {node.id} if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) else set()
            return names.union(*(bound(c) for c in ast.iter_child_nodes(node) if not isinstance(c, scopes)))

        base = home.split(".") if package else home.split(".")[:-1]
        checked = []
        for node in tree.body:
            if checking(node):
                for imp in ast.walk(node):
                    if isinstance(imp, ast.ImportFrom) and imp.level:
                        imp.module = ".".join([*base[:len(base) - imp.level + 1], *([imp.module] if imp.module else [])])
                        imp.level = 0
                checked += node.body
        compiled = {ast.parse(textwrap.dedent(f)).body[0].name for f in [*functions, target]}
        names = sorted(set().union(*(bound(n) for n in tree.body if not checking(n))) - compiled - {"TYPE_CHECKING"})
        names = [n for n in names if not (n.startswith("__") and n.endswith("__"))]
        lines = ["from __future__ import annotations", "from typing import TYPE_CHECKING", "if TYPE_CHECKING:"]
        if names:
            lines.append(f"    from {home} import {', '.join(names)}")
        lines += [textwrap.indent(ast.unparse(n), "    ") for n in checked] or (["    pass"] if not names else [])
        return "\\n".join(lines) + "\\n\\n\\n" + "\\n\\n".join(
            _RedlineMypyc.lazy(_RedlineCython.source(f, "", {})) for f in [*functions, target])

    @staticmethod
    def lazy(text):
        """A def with its generator expressions (but a call's only argument, which mypyc consumes as the
        call would) written as generator functions defined just above their statement: mypyc evaluates
        a generator expression at once, as a list, where Python runs it as it is consumed."""
        import ast
        tree = ast.parse(text)
        parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}

        def statement(node):  # the statement holding it, where no other scope lies between them
            while not isinstance(node, ast.stmt):
                node = parents[node]
                if isinstance(node, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
                    return None
            return node

        found = [n for n in ast.walk(tree) if isinstance(n, ast.GeneratorExp) and statement(n) is not None
                 and not any(c.is_async for c in n.generators)
                 and not (isinstance(parents[n], ast.Call) and parents[n].args == [n] and not parents[n].keywords)]
        for i, gen in enumerate(found):
            name = f"_redline_generator_{i}"
            body = [ast.Expr(ast.Yield(gen.elt))]
            for k, comp in reversed(list(enumerate(gen.generators))):
                for test in reversed(comp.ifs):
                    body = [ast.If(test, body, [])]
                body = [ast.For(comp.target, ast.Name("_redline_items") if k == 0 else comp.iter, body, [])]
            args = ast.arguments(posonlyargs=[], args=[ast.arg("_redline_items")], kwonlyargs=[], kw_defaults=[],
                                 defaults=[])
            made = ast.FunctionDef(name=name, args=args, body=body, decorator_list=[], returns=None)
            made.type_params = []  # Python 3.12's field; unparse reads it there
            stmt = statement(gen)
            holder = parents[stmt]
            for field in ("body", "orelse", "finalbody"):
                block = getattr(holder, field, None)
                if isinstance(block, list) and stmt in block:
                    block.insert(block.index(stmt), made)
                    break
            call = parents[gen]
            for field, value in ast.iter_fields(call):
                new = ast.Call(ast.Name(name), [gen.generators[0].iter], [])
                if value is gen:
                    setattr(call, field, new)
                elif isinstance(value, list) and gen in value:
                    value[value.index(gen)] = new
        return ast.unparse(ast.fix_missing_locations(tree)) + "\\n" if found else text

    @classmethod
    def build(cls, source, so, root):
        """Build the extension module `so` from `source` with mypyc (mypy finding the module's imports
        under `root`)."""
        import os
        import subprocess
        import sys
        import tempfile
        cache, name = os.path.split(so)
        stem = name.split(".")[0]
        os.makedirs(cache, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            with open(os.path.join(tmp, stem + ".py"), "w") as fh:
                fh.write(source)
            run = subprocess.run([sys.executable, "-m", *cls.COMMAND, stem + ".py"], cwd=tmp, capture_output=True,
                                 text=True, env={**os.environ, "MYPYPATH": root})
            said = run.stdout + run.stderr
            if run.returncode or cls.EAGER in said:
                found = [line for line in said.splitlines() if ": error:" in line or cls.EAGER in line]
                raise RuntimeError("\\n".join(found or said.splitlines()[-1:] or ["mypyc failed"]))
            os.replace(os.path.join(tmp, next(f for f in os.listdir(tmp) if f.startswith(stem + ".")
                                              and f.endswith(name[len(stem):]))), so)
'''.strip("\n") + "\n"

_HELPER_NS: dict[str, Any] = {}


def _helper() -> Any:
    if not _HELPER_NS:
        exec(compile(HELPER + MYPYC_HELPER, "<redline mypyc helper>", "exec"), _HELPER_NS)
    return _HELPER_NS["_RedlineMypyc"]


class MypycProposer(Proposer):
    """The target compiled with mypyc: alone, and with the module's functions it calls compiled beside it."""

    name = "mypyc"

    def skip(self, ctx: Context) -> str | None:
        if reason := missing_toolchain("mypyc", "mypy is not installed (pip install mypy: it has mypyc)"):
            return reason
        if importlib.util.find_spec("setuptools") is None:
            return "setuptools is not installed (mypyc builds with it: pip install setuptools)"
        if "." in ctx.target.qualname:
            return "a method (a function mypyc compiles does not bind to an instance)"
        return _unsupported(ctx.target)

    def propose(self, ctx: Context) -> list[Proposal]:
        if ctx.round != 1 or self.skip(ctx):
            return []
        t = ctx.target
        calls = callees(t, classes=False)  # a function's: the module's functions it calls
        out, errors, tried = [], [], set()
        variants: list[list[tuple[str, str]]] = [[], calls] if calls else [[]]
        for with_calls in variants:
            error, kept = _built(t, with_calls)
            names = [name for name, _ in kept]
            if error:
                errors.append(error)
                continue
            if tuple(names) in tried:
                continue  # its callees all left out: the target alone again
            tried.add(tuple(names))
            out.append(Proposal(code=candidate(t, names), origin="builtin:mypyc", trusted=True,
                                approach=_approach(names)))
        if not out:
            raise NotApplicable(f"mypyc does not compile it: {errors[0]}")
        return out


def candidate(t: Target, calls: list[str]) -> str:
    """Both helper classes, then the target's own source with the decorator above its def."""
    args = ", ".join(repr(c) for c in calls)
    return f"{HELPER}\n\n{MYPYC_HELPER}\n\n@_RedlineMypyc({args})\n{textwrap.dedent(t.function_source)}"


def _approach(calls: list[str]) -> str:
    said = "compiled with mypyc"
    if calls:
        said += f", with compiled copies of the functions it calls ({', '.join(calls)}) for its own calls"
    return said + ("; arguments checked against their annotations; needs mypy (mypyc), setuptools and a C compiler "
                   "where it runs (plain Python without them)")


_LINE = re.compile(r"^[^:]+:(\d+): ")


def _built(t: Target, calls: list[tuple[str, str]]) -> tuple[str | None, list[tuple[str, str]]]:
    """mypyc on what the decorator would compile: its first error (None where it builds) and the callees
    it builds with. The callees mypy or mypyc reject (or a generator of which mypyc would evaluate at
    once) are left out, their calls going to the module's own functions, and the rest built again."""
    helper = _helper()
    root = helper.root(str(t.file), t.module_name)
    while True:
        source = helper.typed_module(t.source, t.module_name, t.file.name == "__init__.py", t.function_source,
                                     [text for _, text in calls])
        with tempfile.TemporaryDirectory(prefix="redline-mypyc-") as tmp:
            try:
                helper.build(source, os.path.join(tmp, "_redline_mypyc_check.so"), root)
                return None, calls
            except RuntimeError as exc:
                errors = str(exc).splitlines()
        at = [int(m.group(1)) for e in errors if (m := _LINE.match(e))]
        offending = [c for c in calls if any(_lines_of(source, c[1], n) for n in at)]
        if not offending:
            return errors[0].split(": ", 1)[-1], calls
        calls = [c for c in calls if c not in offending]


def _lines_of(source: str, text: str, line: int) -> bool:
    """Whether line `line` of `source` is in the def whose own source is `text`."""
    helper = _helper()
    body = helper.lazy(helper.source(text, "", {}))
    start = source.find(body)
    return start >= 0 and source.count("\n", 0, start) < line <= source.count("\n", 0, start + len(body))
