"""The target compiled with Cython, unchanged (pure-Python mode), with types from its calls (its arguments'
from the captured signatures, its local variables' from the original traced on its calls in the sandbox),
and with the module's functions and its class's methods that it calls compiled beside it.

A candidate is the target's own source with one decorator, `@_RedlineCython(...)`, and that decorator's
class (HELPER) beside it. What the sandbox verifies is what the edit adds to the user's file: on first
use the decorator compiles the function's source with Cython into a binding function (so a method
patches into its class), builds it with the C compiler into an on-disk cache, and hands over the
module's globals; a method then replaces itself in its class, a function forwards to the compiled one.
The functions it names are compiled into the same extension module from their own source: a module
function's compiled copy is what the target's calls reach (the module keeps its own for every other
caller), a method's takes the method's place in its class. Where Cython, a C compiler or the source is
missing at run time, the function runs as the plain Python it still is. The proposer compiles each
variant with Cython first: one Cython rejects is not proposed, and the reason is reported instead.
From round two on it compiles the best verified candidate it did not compile itself (a rewrite: an
LLM's, a file's, a built-in's), unchanged and keeping that code's trust (CythonProposer.stacked).
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
from collections.abc import Callable, Collection
from typing import Any

from ..target import Target
from . import Context, NotApplicable, Proposal, Proposer

HELPER = '''
import functools


class _RedlineCython(functools.partial):
    """`@_RedlineCython("helper", "direct other(i=Py_ssize_t)", "self.method", "Other.method", arg="double")`:
    the function below compiled with Cython when first used, with those C types for its variables, and
    built once into $REDLINE_CYTHON_CACHE (default ~/.cache/redline-cython). The module functions it names
    are compiled with it (with the types named after them), for its own calls to them (C calls to those
    named `direct`, which it never passes around as values nor reaches again through them); the methods it names
    of its class (`self.name`) and of the module's other classes (`Other.name`) are compiled and take
    their place in their class. Needs Cython and a C compiler where it runs; without them it all runs as
    plain Python. Added by redline, which verified the compiled function on its calls."""

    # Cython as a command, with the module's own names (given to the module when it loads) allowed,
    # annotations read as Python reads them (a parameter annotated `str` takes a subclass of str), and
    # arithmetic on a declared C integer raising OverflowError where it would leave its range.
    CYTHON = ("import sys; from Cython.Compiler import Options; Options.error_on_unknown_names = False; "
              "from Cython.Compiler.Main import setuptools_main; sys.argv[1:] = "
              "['-3', '-X', 'binding=True', '-X', 'annotation_typing=False', '-X', 'overflowcheck=True', *sys.argv[1:]]; "
              "sys.exit(setuptools_main())")
    COMMAND, STEM = CYTHON, "_redline_cy_"

    # A partial: once loaded, a call goes from the partial's C code to the compiled function's, with no
    # Python frame between them; until then it goes to `decorate`, then to `first`.
    def __new__(cls, /, *calls, **types):
        self = super().__new__(cls, print)
        self.__setstate__((self.decorate, (), {}, {"calls": calls, "types": types, "fn": None, "compiled": None}))
        return self

    def decorate(self, fn):
        self.fn = self.__wrapped__ = fn
        self.__doc__, self.__name__, self.__qualname__ = fn.__doc__, fn.__name__, fn.__qualname__
        self.__module__ = fn.__module__
        self.__setstate__((self.first, (), {}, self.__dict__))
        return self

    def __reduce__(self):  # pickled by name, as the function it stands for (multiprocessing sends it so)
        return self.__qualname__

    def first(self, *args, **kwargs):
        return (self.compiled or self.load())(*args, **kwargs)

    def __get__(self, instance, owner):
        owner_name = self.fn.__qualname__.rpartition(".")[0]
        if self.compiled is None and owner_name and owner_name not in self.fn.__globals__:
            # Its class is still being made (ABCMeta reads the abstract methods' names on the new class):
            # the function itself until then, compiled on a use once the module has named the class.
            return self.fn.__get__(instance, owner)
        compiled = self.compiled or self.load()
        for cls in owner.__mro__:  # a method: the compiled one takes its place in its class
            for name, value in list(vars(cls).items()):
                if value is self:
                    setattr(cls, name, compiled)
        return compiled.__get__(instance, owner)

    @staticmethod
    def source(text, qualname, types, functions=(), methods=(), classes=()):
        """What Cython compiles: the def without decorators, typed, inside a class like its owner's with
        the methods it calls; the module functions it calls above it (all as their own source, methods
        as (source, types) pairs, functions as (source, types, direct)); the other classes' methods it
        names in classes like theirs (classes: (class name, [(source, types), ...]) pairs; a class or
        static method keeps that decorator)."""
        import textwrap

        def bare(text, types, direct=False):
            lines = textwrap.dedent(text).splitlines(keepends=True)
            kind = ""
            while lines and not lines[0].lstrip().startswith(("def ", "async def ")):
                line = lines.pop(0).strip()
                kind = line if line in ("@classmethod", "@staticmethod") else kind
            typed = ", ".join(f"{k}=cython.{v}" for k, v in sorted(types.items()))
            return (f"{kind}\\n" if kind else "") + ("@cython.ccall\\n" if direct else "") \\
                + (f"@cython.locals({typed})\\n" if types else "") + "".join(lines)

        def members(owner, defs):
            return "".join(bare(_RedlineCython.supers(bare(m, {}), owner), t) + "\\n" for m, t in defs)

        owner = qualname.rpartition(".")[0]
        body = bare(_RedlineCython.supers(bare(text, {}), owner), types)
        if owner:
            body = f"class {owner}:\\n" + textwrap.indent(body + "\\n" + members(owner, methods), "    ")
        others = "".join(f"class {name}:\\n" + textwrap.indent(members(name, defs), "    ") + "\\n\\n"
                         for name, defs in classes)
        typed = types or any(f[1] or f[2] for f in functions) \\
            or any(t for _, t in [*methods, *(d for _, defs in classes for d in defs)])
        return ("import cython\\n\\n" if typed else "") + "".join(bare(*f) + "\\n\\n" for f in functions) \\
            + others + body

    @staticmethod
    def supers(text, owner):
        """A method's zero-argument `super()` calls written `super(Owner, self)`: compiled in a class of
        the same name, the method's own class would be that class, not the one it takes its place in
        (whose name the compiled module gives the real class)."""
        import ast
        if not owner or "super" not in text:
            return text
        fn = ast.parse(text).body[0]
        lines = text.splitlines(keepends=True)
        calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id == "super" and not n.args and not n.keywords]
        for call in sorted(calls, key=lambda n: (n.lineno, n.col_offset), reverse=True):
            line = lines[call.lineno - 1].encode()
            lines[call.lineno - 1] = (line[:call.col_offset] + f"super({owner}, {fn.args.args[0].arg})".encode()
                                      + line[call.end_col_offset:]).decode()
        return "".join(lines)

    @staticmethod
    def stored(owner, name):
        """The name a class stores its method `name` under (a private one mangled, as in its body)."""
        if name.startswith("__") and not name.endswith("__"):
            return "_" + owner.rpartition(".")[2].lstrip("_") + name
        return name

    def called(self, fn, cls):
        """The functions named in the decorator, as (stored name, what its class or the module holds, the
        class's name or "" for a module function, its types, whether it is called directly): each only
        where it is still the module's own plain function (or a class or static method of one), whose
        source is what gets compiled."""
        if not self.calls:
            return []
        import inspect
        # The module the function is in: where it stands in for another (redline's sandbox runs it in a
        # copy of the user's module), that module's spec names it.
        home = {fn.__module__, getattr(fn.__globals__.get("__spec__"), "name", None)}
        found = []
        for named in self.calls:
            direct = named.startswith("direct ")
            call, _, typed = named.removeprefix("direct ").rstrip(")").partition("(")
            types = dict(part.split("=") for part in typed.split(", ") if part)
            where, _, name = call.rpartition(".")
            if where == "self":
                where, holder = fn.__qualname__.rpartition(".")[0], cls
            else:
                holder = fn.__globals__.get(where) if where else None
                if where and not (isinstance(holder, type) and holder.__module__ in home):
                    continue
            name = self.stored(where, name) if where else name
            value = vars(holder).get(name) if holder is not None else fn.__globals__.get(name)
            plain = value.__func__ if where and isinstance(value, (classmethod, staticmethod)) else value
            if inspect.isfunction(plain) and plain.__module__ in home and not hasattr(plain, "__wrapped__"):
                found.append((name, value, where, types, direct))
        return found

    @classmethod
    def build(cls, source, so, root):
        """Build the extension module `so` from `source` with Cython and the C compiler."""
        import os
        import subprocess
        import sys
        import sysconfig
        import tempfile
        cache, name = os.path.split(so)
        os.makedirs(cache, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            py = os.path.join(tmp, name.split(".")[0] + ".py")
            with open(py, "w") as fh:
                fh.write(source)
            subprocess.run([sys.executable, "-c", cls.CYTHON, py], check=True, capture_output=True)
            cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
            out = os.path.join(tmp, "module.so")
            subprocess.run([*cc, "-shared", "-fPIC", "-O2", "-I" + sysconfig.get_paths()["include"], py[:-3] + ".c",
                            "-o", out], check=True, capture_output=True)
            os.replace(out, so)

    def module_source(self, fn, called):
        """What gets compiled for `fn` and the functions it names, and the folder its imports resolve from
        (none: Cython's module is given its names when it loads)."""
        import inspect

        def text(value):
            return inspect.getsource(getattr(value, "__func__", value))
        owner = fn.__qualname__.rpartition(".")[0]
        classes = {}
        for _, value, where, types, _ in called:
            if where and where != owner:
                classes.setdefault(where, []).append((text(value), types))
        return self.source(inspect.getsource(fn), fn.__qualname__, self.types,
                           [(text(f), t, direct) for _, f, where, t, direct in called if not where],
                           [(text(f), t) for _, f, where, t, _ in called if owner and where == owner],
                           list(classes.items())), None

    def built(self, fn, called, cache):
        """The extension module's path. Found, as Python finds a module's bytecode, by its file's size and
        modification time, without reading the source; where they changed, by the source it compiles,
        built where no build of that source exists."""
        import hashlib
        import os
        import sys
        from importlib.machinery import EXTENSION_SUFFIXES
        st = os.stat(fn.__code__.co_filename)
        key = (fn.__code__.co_filename, st.st_mtime_ns, st.st_size, fn.__qualname__, sorted(self.types.items()),
               [(where, name, types, direct) for name, _, where, types, direct in called], sys.version, self.COMMAND)
        index = os.path.join(cache, "index", hashlib.sha256(repr(key).encode()).hexdigest()[:32])
        try:
            with open(index) as fh:
                so = os.path.join(cache, fh.read())
            if os.path.exists(so):
                return so
        except OSError:
            pass
        source, root = self.module_source(fn, called)
        stem = f"{self.STEM}{fn.__name__.strip('_')}_" + hashlib.sha256(
            (source + sys.version + repr(self.COMMAND)).encode()).hexdigest()[:16]
        so = os.path.join(cache, stem + EXTENSION_SUFFIXES[0])
        if not os.path.exists(so):
            self.build(source, so, root)
        os.makedirs(os.path.dirname(index), exist_ok=True)
        with open(index + f".{os.getpid()}", "w") as fh:
            fh.write(os.path.basename(so))
        os.replace(index + f".{os.getpid()}", index)
        return so

    @staticmethod
    def named(copy, original):
        """A compiled copy named as the function it stands for (where its kind of function lets it)."""
        try:
            copy.__module__, copy.__qualname__ = original.__module__, original.__qualname__
        except (AttributeError, TypeError):
            pass

    def load(self):
        import importlib.util
        import os
        import warnings
        fn = self.fn
        try:
            owner = fn.__qualname__.rpartition(".")[0]
            cls = fn.__globals__[owner] if owner else None
            if "__class__" in fn.__code__.co_freevars and not any(v is self for v in vars(cls).values()):
                raise LookupError(f"{owner} is not the class that defines {fn.__name__} (its super() would differ)")
            called = self.called(fn, cls)
            cache = os.environ.get("REDLINE_CYTHON_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                              "redline-cython")
            so = self.built(fn, called, cache)
            spec = importlib.util.spec_from_file_location(os.path.basename(so).split(".")[0], so)
            module = importlib.util.module_from_spec(spec)
            module.__dict__.update({k: v for k, v in fn.__globals__.items() if not k.startswith("__") and k not in vars(module)})
            spec.loader.exec_module(module)
            compiled = vars(module)[owner].__dict__[self.stored(owner, fn.__name__)] if owner else vars(module)[fn.__name__]
            copies = [(vars(module)[where].__dict__[name] if where else vars(module)[name], original, where, name)
                      for name, original, where, _, _ in called]
            for where in {where for _, _, where, _, _ in called if where} | ({owner} - {""}):
                vars(module)[where] = fn.__globals__[where]  # its references to the classes: the real ones
            for copy, original, where, name in copies:
                self.named(getattr(copy, "__func__", copy), getattr(original, "__func__", original))
                holder = fn.__globals__[where] if where else None
                if holder is not None and vars(holder).get(name) is original:
                    setattr(holder, name, copy)
            self.named(compiled, fn)
        except Exception as exc:
            if os.environ.get("REDLINE_CYTHON_STRICT"):
                raise
            warnings.warn(f"{fn.__qualname__} runs as plain Python: compiling it with Cython failed ({exc!r})",
                          RuntimeWarning, stacklevel=2)
            compiled = fn
        self.compiled = compiled
        self.__setstate__((compiled, (), {}, self.__dict__))
        return compiled
'''.strip("\n") + "\n"

_HELPER_NS: dict[str, Any] = {}


# The classes of redline's compile decorators (HELPER's, and mypyc's subclass of it).
_DECORATORS = ("_RedlineCython", "_RedlineMypyc")


def _compile_decorators(tree: ast.Module) -> list[ast.expr]:
    """The uses of redline's compile decorators in a module."""
    return [d for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            for d in n.decorator_list
            if isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id in _DECORATORS]


def compiled_by_redline(code: str) -> bool:
    """Whether a candidate compiles a function with one of redline's compile decorators."""
    try:
        return bool(_compile_decorators(ast.parse(code)))
    except SyntaxError:
        return False


def python_of(code: str) -> str:
    """A candidate with redline's compile decorators and their classes taken out: the Python that the
    decorators compile, as it runs where no compiler is (the code itself unchanged otherwise)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    decorators = _compile_decorators(tree)
    if not decorators:
        return code
    spans = [(n.lineno, n.end_lineno or n.lineno) for n in tree.body
             if isinstance(n, ast.ClassDef) and n.name in _DECORATORS]
    spans += [(d.lineno, d.end_lineno or d.lineno) for d in decorators]
    drop = {line for start, end in spans for line in range(start, end + 1)}
    # The helper's own import, where nothing else uses it.
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not any(a <= n.lineno <= b for a, b in spans)}
    if "functools" not in used:
        drop |= {n.lineno for n in tree.body if isinstance(n, ast.Import) and [a.name for a in n.names] == ["functools"]}
    kept = [line for i, line in enumerate(code.splitlines(keepends=True), 1) if i not in drop]
    return re.sub(r"\n{3,}", "\n\n\n", "".join(kept)).strip("\n") + "\n"


def _helper() -> Any:
    if not _HELPER_NS:
        exec(compile(HELPER, "<redline cython helper>", "exec"), _HELPER_NS)
    return _HELPER_NS["_RedlineCython"]


# Argument descriptions (codec.describe) and the C type a typed variant declares for them: floats are
# C doubles (the same IEEE arithmetic); ints are not typed (a C integer would overflow where Python's
# does not); the builtin containers and str are typed as themselves (exact types, faster methods).
_TYPES = [(re.compile(r"float "), "double"), (re.compile(r"str "), "str"), (re.compile(r"list "), "list"),
          (re.compile(r"dict "), "dict"), (re.compile(r"tuple "), "tuple"), (re.compile(r"bytes "), "bytes"),
          (re.compile(r"int "), "Py_ssize_t")]


# Captured signatures' type names (the manifest's `signatures`) and the type a typed variant declares
# (an int only where the code uses it as a position: see _positions).
_CAPTURED_TYPES = {"float": "double", "str": "str", "list": "list", "dict": "dict", "tuple": "tuple", "bytes": "bytes",
                   "int": "Py_ssize_t"}


def argument_types(fn: ast.FunctionDef | ast.AsyncFunctionDef, inputs: list[str], method: bool,
                   signatures: list[str] | None = None, sequences: frozenset[str] = frozenset()) -> dict[str, str]:
    """The C or builtin types of the positional arguments: from every captured signature where there are
    some (an argument is typed only where all of them agree and pass it), else from the first call's
    description (make_inputs). An int is typed only where the code uses it as a position in one of the
    declared `sequences` (_positions).
    An argument with a default is typed only where the type takes the default (see _default_fits): a
    call may leave it to it."""
    args = [*fn.args.posonlyargs, *fn.args.args]
    defaults = _defaults(fn)
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
    positions = _positions(fn, sequences)
    return {k: v for k, v in types.items() if (v != "Py_ssize_t" or k in positions)
            and (k not in defaults or _default_fits(defaults[k], v))}


def _defaults(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """The positional parameters' defaults, by name."""
    args = [*fn.args.posonlyargs, *fn.args.args]
    return dict(zip((a.arg for a in args[len(args) - len(fn.args.defaults):]), fn.args.defaults, strict=True))


# A default a typed argument may keep: what the C type accepts (None for the builtin types; a literal of
# the type itself). A C double's default is never kept: a call could leave it to None, say.
_LITERALS: dict[str, tuple[type[ast.expr], ...]] = {"list": (ast.List,), "dict": (ast.Dict,), "tuple": (ast.Tuple,)}


# The builtin types a local variable is declared as where it held only them (None too: a variable of a
# builtin object type may hold None); the C types a variable may be declared as, and what each holds.
_LOCAL_OBJECTS = {"str", "list", "dict", "tuple", "bytes", "bytearray", "set"}
_C_TYPES = {"double": "float", "bint": "bool", "Py_ssize_t": "int"}


def local_types(fn: ast.FunctionDef | ast.AsyncFunctionDef, seen: dict[str, list[str]],
                sequences: frozenset[str] = frozenset()) -> dict[str, str]:
    """The declarations for the target's local variables from the types they held on its calls (the
    sandbox's trace of the original, Context.local_types) and what its code assigns them. A variable
    that held one builtin object type (alone or with None) is declared as it unless the code assigns it
    a literal of another type (on a path the calls did not take: declared, it would raise TypeError
    there). One that held only floats is a C double (the same IEEE arithmetic) only where every value the
    code gives it is a float whatever the inputs (`0.0`, `x / y`, `x * 0.5`, `float(x)`, `+=` on it): a
    double would turn an int into a float without a word. One that held only bools is a C truth value
    only where every value is a comparison, `not` or a bool. One that held only ints and that the code
    uses as a position in one of the declared `sequences` and as no Python int (_positions) is a C
    Py_ssize_t, where no value the code gives it is of another type (a literal) or out of its range (a
    literal, `/`, `**`, `<<`); its arithmetic raises OverflowError past 2**63 (CYTHON's overflowcheck)
    where Python's carries on, which a position never reaches. Other integers are not declared, nor
    anything else."""
    out = {}
    positions = _positions(fn, sequences)
    for name, types in seen.items():
        kinds = {t.removeprefix("builtins.") for t in types}
        objects = kinds - {"NoneType"}
        if len(objects) == 1 and (kind := objects.pop()) in _LOCAL_OBJECTS:
            declared, allowed = kind, {kind, "NoneType", "same", None}
        elif kinds == {"float"}:
            declared, allowed = "double", {"float", "same"}
        elif kinds == {"bool"}:
            declared, allowed = "bint", {"bool"}
        elif kinds == {"int"} and name in positions:
            declared, allowed = "Py_ssize_t", {"int", "same", None}
        else:
            continue
        if all(_static_type(value) in allowed for value in _bindings(fn, name)):
            out[name] = declared
    return out


def characters(types: dict[str, str], fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    """The declarations less the str ones of variables that only ever hold one character of a declared
    str: bound by `s[i]` or by a loop straight over `s`. Left undeclared, Cython makes them C characters
    (compared and tested as C values, a str again only where one is needed); declared str, each would
    be a new string object."""
    strings = {name for name, kind in types.items() if kind == "str"}

    def one_character(name: str) -> bool:
        values = _bindings(fn, name)
        indexed = [v for v in values if v is not None]
        loops = sum(isinstance(n, (ast.For, ast.comprehension)) and isinstance(n.target, ast.Name) and n.target.id == name
                    and isinstance(n.iter, ast.Name) and n.iter.id in strings for n in ast.walk(fn))
        return bool(values) and len(values) - len(indexed) == loops and all(
            isinstance(v, ast.Subscript) and not isinstance(v.slice, ast.Slice) and isinstance(v.value, ast.Name)
            and v.value.id in strings for v in indexed)
    return {name: kind for name, kind in types.items() if kind != "str" or not one_character(name)}


def _positions(fn: ast.FunctionDef | ast.AsyncFunctionDef, sequences: frozenset[str]) -> set[str]:
    """The names the function uses as positions in the sequences it declares, or binds only to a len(),
    and as nothing a C integer would have to become a Python int again for: read in an index or slice
    bound of one of `sequences` (`src[pos]`, `xs[i - 1]`, `s[a:b]`), otherwise only in arithmetic,
    comparisons, a range's or min's or max's arguments, assignments and the value returned. Passed to a call or used as a key, each
    read would make a new int object (slower than Python, which holds one), and it is not declared.
    Nor is one the code divides with `/`, raises to a power, shifts left or gives a literal past 2**62
    (values a C integer would not hold)."""
    parents = {child: node for node in ast.walk(fn) for child in ast.iter_child_nodes(node)}
    indexing: set[str] = set()
    boxed: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            use = _use(node, parents, sequences)
            if use == "index":
                indexing.add(node.id)
            elif use == "boxed":
                boxed.add(node.id)
    lengths = {name for name in {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
               if (values := _bindings(fn, name)) and all(isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                                                          and v.func.id == "len" for v in values)}
    used = (indexing | lengths) - boxed
    for node in ast.walk(fn):
        if isinstance(node, ast.BinOp) and _wide(node.op):
            used -= _names(node.left) | _names(node.right)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None \
                and ((isinstance(node, ast.AugAssign) and _wide(node.op)) or _beyond(node.value)):
            used -= {n for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) for n in _names(t)}
    return used


# Where a C integer's read stays a C value: arithmetic (the operators Cython does in C on C integers),
# comparisons, assignments, what is returned, and these builtins' arguments.
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.BitAnd, ast.BitOr, ast.BitXor, ast.RShift)
_C_CALLS = {"range", "min", "max", "abs"}


def _use(name: ast.Name, parents: dict[ast.AST, ast.AST], sequences: frozenset[str]) -> str:
    """How a read of a name would use a C integer: "index" (a position in a declared sequence), "boxed"
    (as a Python int: a call's argument, a key, an element), or "" (in C, or once on the way out)."""
    node: ast.AST = name
    while isinstance(parent := parents.get(node), (ast.BinOp, ast.UnaryOp)) and isinstance(
            parent.op, (*_ARITHMETIC, ast.USub, ast.UAdd)):
        node = parent
    parent = parents.get(node)
    if isinstance(parent, ast.Slice):
        node, parent = parent, parents.get(parent)
    if isinstance(parent, ast.Subscript) and parent.slice is node:
        return "index" if isinstance(parent.value, ast.Name) and parent.value.id in sequences else "boxed"
    if isinstance(parent, ast.Tuple) and isinstance(parents.get(parent), ast.Return):
        return ""
    if isinstance(parent, ast.Call) and node in parent.args:
        return "" if isinstance(parent.func, ast.Name) and parent.func.id in _C_CALLS else "boxed"
    return "" if isinstance(parent, (ast.Compare, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)) else "boxed"


def _beyond(value: ast.AST) -> bool:
    """Whether an expression may be a float or an int past a C integer's range: it divides with `/`,
    raises to a power, shifts left or holds a literal past 2**62."""
    return any((isinstance(n, ast.BinOp) and _wide(n.op))
               or (isinstance(n, ast.Constant) and type(n.value) is int and abs(n.value) >= 2 ** 62) for n in ast.walk(value))


def _wide(op: ast.operator) -> bool:
    """Whether an operator's result may be a float or past a C integer's range whatever its operands."""
    return isinstance(op, (ast.Div, ast.Pow, ast.LShift))


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _holds(fn: ast.FunctionDef | ast.AsyncFunctionDef, param: str, ctype: str, seen: dict[str, list[str]],
           sequences: frozenset[str] = frozenset()) -> bool:
    """Whether an argument every call passed as `ctype` may be declared so: by the rules for a local
    (local_types), on the types the trace saw it hold (its own type where there was no trace). Tabulate's
    `tablefmt` is a str on every call, then the format it names."""
    held = seen.get(param) or [f"builtins.{_C_TYPES.get(ctype, ctype)}"]
    return local_types(fn, {param: held}, sequences).get(param) == ctype


def _bindings(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> list[ast.AST | None]:
    """What the function's code binds `name` to: the value assigned, the augmented assignment, or None
    where the value is not one expression (a loop's or an unpacking's target, `with ... as`)."""
    out: list[ast.AST | None] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    out.append(node.value)
                elif any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)):
                    out.append(None)
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr, ast.AugAssign)) and isinstance(node.target, ast.Name) \
                and node.target.id == name and node.value is not None:
            out.append(node if isinstance(node, ast.AugAssign) else node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.withitem, ast.comprehension)):
            bound = node.optional_vars if isinstance(node, ast.withitem) else node.target
            if bound is not None and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(bound)):
                out.append(None)
    return out


_LITERAL_TYPES: dict[type[ast.AST], str] = {
    ast.List: "list", ast.ListComp: "list", ast.Dict: "dict", ast.DictComp: "dict", ast.Set: "set",
    ast.SetComp: "set", ast.Tuple: "tuple", ast.JoinedStr: "str", ast.Compare: "bool", ast.AugAssign: "same"}


def _static_type(value: ast.AST | None) -> str | None:
    """The type an expression's value has whatever the inputs, or None; "same" for an augmented
    assignment (`x += y`: a float stays a float, a str a str or TypeError)."""
    if isinstance(value, ast.Constant):
        return type(value.value).__name__
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not):
        return "bool"
    if isinstance(value, ast.BoolOp) and all(_static_type(v) == "bool" for v in value.values):
        return "bool"
    if isinstance(value, ast.BinOp) and (isinstance(value.op, ast.Div) or "float" in (
            _static_type(value.left), _static_type(value.right))):
        return "float"
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "float":
        return "float"
    return _LITERAL_TYPES.get(type(value)) if value is not None else None


def _default_fits(default: ast.expr, ctype: str) -> bool:
    """Whether an argument typed `ctype` can keep `default` (`headers=()` typed as a list cannot)."""
    if ctype == "double":
        return False
    if ctype == "Py_ssize_t":
        return isinstance(default, ast.Constant) and type(default.value) is int and abs(default.value) < 2 ** 62
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


def missing_toolchain(module: str, not_installed: str) -> str | None:
    """Why a compiler (the Python module `module`) cannot build extensions here, or None."""
    if importlib.util.find_spec(module) is None:
        return not_installed
    if c_compiler() is None:
        return "no C compiler (set CC, or install gcc)"
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        return "Python's headers are not installed (python3-dev)"
    return None


def c_compiler() -> str | None:
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()
    return shutil.which(cc[0]) if cc else None


def _function(t: Target) -> ast.FunctionDef | ast.AsyncFunctionDef:
    node = ast.parse(textwrap.dedent(t.function_source)).body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return node


def _unsupported(t: Target) -> str | None:
    """Why the decorator cannot stand in for this target, or None."""
    module = ast.parse(t.source)
    if t.qualname.count(".") > 1:
        return "a method of a nested class"
    if any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno == t.fn.line and n.decorator_list
           for n in ast.walk(module)):
        return "a decorated function (its decorators would not apply to the compiled one)"
    return _not_compiled(_function(t), _rebound(module), method="." in t.qualname)


def _rebound(module: ast.Module) -> set[str]:
    """The module's names that some function rebinds with `global`."""
    return {n for node in ast.walk(module) if isinstance(node, ast.Global) for n in node.names}


def _not_compiled(fn: ast.FunctionDef | ast.AsyncFunctionDef, rebound: set[str], method: bool = False) -> str | None:
    """Why this def's compiled copy would not behave as it does (reading the module's globals from the
    compiled module's copy of them), or None. A method's zero-argument super() is compiled as
    super(Owner, self) (HELPER's supers): only in the method's own body, where it has a first argument."""
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(fn)):
        return "it rebinds globals (the compiled function has its own)"
    if "__class__" in names:
        return "it reads __class__"
    if "super" in names and not _plain_supers(fn, method):
        return "it uses zero-argument super() outside a method's own body"
    dunders = sorted(n for n in names if n.startswith("__") and n.endswith("__"))
    if dunders:
        return f"it reads the module's {dunders[0]}"
    if rebound & names:
        return f"it reads {sorted(rebound & names)[0]}, which the module rebinds while it runs"
    return None


def _plain_supers(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> bool:
    """Whether every use of `super` is a call: with arguments, or without them in the body of a method
    (not in a function, lambda or comprehension inside it) whose first argument is positional."""
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "super"]
    if len(calls) != sum(isinstance(n, ast.Name) and n.id == "super" for n in ast.walk(fn)):
        return False  # super read other than to call it
    bare = {id(n) for n in calls if not n.args and not n.keywords}
    if bare and not (method and fn.args.args):
        return False
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    scopes = [n for n in ast.walk(fn) if n is not fn and isinstance(n, nested)]
    return not any(id(c) in bare for scope in scopes for c in ast.walk(scope))


def _shared_defaults(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether every default is a constant or a name (the same object in a compiled copy): a list, a dict
    or a call's result would be a second object, its state apart from the original's."""
    def same(e: ast.expr) -> bool:
        if isinstance(e, ast.Tuple):
            return all(same(x) for x in e.elts)
        if isinstance(e, ast.UnaryOp):
            return isinstance(e.operand, ast.Constant)
        return isinstance(e, (ast.Constant, ast.Name, ast.Attribute))
    return all(same(d) for d in [*fn.args.defaults, *fn.args.kw_defaults] if d is not None)


def _defs(body: list[ast.stmt]) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions a module or class body defines and binds nothing else to."""
    return _defined(body, (ast.FunctionDef, ast.AsyncFunctionDef))


def _classes(body: list[ast.stmt]) -> dict[str, ast.ClassDef]:
    """The classes a module body defines, undecorated and bound to nothing else."""
    return {name: node for name, node in _defined(body, ast.ClassDef).items() if not node.decorator_list}


def _defined(body: list[ast.stmt], kinds: Any) -> dict[str, Any]:
    found = {n.name: n for n in body if isinstance(n, kinds)}
    for node in body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for name in {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}:
                found.pop(name, None)
    return found


def callees(t: Target, limit: int = 48, classes: bool = True) -> list[tuple[str, str]]:
    """What the target calls that compiles with it, following their calls in turn: the module's functions
    it calls by name, (for a method) its class's methods it calls on `self`, and (with `classes`) the
    methods of the module's other classes it calls or makes by name (`_Lexer.split(s)`, `_Row(...)`:
    every method of such a class, its class and static methods included). As (the decorator's name for
    it, its source), at most `limit`, nearest first and in the order the code calls them; only defs
    whose compiled copy behaves as theirs does, without other decorators; never the target itself."""
    return [(name, text) for name, text, _ in callee_tree(t, limit, classes)]


def callee_tree(t: Target, limit: int = 48, classes: bool = True,
                reached: Collection[int] = ()) -> list[tuple[str, str, bool]]:
    """callees, each with whether only the target's calls reach it: a module function reached through
    module functions alone, never through a method, whose compiled copy takes every caller's calls. With
    `classes`, also the methods of the module's classes (the target's own among them) whose defs start on
    a line in `reached`: those the target's calls ran (Context.callee_types), through attributes the code
    does not name a class for (`self.info.jump(x)`, `token.close()`), after what the code names."""
    tree = _CalleeTree(t, limit, classes)
    tree.follow()
    if classes and reached:
        tree.ran(reached)
        tree.follow()
    shared = [name for name in tree.found if "." in name]  # what a method reaches, every caller of it reaches
    for name in shared:
        shared.extend(c for c in tree.calls.get(name, ()) if c in tree.found and c not in shared)
    return [(name, text, name not in shared) for name, text in tree.found.items()]


class _CalleeTree:
    """What compiles with a target, found by following the calls its code names (see callees)."""

    def __init__(self, t: Target, limit: int, classes: bool) -> None:
        module = ast.parse(t.source)
        self.limit, self.lines, self.rebound = limit, t.source.splitlines(keepends=True), _rebound(module)
        self.functions = _defs(module.body)
        owner = next((n for n in module.body if isinstance(n, ast.ClassDef) and n.name == t.qualname.split(".")[0]),
                     None)
        self.methods = _defs(owner.body) if owner is not None and "." in t.qualname else {}
        self.others = {name: node for name, node in _classes(module.body).items() if node is not owner} \
            if classes else {}
        self.found: dict[str, str] = {}
        self.calls: dict[str, set[str]] = {}  # who calls whom, of what is compiled
        self.own = ("self." if self.methods else "") + t.qualname.rpartition(".")[2]
        self.queue: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]] = [(_function(t), self.own)]

    def take(self, name: str, node: ast.FunctionDef | ast.AsyncFunctionDef, caller: str) -> None:
        kind = _kind(node)
        self.calls.setdefault(caller, set()).add(name)
        if name in self.found or name == self.own or kind is None or not _shared_defaults(node) \
                or len(self.found) >= self.limit or _generator(node) \
                or _not_compiled(node, self.rebound, "." in name and kind != "staticmethod"):
            return
        self.found[name] = "".join(self.lines[_first_line(node) - 1:node.end_lineno])
        self.queue.append((node, name))

    def ran(self, reached: Collection[int]) -> None:
        """Take the methods of the target's class and of the module's other classes whose defs start on a
        line in `reached` (only undecorated ones of the target's class, as for `self.m` calls)."""
        for prefix, defs in [("self", self.methods), *((c, _defs(n.body)) for c, n in self.others.items())]:
            for method, node in defs.items():
                if _first_line(node) in reached and (prefix != "self" or _kind(node) == ""):
                    self.take(f"{prefix}.{method}", node, self.own)

    def follow(self) -> None:
        while self.queue and len(self.found) < self.limit:
            self.calls_in(*self.queue.pop(0))

    def calls_in(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> None:
        me = fn.args.args[0].arg if name.startswith("self.") and fn.args.args else None
        for call in sorted((n for n in ast.walk(fn) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset)):
            f = call.func
            cls = f.id if isinstance(f, ast.Name) else f.value.id if isinstance(f, ast.Attribute) and \
                isinstance(f.value, ast.Name) and f.value.id != me else None
            if cls in self.others:  # a class of the module made or called by name: its methods, all of them
                for method, node in _defs(self.others[cls].body).items():
                    self.take(f"{cls}.{method}", node, name)
            elif isinstance(f, ast.Name) and f.id in self.functions and _kind(self.functions[f.id]) == "":
                self.take(f.id, self.functions[f.id], name)
            elif isinstance(f, ast.Attribute) and me is not None and isinstance(f.value, ast.Name) \
                    and f.value.id == me and f.attr in self.methods and _kind(self.methods[f.attr]) == "":
                self.take(f"self.{f.attr}", self.methods[f.attr], name)


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The line a def's source starts on: its first decorator's, as its code object's first line is."""
    return node.decorator_list[0].lineno if node.decorator_list else node.lineno


def _generator(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the def is a generator: Cython's generators are not `types.GeneratorType`, which code that
    tells a generator from a result tests (PyYAML's constructors), so one is not compiled for every caller."""
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, nested):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _kind(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """"" for an undecorated def, "classmethod" or "staticmethod" for one with that decorator alone, None
    for any other (its decorator would not apply to the compiled copy)."""
    if not fn.decorator_list:
        return ""
    d = fn.decorator_list[0]
    if len(fn.decorator_list) == 1 and isinstance(d, ast.Name) and d.id in ("classmethod", "staticmethod"):
        return d.id
    return None


class CythonProposer(Proposer):
    """The target compiled with Cython: unchanged, with its arguments' and locals' types from its calls,
    with the functions it calls (callees) compiled beside it, and typed with them."""

    name = "cython"
    reads_local_types = True

    def __init__(self) -> None:
        self.compiled: set[str] = set()  # the candidates whose code a later round compiled (stacked)

    def skip(self, ctx: Context) -> str | None:
        return missing_toolchain("Cython", "Cython is not installed (pip install cython)") or _unsupported(ctx.target)

    def propose(self, ctx: Context) -> list[Proposal]:
        if self.skip(ctx):
            return []
        if ctx.round != 1:
            return self.stacked(ctx)
        t = ctx.target
        typed = declarations(t, ctx)
        tree = callee_tree(t, reached={int(key.rpartition("@")[2]) for key in ctx.callee_types})
        calls: list[Callee] = [(name, text, {}) for name, text, _ in tree]
        variants: list[tuple[dict[str, str], list[Callee]]] = [({}, [])]
        if typed:
            variants.append((typed, []))
        if calls:
            variants.append(({}, calls))
        # Only what the target's calls alone reach is typed (the module's functions it calls, not through
        # a method): a method's compiled copy takes its place in its class for every caller, whose types
        # no trace saw, and so do the functions it calls.
        typed_calls = [(name, text, callee_declarations(t, text, ctx) if alone else {}) for name, text, alone in tree]
        if typed_calls and (typed or any(types for _, _, types in typed_calls)):
            variants.append((typed, typed_calls))
        out, errors, tried = [], [], set()
        callable_directly = _direct(t, calls)  # by the code alone, whatever a variant declares
        for types, with_calls in variants:
            direct = callable_directly if with_calls else set()
            error, unassigned = _cython(t, types, with_calls, direct)
            if error and direct:  # the variant stands without its C calls
                direct = set()
                error, unassigned = _cython(t, types, with_calls, direct)
            if maybe := {name for name in unassigned if name in _c_typed(types, with_calls)}:
                # A C-typed local Python may find unassigned is left to Python (it raises UnboundLocalError).
                types = {k: v for k, v in types.items() if k not in maybe}
                with_calls = [(n, text, {k: v for k, v in ty.items() if k not in maybe}) for n, text, ty in with_calls]
                error = _cython(t, types, with_calls, direct)[0]
            named = [_named(name, ty, name in direct) for name, _, ty in with_calls]
            variant = (tuple(sorted(types.items())), tuple(named))
            if variant in tried:
                continue
            tried.add(variant)
            if error:
                errors.append(error)
                continue
            out.append(Proposal(code=candidate(t, types, named), origin="builtin:cython", trusted=True,
                                approach=_approach(types, with_calls, direct)))
        if not out:
            raise NotApplicable(f"Cython does not compile it: {errors[0]}")
        return out

    def stacked(self, ctx: Context) -> list[Proposal]:
        """The best verified candidate so far, where redline did not compile it (a rewrite: an LLM's, a
        file's, a built-in's), compiled as it is, once: its algorithm and compiled code together. Its
        code's trust is kept: an untrusted one is built in a worker of its own (Workers.prebuild)."""
        best = ctx.best
        if best is None or best.id in self.compiled or compiled_by_redline(best.code):
            return []
        self.compiled.add(best.id)
        try:
            tree = ast.parse(best.code)
        except SyntaxError:
            return []
        name = ctx.target.qualname.rpartition(".")[2]
        fn = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
                  None)
        method = "." in ctx.target.qualname
        if fn is None or fn.decorator_list or \
                _not_compiled(fn, _rebound(tree) | _rebound(ast.parse(ctx.target.source)), method=method):
            return []
        lines = best.code.splitlines(keepends=True)
        if _cython_checked(_helper().source("".join(lines[fn.lineno - 1:fn.end_lineno]), ctx.target.qualname, {}))[0]:
            return []
        code = f"{HELPER}\n\n" + "".join(lines[:fn.lineno - 1]) + "@_RedlineCython()\n" + "".join(lines[fn.lineno - 1:])
        said = best.approach.split(";")[0] if best.approach else best.origin
        return [Proposal(code=code, origin="builtin:cython", trusted=best.trusted, parent=best.id,
                         approach=f"{best.id} ({said}) {_approach({}, [])}")]


# A function the target calls, compiled with it: its name in the decorator, its source, its declarations.
Callee = tuple[str, str, dict[str, str]]


def _named(name: str, types: dict[str, str], direct: bool = False) -> str:
    """A callee as the decorator names it: `skip_chars`, typed `skip_chars(pos=Py_ssize_t, src=str)`, called
    directly `direct skip_chars`."""
    return ("direct " if direct else "") + (f"{name}({', '.join(f'{k}={v}' for k, v in sorted(types.items()))})"
                                            if types else name)


def _direct(t: Target, calls: list[Callee]) -> set[str]:
    """The module functions among `calls` that the compiled code calls as C functions (Cython's ccall:
    no global lookup, no argument parsing, C-typed arguments passed unboxed). Each is a plain def without
    `*args` or `**kwargs` and without what Cython makes a closure of (a lambda, a generator expression,
    a def or class inside it); the compiled code never reads it as a value nor calls it with `*` or `**`;
    and it does not reach itself through such functions alone, since a C call does not count towards
    Python's recursion limit (a deep recursion would overflow the C stack where Python raises
    RecursionError)."""
    trees = [_function(t), *(ast.parse(textwrap.dedent(text)).body[0] for _, text, _ in calls)]
    defs = {name: tree for (name, _, _), tree in zip(calls, trees[1:], strict=True) if "." not in name}
    closures = (ast.Lambda, ast.GeneratorExp, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Yield,
                ast.YieldFrom, ast.Await)
    direct = {name for name, fn in defs.items() if isinstance(fn, ast.FunctionDef) and not fn.args.vararg
              and not fn.args.kwarg and not any(isinstance(n, closures) for n in ast.walk(fn) if n is not fn)}
    callers: dict[str, set[str]] = {name: set() for name in direct}
    for tree in trees:
        calls_of = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
        called = {id(n.func) for n in calls_of}
        direct -= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}
        direct -= {n.func.id for n in calls_of  # type: ignore[attr-defined]
                   if any(isinstance(a, ast.Starred) for a in n.args) or any(k.arg is None for k in n.keywords)}
        if isinstance(tree, ast.FunctionDef) and tree.name in callers:
            callers[tree.name] |= {n.func.id for n in calls_of}  # type: ignore[attr-defined]
    # less those on a cycle of direct calls (what is left has none: taking nodes away makes no cycle)
    return direct - {name for name in direct if name in _reach(name, callers, direct)}


def _reach(start: str, calls: dict[str, set[str]], within: set[str]) -> set[str]:
    """What `start` reaches through calls among `within`."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for name in calls.get(todo.pop(), set()) & within:
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


def _c_typed(types: dict[str, str], calls: list[Callee]) -> set[str]:
    """The variables a variant declares a C type, the target's and its callees'."""
    return {k for ty in [types, *(c[2] for c in calls)] for k, v in ty.items() if v in _C_TYPES}


def callee_declarations(t: Target, text: str, ctx: Context) -> dict[str, str]:
    """What a module function compiled with a typed variant declares: its variables' types from the trace of the
    target's calls (Context.callee_types: the module's functions they reached), by the rules for the
    target's locals (local_types, characters); a parameter only where its default fits the type, never
    the `*args` or `**kwargs` one."""
    fn = ast.parse(textwrap.dedent(text)).body[0]
    assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    at = t.source.find(text)  # callees() takes its source from the module's lines: its def's line
    seen = ctx.callee_types.get(f"{fn.name}@{t.source.count(chr(10), 0, at) + 1}", {}) if at >= 0 else {}
    if not seen:
        return {}
    defaults = {**_defaults(fn), **{a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True)
                                    if d is not None}}
    stars = {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None}
    return _with_positions(fn, lambda sequences: {
        k: v for k, v in local_types(fn, seen, sequences).items()
        if k not in stars and (k not in defaults or _default_fits(defaults[k], v))})


# The declared types whose items Cython reads by a C index.
_SEQUENCES = {"str", "list", "tuple", "bytes", "bytearray"}


def declarations(t: Target, ctx: Context) -> dict[str, str]:
    """What a typed variant declares: its arguments' types from its calls (argument_types) where its
    code agrees (_holds), its locals' from the trace (local_types); then the ints it uses as positions
    in the sequences so declared; less the str ones of single characters (characters)."""
    manifest = t.inputs.manifest
    fn = _function(t)
    signatures = [s.signature for s in manifest.signatures] if manifest is not None else None
    params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}

    def declared(sequences: frozenset[str]) -> dict[str, str]:
        passed = argument_types(fn, ctx.inputs, "." in t.qualname, signatures, sequences)
        arguments = {k: v for k, v in passed.items() if _holds(fn, k, v, ctx.local_types, sequences)}
        return {**{k: v for k, v in local_types(fn, ctx.local_types, sequences).items() if k not in params}, **arguments}
    return _with_positions(fn, declared)


def _with_positions(fn: ast.FunctionDef | ast.AsyncFunctionDef,
                    declared: Callable[[frozenset[str]], dict[str, str]]) -> dict[str, str]:
    """`declared` (the declarations given the sequences whose positions may be C integers) taken twice:
    first with none, then with the sequences that gives; less the str declarations of single characters."""
    first = declared(frozenset())
    return characters(declared(frozenset(k for k, v in first.items() if v in _SEQUENCES)), fn)


def _approach(types: dict[str, str], calls: list[Callee], direct: set[str] | None = None) -> str:
    said = "compiled with Cython" + (" with " + ", ".join(f"{k}: {v}" for k, v in sorted(types.items())) if types else "")
    functions, methods, others = ([name for name, _, _ in part] for part in _split(calls))
    if functions:
        said += f", with compiled copies of the functions it calls ({', '.join(functions)}) for its own calls"
        if direct:
            said += f" ({', '.join(f for f in functions if f in direct)} as C calls)"
    if methods:
        said += f", {'and ' if functions else 'with '}the methods it calls ({', '.join(methods)}) compiled in their class"
    if others:
        classes = list(dict.fromkeys(name.split(".")[0] for name in others))
        said += (f", {'and ' if functions or methods else 'with '}the methods of the classes it uses "
                 f"({', '.join(classes)}) compiled in their classes")
    if any(ty for _, _, ty in calls):
        said += ", typed from their calls"
    return said + "; needs Cython and a C compiler where it runs (plain Python without them)"


def _split(calls: list[Callee]) -> tuple[list[Callee], list[Callee], list[Callee]]:
    """Callees as the module's functions, the target's class's methods and the other classes' methods."""
    return ([c for c in calls if "." not in c[0]], [c for c in calls if c[0].startswith("self.")],
            [c for c in calls if "." in c[0] and not c[0].startswith("self.")])


def candidate(t: Target, types: dict[str, str], calls: list[str] | None = None) -> str:
    """The helper class, then the target's own source with the decorator above its def (naming the
    callees as _named writes them)."""
    source = textwrap.dedent(t.function_source)
    args = ", ".join([*(repr(c) for c in calls or []), *(f"{k}={v!r}" for k, v in sorted(types.items()))])
    return f"{HELPER}\n\n@_RedlineCython({args})\n{source}"


# Cython's warning that a variable may be read before it is assigned: a C-typed local (a double, a
# truth value) would then be read uninitialised where Python raises UnboundLocalError.
_UNASSIGNED = re.compile(r"local variable '(\w+)' (?:might be )?referenced before assignment")


def _cython(t: Target, types: dict[str, str], calls: list[Callee] | None = None,
            direct: set[str] | None = None) -> tuple[str | None, set[str]]:
    """Cython on the source the decorator would compile for the target (_cython_checked), the functions
    named in `direct` called as C functions."""
    functions, methods, others = _split(calls or [])
    classes: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for name, text, ty in others:
        classes.setdefault(name.split(".")[0], []).append((text, ty))
    return _cython_checked(_helper().source(t.function_source, t.qualname, types,
                                            [(text, ty, name in (direct or ())) for name, text, ty in functions],
                                            [(text, ty) for _, text, ty in methods], list(classes.items())))


def _cython_checked(source: str) -> tuple[str | None, set[str]]:
    """Cython on `source`: its first error (None where it compiles), and the variables it says may be
    read before they are assigned."""
    with tempfile.TemporaryDirectory(prefix="redline-cython-") as tmp:
        py = os.path.join(tmp, "_redline_check.py")
        with open(py, "w") as fh:
            fh.write(source)
        run = subprocess.run([sys.executable, "-c", _helper().CYTHON, "-X", "warn.maybe_uninitialized=True", py],
                             capture_output=True, text=True, timeout=120)
    output = run.stderr or run.stdout
    unassigned = set(_UNASSIGNED.findall(output))
    if run.returncode == 0:
        return None, unassigned
    lines = [line for line in output.splitlines() if line.strip() and not line.startswith("warning")]
    return next((line.split(": ", 1)[-1] for line in lines if ".py:" in line), lines[-1] if lines else "failed"), unassigned
