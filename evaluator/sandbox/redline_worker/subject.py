"""The callable under test and its inputs: the target's module loaded (or the candidate's code put in
its place), and the arguments of one call from make_inputs(seed), a KernelBench file or a captured
call (unpickled here, inside the sandbox)."""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import importlib.util
import inspect
import io
import os
import pickle
import sys
import types
from typing import Any

from .keys import call_key
from .state import _isinstance, _type, state


def load_module(path: str, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_target_module(path: str, name: str) -> types.ModuleType:
    """The target's module: imported by its dotted name where that name finds this very file (so
    its package and relative imports work, and pickled objects of its classes are its own), else
    loaded from the file under `name`."""
    if "." in name:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin and os.path.realpath(spec.origin) == os.path.realpath(path):
            return importlib.import_module(name)
    return load_module(path, name)


def consuming(fn: Any, like: Any) -> Any:
    """Calls of `fn` as the outcome of `like` (the target as written) is compared: where the target is a
    generator function, the list of what the call yields (or of what the iterator it returns gives);
    where it is a coroutine function, what the call returns when awaited (on one event loop kept for the
    worker). Otherwise `fn` itself."""
    if inspect.isgeneratorfunction(like):
        def drain(*args: Any, **kwargs: Any) -> Any:
            return list(fn(*args, **kwargs))
        return drain
    if inspect.iscoroutinefunction(like):
        import asyncio

        loop = asyncio.new_event_loop()

        def run(*args: Any, **kwargs: Any) -> Any:
            result = fn(*args, **kwargs)
            return loop.run_until_complete(result) if inspect.isawaitable(result) else result
        return run
    return fn


def _set_state(self: Any, state: Any) -> None:
    """pickle's own restoring of an object's state (its `__dict__` entries, then its slots), with each
    entry set as the program's own code sets attributes. pickle writes entries into `obj.__dict__`, which
    makes CPython keep the attributes in a dictionary apart from the object, where its specialised
    attribute reads no longer apply: on such objects Python code ran up to 2x slower than on the
    program's own (chardet's SingleByteCharSetProber.feed, 59 against 29 µs), and compiled code, whose
    reads do not specialise, measured faster than the original where it was slower (1.28x on such
    objects, 0.87x on the program's). A name the class has a data descriptor for (a property), and one a
    type's own `__setattr__` keeps object's from setting, is written to `__dict__` as pickle writes it."""
    slots = None
    if _type(state) is tuple and len(state) == 2:
        state, slots = state
    if state:
        cls: Any = _type(self)
        for name, value in state.items():
            if _type(name) is str and not _data_descriptor(cls, name):
                with contextlib.suppress(TypeError, AttributeError):
                    object.__setattr__(self, name, value)
                    continue
            self.__dict__[name] = value
    if slots:
        for name, value in slots.items():
            setattr(self, name, value)


@functools.cache
def _data_descriptor(cls: type, name: str) -> bool:
    """Whether what the class's instances find under `name` first is a data descriptor (a property, a slot)."""
    return inspect.isdatadescriptor(next((vars(base)[name] for base in cls.__mro__ if name in vars(base)), None))


def _restored_natively(cls: Any) -> None:
    """Give a class of captured objects that restores its state as pickle does by default `_set_state` as
    its `__setstate__` (in this worker only, for the reference and the candidate alike)."""
    if (_isinstance(cls, type) and cls.__flags__ & _HEAPTYPE and getattr(cls, "__setstate__", None) is None
            and cls.__reduce_ex__ is object.__reduce_ex__ and cls.__reduce__ is object.__reduce__):
        with contextlib.suppress(TypeError, AttributeError):
            cls.__setstate__ = _set_state


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement


class _Unpickler(pickle.Unpickler):
    """Captured objects whose classes lived in the program's `__main__` (or the target module under its
    runtime name) are made from the target module loaded here; their state is restored as the program's
    code sets attributes (_set_state)."""

    def __init__(self, subject: Subject, streams: list[bytes] | None = None) -> None:
        self.subject = subject
        self.streams = streams or []

    def loads(self, data: bytes) -> Any:
        super().__init__(io.BytesIO(data))
        return self.load()

    def loads_items(self, data: bytes, n: int) -> list[Any]:
        """`n` pickles written one after another by one pickler (a generator's items as it yielded
        them), read with one memo: an item's references to an earlier one are kept."""
        super().__init__(io.BytesIO(data))
        return [self.load() for _ in range(n)]

    def persistent_load(self, pid: Any) -> Any:
        """An iterator argument of a captured call: a fresh iterator over the items the call took."""
        if type(pid) is tuple and len(pid) == 2 and pid[0] == "stream" and 0 <= pid[1] < len(self.streams):
            return iter(_Unpickler(self.subject).loads(self.streams[pid[1]]))
        raise pickle.UnpicklingError(f"unknown reference {pid!r} in a captured call")

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("_redline_capture", "_class_with_state"):
            return self._class_with_state
        if (module, name) == ("_redline_capture", "_new_bare"):
            return _new_bare
        if module in ("__main__", getattr(self.subject, "captured_module", None)):
            found = resolve(self.subject.module, name)
        else:
            found = super().find_class(module, name)
        _restored_natively(found)
        return found

    def _class_with_state(self, module: str, qualname: str, state: bytes) -> Any:
        """A class with the attributes the program had set on it after its definition ran (the recorder's
        _class_state, pickled apart: caches built on the class by a metaclass or a first instance), set
        here where this process's class lacks them; what its own import made is kept."""
        cls = self.find_class(module, qualname)
        added: Any = _Unpickler(self.subject).loads(state) if _isinstance(state, bytes) else None
        if _isinstance(cls, type) and _isinstance(added, dict):
            for name, value in added.items():
                if _isinstance(name, str) and name not in vars(cls):
                    setattr(cls, name, value)
        return cls


def _new_bare(cls: Any) -> Any:
    """An instance of a class whose own `__new__` wants arguments pickle did not keep (the recorder's
    _new_bare), made as its nearest built-in base makes one; its state is restored after."""
    if not _isinstance(cls, type):
        raise pickle.UnpicklingError(f"cannot make an instance of {cls!r}")
    base = next(b for b in cls.__mro__ if not b.__flags__ & _HEAPTYPE)
    return base.__new__(cls)


_HOLDER = "__redline_holder__"


def decorators_of(file: str, parts: list[str]) -> list[ast.expr]:
    """The decorators of the def `parts` (a function, or a method in its classes) in the target's file: of
    the last def of each name, which the name is bound to (an overloaded function's implementation, not
    its `@overload` stubs)."""
    try:
        with open(file, encoding="utf-8") as fh:
            body: list[ast.stmt] = ast.parse(fh.read()).body
    except (OSError, SyntaxError, ValueError):
        return []
    node: ast.stmt | None = None
    for part in parts:
        node = next((n for n in reversed(body) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == part), None)
        if node is None:
            return []
        body = node.body
    return list(node.decorator_list) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []


def _under_the_originals(written: ast.Module, name: str, own: list[ast.expr], namespace: dict[str, Any],
                         module: types.ModuleType) -> bool:
    """Where the target's decorators refuse to decorate a second function of its name (networkx's
    `@_dispatchable` registers each algorithm by name), the candidate's code runs inside the original's
    decorated function: the innermost function under their wrappers (`__wrapped__`) takes the candidate's
    code, defaults and helpers. False where that cannot stand for the edit (decorators of its own, a
    closure), and the refusal stands."""
    node = next((n for n in written.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
                None)
    if node is None or [ast.unparse(d) for d in node.decorator_list] not in ([], [ast.unparse(d) for d in own]):
        return False
    node.decorator_list = []
    exec(compile(written, state.candidate_file, "exec"), namespace)
    cand: Any = namespace.get(name)
    raw: Any = module.__dict__.get(name)
    seen: set[int] = set()
    while hasattr(raw, "__wrapped__") and id(raw) not in seen:
        seen.add(id(raw))
        raw = raw.__wrapped__
    if not (_isinstance(cand, types.FunctionType) and _isinstance(raw, types.FunctionType)) \
            or cand.__code__.co_freevars or raw.__code__.co_freevars or raw.__globals__ is not module.__dict__:
        return False
    raw.__code__, raw.__defaults__, raw.__kwdefaults__ = cand.__code__, cand.__defaults__, cand.__kwdefaults__
    for key, value in namespace.items():  # its helpers, where the module has no such name
        if not key.startswith("__") and key not in module.__dict__:
            module.__dict__[key] = value
    return True


def with_decorators(tree: ast.Module, name: str, own: list[ast.expr]) -> None:
    """The candidate's def of `name` under the target's decorators, as the edit writes it: the file keeps
    them above the def it replaces, so they apply to the candidate as they do to the original; a candidate
    that repeats them first (`@staticmethod`, or all of them in order) has them once, and its own further
    decorators apply inside them (evaluator/target.py::_placed writes the same)."""
    if not own:
        return
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            said, theirs = [ast.unparse(d) for d in node.decorator_list], [ast.unparse(d) for d in own]
            kept = node.decorator_list[len(own):] if said[:len(own)] == theirs else node.decorator_list
            for d in own:
                for n in ast.walk(d):
                    ast.copy_location(n, node)  # placed at the candidate's def, not the file's lines
            node.decorator_list = [*own, *kept]
            return


def in_class(tree: ast.Module, name: str, owner: str) -> bool:
    """Put the candidate's method `name` inside a class named like its owner, as it is in the owner's
    body: its private names mangle as the owner's do, and a zero-argument super() gets its `__class__`
    cell (set to the owner by _own_class_cell). The module-level name is restored after the class
    statement, so the method's own references to the owner reach the real class. False where the
    candidate defines no such function at top level."""
    for i, node in enumerate(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            before = ast.parse(f"__redline_had__ = {owner!r} in globals()\n"
                               f"__redline_saved__ = globals().get({owner!r})").body
            holder = ast.ClassDef(name=owner, bases=[], keywords=[], body=[node], decorator_list=[])
            after = ast.parse(f"{_HOLDER} = {owner}\nif __redline_had__:\n    {owner} = __redline_saved__\n"
                              f"else:\n    del {owner}\ndel __redline_had__, __redline_saved__").body
            for stmt in (*before, holder, *after):
                ast.copy_location(stmt, node)
            tree.body[i:i + 1] = [*before, holder, *after]
            ast.fix_missing_locations(tree)
            return True
    return False


def _own_class_cell(fn: Any, owner: type) -> None:
    """A method compiled in a stand-in class body: its `__class__` cell (zero-argument super()) made the
    owner's."""
    func = getattr(fn, "__func__", fn)
    code = getattr(func, "__code__", None)
    if code is not None and "__class__" in code.co_freevars and func.__closure__:
        func.__closure__[code.co_freevars.index("__class__")].cell_contents = owner


def resolve(obj: Any, qualname: str) -> Any:
    for part in qualname.split("."):
        obj = getattr(obj, mangled(obj, part))
    return obj


def mangled(owner: Any, name: str) -> str:
    """A class's private name as Python stores it (`__apply` in class `_Inline` is `_Inline__apply`)."""
    if isinstance(owner, type) and name.startswith("__") and not name.endswith("__"):
        return f"_{owner.__name__.lstrip('_')}{name}"
    return name


class Subject:
    """The callable under test and how to make its inputs."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        for p in reversed(spec["sys_path"]):
            if p not in sys.path:
                sys.path.insert(0, p)
        sys.path.extend(p for p in spec.get("fallback_path", []) if p not in sys.path)
        module = load_target_module(spec["file"], spec["module"])
        self.module = module
        qual = spec["qualname"]
        parts = qual.split(".")
        source = spec["inputs"]
        self.kernelbench = source["kind"] == "kernelbench"
        self.captured: list[bytes] = []
        self.make_inputs = None
        if source["kind"] == "make_inputs":
            inputs_mod = module if os.path.abspath(source["file"]) == os.path.abspath(spec["file"]) else \
                load_module(source["file"], "_redline_inputs")
            self.make_inputs = getattr(inputs_mod, source["func"])
        elif source["kind"] == "captured":
            self.captured_module = source["module"]
            for name in source["calls"]:
                with open(os.path.join(source["store"], name), "rb") as fh:
                    self.captured.append(fh.read())
        if spec.get("device") == "cuda":
            from .cuda import Cuda

            state.cuda = Cuda()
        self.original = None if spec["inputs"]["kind"] == "kernelbench" else resolve(module, qual)
        code = spec.get("candidate")
        if code is not None:
            self._load_candidate(module, code, parts, spec.get("preimport", []), spec["file"])
        state.hook_on = True
        if self.kernelbench:
            self.model_cls = resolve(module, parts[0])
        self.fn = None if self.kernelbench else consuming(resolve(module, qual), self.original)

    @staticmethod
    def _load_candidate(module: types.ModuleType, code: str, parts: list[str], preimport: list[str],
                        file: str) -> None:
        """Put the candidate in the target's place: its module a copy of the target's globals, the function
        (or the method, compiled as if in its class's body) in the module or class the target is in, under
        the target's own decorators (see with_decorators)."""
        for mod_name in preimport:
            try:
                __import__(mod_name)
            except Exception:  # the candidate's own import will report it
                pass
        # The candidate is a real module in a real file: Triton reads a @jit function's source
        # from its file, and torch.compile looks its module up in sys.modules.
        cand_name = module.__name__ + "__candidate"
        state.candidate_file = os.path.join(state.scratch, cand_name.replace(".", "_") + ".py")
        with open(state.candidate_file, "w") as fh:
            fh.write(code)
        cand_module = types.ModuleType(cand_name)
        namespace = cand_module.__dict__
        namespace.update({k: v for k, v in module.__dict__.items() if not k.startswith("__")})
        # Its spec is the target module's: the module it stands in for (the Cython proposer's decorator
        # compiles that module's functions the target calls, as it does in the user's file).
        namespace.update(__name__=cand_name, __file__=state.candidate_file, __package__=module.__package__,
                         __spec__=module.__spec__)
        sys.modules[cand_name] = cand_module
        state.hook_on = True
        name = parts[-1]
        owner = resolve(module, ".".join(parts[:-1])) if len(parts) > 1 else None
        tree = ast.parse(code, state.candidate_file)
        own = decorators_of(file, parts)
        with_decorators(tree, name, own)
        held = owner is not None and in_class(tree, name, owner.__name__)
        try:
            exec(compile(tree, state.candidate_file, "exec"), namespace)
        except Exception:
            if not own or owner is not None or \
                    not _under_the_originals(ast.parse(code, state.candidate_file), name, own, namespace, module):
                raise
            return
        fn = namespace.pop(_HOLDER).__dict__.get(mangled(owner, name)) if held else namespace.get(name)
        if fn is None or not (callable(fn) or _isinstance(fn, (staticmethod, classmethod))):
            raise NameError(f"the candidate does not define {name}()")
        if owner is not None:
            if held:
                _own_class_cell(fn, owner)
            setattr(owner, mangled(owner, name), fn)  # this process is the candidate's own
        else:
            module.__dict__[name] = fn

    def first_key(self) -> int:
        return 0 if self.captured else 12345

    def recorded(self, index: int) -> dict[str, Any]:
        """A captured call's file: `call` (pickled arguments) and `outcome` (see inputs/store.py)."""
        return _Unpickler(self).loads(self.captured[index])

    def call_key(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The key of one call's inputs (keys.py) as the target's guard computes it: a method's with the
        instance first, also where the call is of a bound method (a KernelBench model's forward)."""
        if self.original is not None:
            return call_key(self.original, args, kwargs)
        instance = getattr(fn, "__self__", None)
        if instance is not None and hasattr(fn, "__func__"):
            return call_key(fn.__func__, (instance, *args), kwargs)
        return ""

    def inputs(self, seed: int) -> tuple[tuple[Any, ...], dict[str, Any], Any]:
        """Positional and keyword arguments for one call (fresh objects every time), and the callable.
        `seed` picks a captured call by its index, or seeds make_inputs."""
        _seed_all(seed)
        if self.captured:
            record = self.recorded(seed)
            args, kwargs = _Unpickler(self, record.get("streams")).loads(record["call"])
            return tuple(args), dict(kwargs), self.fn
        if self.kernelbench:
            cuda = self.spec.get("device") == "cuda"
            # On CUDA the model and the inputs are made on the device itself (torch's default device):
            # a KernelBench get_inputs() of 16384x8192 random tensors takes seconds on the CPU.
            with sys.modules["torch"].device("cuda") if cuda else contextlib.nullcontext():
                init = self.module.get_init_inputs() if hasattr(self.module, "get_init_inputs") else []
                _seed_all(seed)
                model = self.model_cls(*init)
                _seed_all(seed + 1)
                args = self.module.get_inputs()
            if cuda:
                model = model.cuda()
                args = [a.cuda() if hasattr(a, "cuda") else a for a in args]
            return tuple(args), {}, model.forward if ".forward" in self.spec["qualname"] else model
        assert self.make_inputs is not None
        value = self.make_inputs(seed)
        args = value if _type(value) is tuple else (value,)
        return args, {}, self.fn


def _seed_all(seed: int) -> None:
    import random

    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(seed % (2**32))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)


