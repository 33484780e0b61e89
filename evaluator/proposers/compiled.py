"""The target compiled with Cython, unchanged (pure-Python mode) and with argument types from its calls.

A candidate is the target's own source with one decorator, `@_RedlineCython(...)`, and that decorator's
class (HELPER) beside it. What the sandbox verifies is what the edit adds to the user's file: on first
use the decorator compiles the function's source with Cython into a binding function (so a method
patches into its class), builds it with the C compiler into an on-disk cache, and hands over the
module's globals; a method then replaces itself in its class, a function forwards to the compiled one.
Where Cython, a C compiler or the source is missing at run time, the function runs as the plain
Python it still is. The proposer compiles each variant with Cython first: one Cython rejects is not
proposed, and the reason is reported instead.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from typing import Any

from ..target import Target
from . import Context, NotApplicable, Proposal, Proposer

HELPER = '''
class _RedlineCython:
    """`@_RedlineCython(arg="double", ...)`: the function below compiled with Cython when first used,
    with those C types for its arguments, and built once into $REDLINE_CYTHON_CACHE (default
    ~/.cache/redline-cython). Needs Cython and a C compiler where it runs; without them the function
    runs as plain Python. Added by redline, which verified the compiled function on its calls."""

    # Cython as a command, with the module's own names (given to the module when it loads) allowed.
    CYTHON = ("import sys; from Cython.Compiler import Options; Options.error_on_unknown_names = False; "
              "from Cython.Compiler.Main import setuptools_main; "
              "sys.argv[1:] = ['-3', '-X', 'binding=True', *sys.argv[1:]]; sys.exit(setuptools_main())")

    def __init__(self, **types):
        self.types, self.fn, self.compiled = types, None, None

    def __call__(self, *args, **kwargs):
        if self.fn is None:  # decorating
            self.fn = self.__wrapped__ = args[0]
            self.__doc__, self.__name__, self.__qualname__ = self.fn.__doc__, self.fn.__name__, self.fn.__qualname__
            return self
        return (self.compiled or self.load())(*args, **kwargs)

    def __get__(self, instance, owner):
        compiled = self.compiled or self.load()
        for cls in owner.__mro__:  # a method: the compiled one takes its place in its class
            for name, value in list(vars(cls).items()):
                if value is self:
                    setattr(cls, name, compiled)
        return compiled.__get__(instance, owner)

    @staticmethod
    def source(text, qualname, types):
        """What Cython compiles: the def without decorators, typed, inside a class like its owner's."""
        import textwrap
        lines = textwrap.dedent(text).splitlines(keepends=True)
        while lines and not lines[0].lstrip().startswith(("def ", "async def ")):
            lines.pop(0)
        body = "".join(lines)
        if types:
            typed = ", ".join(f"{k}=cython.{v}" for k, v in sorted(types.items()))
            body = f"@cython.locals({typed})\\n{body}"
        owner = qualname.rpartition(".")[0]
        if owner:
            body = f"class {owner}:\\n" + textwrap.indent(body, "    ")
        return ("import cython\\n\\n" if types else "") + body

    @staticmethod
    def build(source, stem, cache):
        """The extension module built from `source` (cached by its name); its path."""
        import os
        import subprocess
        import sys
        import sysconfig
        import tempfile
        so = os.path.join(cache, stem + sysconfig.get_config_var("EXT_SUFFIX"))
        if os.path.exists(so):
            return so
        os.makedirs(cache, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            py = os.path.join(tmp, stem + ".py")
            with open(py, "w") as fh:
                fh.write(source)
            subprocess.run([sys.executable, "-c", _RedlineCython.CYTHON, py], check=True, capture_output=True)
            cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
            out = os.path.join(tmp, "module.so")
            subprocess.run([*cc, "-shared", "-fPIC", "-O2", "-I" + sysconfig.get_paths()["include"], py[:-3] + ".c",
                            "-o", out], check=True, capture_output=True)
            os.replace(out, so)
        return so

    def load(self):
        import hashlib
        import importlib.util
        import inspect
        import os
        import sys
        import warnings
        fn = self.fn
        try:
            source = self.source(inspect.getsource(fn), fn.__qualname__, self.types)
            stem = f"_redline_cy_{fn.__name__.strip('_')}_" + hashlib.sha256(
                (source + sys.version).encode()).hexdigest()[:16]
            cache = os.environ.get("REDLINE_CYTHON_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                              "redline-cython")
            spec = importlib.util.spec_from_file_location(stem, self.build(source, stem, cache))
            module = importlib.util.module_from_spec(spec)
            module.__dict__.update({k: v for k, v in fn.__globals__.items() if not k.startswith("__")})
            spec.loader.exec_module(module)
            owner = fn.__qualname__.rpartition(".")[0]
            if owner:
                name = fn.__name__
                if name.startswith("__") and not name.endswith("__"):  # private: stored mangled, as in the class
                    name = "_" + owner.rpartition(".")[2].lstrip("_") + name
                compiled = vars(module)[owner].__dict__[name]
                vars(module)[owner] = fn.__globals__[owner]  # its own references to the class: the real one
            else:
                compiled = vars(module)[fn.__name__]
            compiled.__module__, compiled.__qualname__ = fn.__module__, fn.__qualname__
        except Exception as exc:
            if os.environ.get("REDLINE_CYTHON_STRICT"):
                raise
            warnings.warn(f"{fn.__qualname__} runs as plain Python: compiling it with Cython failed ({exc!r})",
                          RuntimeWarning, stacklevel=2)
            compiled = fn
        self.compiled = compiled
        return compiled
'''.strip("\n") + "\n"

_HELPER_NS: dict[str, Any] = {}


def _helper() -> Any:
    if not _HELPER_NS:
        exec(compile(HELPER, "<redline cython helper>", "exec"), _HELPER_NS)
    return _HELPER_NS["_RedlineCython"]


# Argument descriptions (codec.describe) and the C type a typed variant declares for them: floats are
# C doubles (the same IEEE arithmetic); ints are not typed (a C integer would overflow where Python's
# does not); the builtin containers and str are typed as themselves (exact types, faster methods).
_TYPES = [(re.compile(r"float "), "double"), (re.compile(r"str "), "str"), (re.compile(r"list "), "list"),
          (re.compile(r"dict "), "dict"), (re.compile(r"tuple "), "tuple"), (re.compile(r"bytes "), "bytes")]


# Captured signatures' type names (the manifest's `signatures`) and the type a typed variant declares.
_CAPTURED_TYPES = {"float": "double", "str": "str", "list": "list", "dict": "dict", "tuple": "tuple", "bytes": "bytes"}


def argument_types(fn: ast.FunctionDef | ast.AsyncFunctionDef, inputs: list[str], method: bool,
                   signatures: list[str] | None = None) -> dict[str, str]:
    """The C or builtin types of the positional arguments: from every captured signature where there are
    some (an argument is typed only where all of them agree and pass it), else from the first call's
    description (make_inputs). An argument with a default is typed only where the type takes the
    default (see _default_fits): a call may leave it to it."""
    args = [*fn.args.posonlyargs, *fn.args.args]
    defaults = dict(zip((a.arg for a in args[len(args) - len(fn.args.defaults):]), fn.args.defaults, strict=True)) \
        if fn.args.defaults else {}
    params = [a.arg for a in args][1 if method else 0:]
    types: dict[str, str] = {}
    if signatures:
        seen = [_positional_types(s)[1 if method else 0:] for s in signatures]
        for i, param in enumerate(params):
            kinds = {parts[i] if i < len(parts) else "" for parts in seen}
            if len(kinds) == 1 and (ctype := _CAPTURED_TYPES.get(kinds.pop())) is not None:
                types[param] = ctype
    else:
        described = inputs[1:] if method else inputs  # a method's calls describe its instance first
        for param, kind in zip(params, described, strict=False):
            ctype = next((c for pattern, c in _TYPES if pattern.match(kind)), None)
            if ctype is not None:
                types[param] = ctype
    return {k: v for k, v in types.items() if k not in defaults or _default_fits(defaults[k], v)}


# A default a typed argument may keep: what the C type accepts (None for the builtin types; a literal of
# the type itself). A C double's default is never kept: a call could leave it to None, say.
_LITERALS: dict[str, tuple[type[ast.expr], ...]] = {"list": (ast.List,), "dict": (ast.Dict,), "tuple": (ast.Tuple,)}


def _default_fits(default: ast.expr, ctype: str) -> bool:
    """Whether an argument typed `ctype` can keep `default` (`headers=()` typed as a list cannot)."""
    if ctype == "double":
        return False
    if isinstance(default, ast.Constant):
        return default.value is None or type(default.value).__name__ == ctype
    return isinstance(default, _LITERALS.get(ctype, ()))


def _positional_types(signature: str) -> list[str]:
    """A captured signature's positional parts as type names (`str[<16], int; k=v` -> [str, int])."""
    parts, depth, current = [], 0, ""
    for ch in signature.split("; ", 1)[0]:
        depth += (ch in "([") - (ch in ")]")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip().split("[", 1)[0].split("(", 1)[0] for p in parts if p.strip()]


def c_compiler() -> str | None:
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    return shutil.which(cc[0]) if cc else None


def _function(t: Target) -> ast.FunctionDef | ast.AsyncFunctionDef:
    node = ast.parse(textwrap.dedent(t.function_source)).body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return node


def _unsupported(t: Target) -> str | None:
    """Why the decorator cannot stand in for this target, or None."""
    fn = _function(t)
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    module = ast.parse(t.source)
    if t.qualname.count(".") > 1:
        return "a method of a nested class"
    if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno == t.fn.line and n.decorator_list
           for n in ast.walk(module)):
        return "a decorated function (its decorators would not apply to the compiled one)"
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(fn)):
        return "it rebinds globals (the compiled function has its own)"
    if "super" in names or "__class__" in names:
        return "it uses zero-argument super()"
    dunders = sorted(n for n in names if n.startswith("__") and n.endswith("__"))
    if dunders:
        return f"it reads the module's {dunders[0]}"
    rebound = {n for node in ast.walk(module) if isinstance(node, ast.Global) for n in node.names} & names
    if rebound:
        return f"it reads {sorted(rebound)[0]}, which the module rebinds while it runs"
    return None


class CythonProposer(Proposer):
    """The target compiled with Cython: unchanged, then with its arguments' types from the first call."""

    name = "cython"

    def skip(self, ctx: Context) -> str | None:
        if importlib.util.find_spec("Cython") is None:
            return "Cython is not installed (pip install cython)"
        if c_compiler() is None:
            return "no C compiler (set CC, or install gcc)"
        if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
            return "Python's headers are not installed (python3-dev)"
        return _unsupported(ctx.target)

    def propose(self, ctx: Context) -> list[Proposal]:
        if ctx.round != 1 or self.skip(ctx):
            return []
        t = ctx.target
        variants: list[dict[str, str]] = [{}]
        manifest = t.inputs.manifest
        typed = argument_types(_function(t), ctx.inputs, "." in t.qualname,
                               [s.signature for s in manifest.signatures] if manifest is not None else None)
        if typed:
            variants.append(typed)
        out, errors = [], []
        for types in variants:
            error = cython_error(t, types)
            if error:
                errors.append(error)
                continue
            out.append(Proposal(code=candidate(t, types), origin="builtin:cython", trusted=True,
                                approach="compiled with Cython" + (
                                    " with " + ", ".join(f"{k}: {v}" for k, v in sorted(types.items())) if types else "")
                                + "; needs Cython and a C compiler where it runs (plain Python without them)"))
        if not out:
            raise NotApplicable(f"Cython does not compile it: {errors[0]}")
        return out


def candidate(t: Target, types: dict[str, str]) -> str:
    """The helper class, then the target's own source with the decorator above its def."""
    source = textwrap.dedent(t.function_source)
    args = ", ".join(f"{k}={v!r}" for k, v in sorted(types.items()))
    return f"{HELPER}\n\n@_RedlineCython({args})\n{source}"


def cython_error(t: Target, types: dict[str, str]) -> str | None:
    """Cython's first error on the source the decorator would compile, or None where it compiles."""
    source = _helper().source(t.function_source, t.qualname, types)
    with tempfile.TemporaryDirectory(prefix="redline-cython-") as tmp:
        py = os.path.join(tmp, "_redline_check.py")
        with open(py, "w") as fh:
            fh.write(source)
        run = subprocess.run([sys.executable, "-c", _helper().CYTHON, py], capture_output=True, text=True,
                             timeout=120)
    if run.returncode == 0:
        return None
    lines = [line for line in (run.stderr or run.stdout).splitlines() if line.strip() and not line.startswith("warning")]
    return next((line.split(": ", 1)[-1] for line in lines if ".py:" in line), lines[-1] if lines else "failed")
