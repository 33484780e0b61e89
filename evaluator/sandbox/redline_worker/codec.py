"""Values as the harness sees them: an exact, JSON-able description of each output as a graph of its
objects (their types, state and sharing; arrays by dtype, shape and bytes; never a pickle), large
arrays and long sequences by a seeded sample plus exact counts; and a short description of an argument
for prompts. encoded.py describes the format, which the harness's comparison (compare.py) reads."""

from __future__ import annotations

import enum
import hashlib
import os
import re
import sys
import threading
import types
import weakref
from collections import deque
from typing import Any

from .encoded import LONG
from .state import _b64, _isinstance, _json_dumps, _len, _Random, _type, sample_seed, state

_INLINE = 256 << 10
_blob_count = [0]


_harness_dirs: list[str] = []


def _harness_dir() -> str:
    """Where large values go when the harness (a test, a benchmark) encodes them itself, outside any
    worker: a private temporary directory, never the current one."""
    if not _harness_dirs:
        import atexit
        import shutil
        import tempfile

        _harness_dirs.append(tempfile.mkdtemp(prefix="redline-encode-"))
        atexit.register(shutil.rmtree, _harness_dirs[0], True)
    return _harness_dirs[0]


def _blob(data: bytes, digest: bool) -> dict[str, Any]:
    """Array bytes for the harness: inline when small, else a file in the scratch directory with
    its sha256 (the harness verifies it), or only the digest when only equality matters."""
    h = hashlib.sha256(data).hexdigest()
    if digest:
        return {"sha256": h}
    if _len(data) <= _INLINE:
        return {"b": _b64(data).decode()}
    _blob_count[0] += 1
    path = os.path.join(state.scratch or _harness_dir(), f"blob-{_blob_count[0]}.bin")
    with open(path, "wb") as fh:
        fh.write(data)
    return {"file": path, "sha256": h}


# Arrays larger than this many elements are described by a sample of _SAMPLE_K elements, at
# positions drawn from a seed the harness sends with each request (the same for reference and
# candidate, fresh every request), plus exact float64 sums and NaN/inf counts over all elements:
# a 512 MB output then costs 1 MB to compare instead of a file the size of the tensor.
_SAMPLE_OVER = 1 << 22
_SAMPLE_K = 1 << 18


def _sketch_torch(value: Any, name: str, dtype: str, digest: bool) -> dict[str, Any]:
    torch = sys.modules["torch"]
    flat = value.detach().reshape(-1)
    g = torch.Generator(device=flat.device).manual_seed(sample_seed[0])
    idx = torch.randint(0, flat.numel(), (_SAMPLE_K,), device=flat.device, generator=g)
    sample = flat[idx]
    if flat.is_floating_point():
        stats: dict[str, Any] = {"nan": int(torch.isnan(flat).sum()), "inf": int(torch.isinf(flat).sum())}
        finite = torch.nan_to_num(flat, nan=0.0, posinf=0.0, neginf=0.0)
        sample = sample.float()
    else:
        stats, finite = {"nan": 0, "inf": 0}, flat
    stats.update(seed=sample_seed[0], n=int(flat.numel()), sum=float(finite.sum(dtype=torch.float64)),
                 abs_sum=float(finite.abs().sum(dtype=torch.float64)))
    arr = sample.cpu().numpy()
    return {"t": name, "dtype": arr.dtype.str, "torch_dtype": dtype, "shape": list(value.shape), "sampled": stats,
            **_blob(arr.tobytes(), digest)}


def _sketch_numpy(arr: Any, name: str, digest: bool) -> dict[str, Any]:
    np = sys.modules["numpy"]
    flat = arr.reshape(-1)
    idx = np.random.default_rng(sample_seed[0]).integers(0, flat.size, _SAMPLE_K)
    sample = np.ascontiguousarray(flat[idx])
    if flat.dtype.kind in "fc":
        stats: dict[str, Any] = {"nan": int(np.isnan(flat).sum()), "inf": int(np.isinf(flat).sum())}
        finite = np.nan_to_num(flat, nan=0.0, posinf=0.0, neginf=0.0)
    else:
        stats, finite = {"nan": 0, "inf": 0}, flat
    stats.update(seed=sample_seed[0], n=int(flat.size), sum=float(np.sum(finite, dtype=np.float64).real),
                 abs_sum=float(np.sum(np.abs(finite), dtype=np.float64)))
    return {"t": name, "dtype": sample.dtype.str, "shape": list(arr.shape), "sampled": stats,
            **_blob(sample.tobytes(), digest)}


# Atoms: written in place wherever they occur, never shared (their identity means nothing).
_ATOMS = (type(None), bool, int, float, complex, str, bytes)
BUDGET = 2_000_000  # objects and atoms encoded for one value; past it, what is left is `unsupported`
_UNSET = {"t": "redline.unset", "v": None}  # a slot with no value
_LOCKS = (_type(threading.Lock()), _type(threading.RLock()))
_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType)


def encode(value: Any, digest: bool = False) -> dict[str, Any]:
    """A JSON-able, exact description of a value as a flat graph of its objects (encoded.py): its exact
    types, state and sharing (with `digest`, arrays are described by their sha256 only: enough to tell
    whether inputs were changed). Never raises for what it cannot describe: that part is `unsupported`."""
    return _Encoder(digest).run(value)


def _qualified(obj: Any) -> str:
    return f"{getattr(obj, '__module__', None) or '?'}.{getattr(obj, '__qualname__', None) or getattr(obj, '__name__', '?')}"


def _atom(v: Any, t: type) -> dict[str, Any]:
    name = f"{t.__module__}.{t.__qualname__}"
    if t is float:
        return {"t": name, "v": repr(v)}
    if t is complex:
        return {"t": name, "v": [repr(v.real), repr(v.imag)]}
    if t is bytes:
        return {"t": name, "v": _b64(v).decode()}
    return {"t": name, "v": v}


_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined in Python
_CONTAINERS = (object, list, tuple, dict, set, frozenset)


_PYTHON_DEFS = (types.FunctionType, classmethod, staticmethod)


_NOT_BY_VALUE = object()


def _has_dict(v: Any) -> bool:
    try:
        return _type(object.__getattribute__(v, "__dict__")) is dict
    except (AttributeError, TypeError):
        return False


_plain_types: dict[type, bool] = {}


def _plain(t: type) -> bool:
    """Whether instances of `t` keep all their state in `__dict__` and slots, read directly: classes
    written in Python over plain containers. Their own `__reduce__` or `__getstate__` is not asked: a
    class that pickles itself from part of its state (a sorted list from its values alone) would hide
    a change to the rest (its index, a cache that later calls read). A type written in C keeps state
    that no attribute shows (it is a heap type too when its module uses type specs, as array's does,
    but its reduce is C code) and is described by its reduce protocol, or is `unsupported`."""
    known = _plain_types.get(t)
    if known is None:
        known = True
        for c in t.__mro__:
            if c in _CONTAINERS:
                continue
            own = [c.__dict__.get(name) for name in ("__reduce__", "__reduce_ex__", "__getstate__")]
            if not c.__flags__ & _HEAPTYPE or any(x is not None and not _isinstance(x, _PYTHON_DEFS) for x in own):
                known = False
                break
        _plain_types[t] = known
    return known


def _mutable(v: Any, t: type) -> bool:
    """Whether the identity of `v` matters to a caller: unhashable objects and instances of classes
    written in Python (which hash by identity) can change under a second reference; frozen dataclasses,
    tuples and hashable C values (Decimal, datetime) cannot."""
    if t.__hash__ is None:
        return True
    params = getattr(t, "__dataclass_params__", None)
    return _plain(t) and not _isinstance(v, tuple) and not (params is not None and params.frozen)


class _Encoder:
    """One value's graph, built breadth first without recursion; every object met is kept alive until
    the end, so no id is reused for another object while it is being encoded."""

    def __init__(self, digest: bool, outer: _Encoder | None = None) -> None:
        self.digest = digest
        self.outer = outer  # the graph whose set this one is a member of (members)
        self.nodes: list[Any] = []
        self.memo: dict[int, int] = {}
        self.keep: list[Any] = []
        self.todo: deque[tuple[int, Any]] = deque()
        self.count = 0

    def run(self, value: Any) -> dict[str, Any]:
        root = self.child(value)
        if not _isinstance(root, int):
            return {"nodes": [root]}
        while self.todo:
            i, v = self.todo.popleft()
            try:
                self.nodes[i] = self.node(v)
            except Exception as exc:  # reading its state ran its code (a property, a reduce) and that raised
                self.nodes[i] = {"t": _qualified(_type(v)),
                                 "unsupported": f"reading it raised {_type(exc).__name__}: {str(exc)[:200]}"}
        return {"nodes": self.nodes}

    def child(self, v: Any) -> Any:
        """The reference to `v` inside a node: an atom in place, else the index of its node."""
        t = _type(v)
        self.count += 1
        if t in _ATOMS:
            return _atom(v, t)
        named = self.by_value(v, t)
        if named is not None:
            return named
        i = self.memo.get(id(v))
        if i is not None:
            return i
        back = self.enclosing(v, t)
        if back is not None:
            return back
        if self.count > BUDGET:
            return {"t": _qualified(t), "unsupported": f"the value holds more than {BUDGET:,} objects"}
        i = _len(self.nodes)
        self.nodes.append(None)
        self.memo[id(v)] = i
        self.keep.append(v)
        self.todo.append((i, v))
        return i

    def enclosing(self, v: Any, t: type) -> dict[str, Any] | None:
        """A set member's reference to an object an enclosing graph already holds (a child's link to its
        parent, whose set of children is being encoded): where it is there, as `back`. Encoded again
        in place, a tree linked both ways would be walked without end."""
        outer, up = self.outer, 1
        while outer is not None:
            i = outer.memo.get(id(v))
            if i is not None:
                return {"t": _qualified(t), "back": [up, i]}
            outer, up = outer.outer, up + 1
        return None

    def by_value(self, v: Any, t: type) -> dict[str, Any] | None:
        """Values equal by what they denote, written in place: enum members, classes, functions,
        modules, regexes and their matches, byte buffers, locks, loggers (by name: their handlers and
        the logging manager they reach are the process's, not the call's). Called for every object
        met, so the type's name is formatted only for those it describes."""
        value = _NOT_BY_VALUE
        logging = sys.modules.get("logging")
        if _isinstance(v, enum.Enum):
            value = v.name
        elif _isinstance(v, type) or (_isinstance(v, _FUNCTIONS) and _isinstance(getattr(v, "__self__", None),
                                                                               (types.ModuleType, type(None)))):
            value = _qualified(v)
        elif t is types.ModuleType:
            value = v.__name__
        elif t is re.Pattern:
            value = [repr(v.pattern), v.flags]
        elif t is re.Match:
            value = [list(v.span()), repr(v.groups()), repr(v.group(0)), repr(v.re.pattern)]
        elif t in (bytearray, memoryview):
            value = _b64(bytes(v)).decode()
        elif t in _LOCKS:
            value = None
        elif logging is not None and _isinstance(v, logging.Logger):  # one per name, process-wide
            value = v.name
        return None if value is _NOT_BY_VALUE else {"t": _qualified(t), "v": value}

    def node(self, v: Any) -> dict[str, Any]:
        t = _type(v)
        name = _qualified(t)
        if t in (list, tuple):
            return {"t": name, **self.items(v), **({"m": 1} if t is list else {})}
        if t is dict:
            return {"t": name, "m": 1, **self.pairs(v)}
        if t in (set, frozenset):
            return {"t": name, "v": self.members(v), **({"m": 1} if t is set else {})}
        array = self.array(v, t, name)
        if array is not None:
            return array
        if _isinstance(v, weakref.ref):  # a parent link: what it points at
            return {"t": name, "attrs": [["referent", self.child(v())]]}
        return self.instance(v, t, name)

    def items(self, seq: Any) -> dict[str, Any]:
        n = _len(seq)
        if n <= LONG:
            return {"v": [self.child(x) for x in seq]}
        at = sorted(_Random(sample_seed[0]).sample(range(n), LONG))
        return {"n": n, "seed": sample_seed[0], "v": [self.child(seq[j]) for j in at]}

    def pairs(self, d: Any) -> dict[str, Any]:
        n = _len(d)
        pairs = list(d.items())
        if n > LONG:
            pairs = [pairs[j] for j in sorted(_Random(sample_seed[0]).sample(range(n), LONG))]
        out: dict[str, Any] = {"v": [[self.child(k), self.child(x)] for k, x in pairs]}
        return out if n <= LONG else {"n": n, "seed": sample_seed[0], **out}

    def members(self, s: Any) -> list[dict[str, Any]]:
        """A set's items, each its own graph, in the order of their JSON: equal sets encode alike."""
        subs = []
        for x in s:
            sub = _Encoder(self.digest, self)
            sub.count = self.count
            subs.append(sub.run(x))
            self.count = sub.count
        return sorted(subs, key=_json_dumps)

    def array(self, v: Any, t: type, name: str) -> dict[str, Any] | None:
        np = sys.modules.get("numpy")
        if np is not None and t is np.ndarray:
            arr = np.ascontiguousarray(v)
            if arr.dtype.hasobject:
                return {"t": name, "m": 1, "object": True, "shape": list(arr.shape),
                        "v": [self.child(x) for x in arr.ravel().tolist()]}
            if arr.size > _SAMPLE_OVER:
                return {"m": 1, **_sketch_numpy(arr, name, self.digest)}
            return {"t": name, "m": 1, "dtype": arr.dtype.str, "shape": list(arr.shape), **_blob(arr.tobytes(), self.digest)}
        if np is not None and _isinstance(v, np.generic) and t.__module__ == "numpy":
            return {"t": name, "dtype": v.dtype.str, "shape": [], "b": _b64(v.tobytes()).decode()}
        torch = sys.modules.get("torch")
        if torch is not None and t is torch.Tensor:
            dtype = str(v.dtype).replace("torch.", "")
            if v.numel() > _SAMPLE_OVER:
                return {"m": 1, **_sketch_torch(v, name, dtype, self.digest)}
            cpu = v.detach().to("cpu")
            if cpu.dtype in (torch.bfloat16, torch.float16) or dtype.startswith("float8"):
                cpu = cpu.float()
            arr = cpu.contiguous().numpy()
            return {"t": name, "m": 1, "dtype": arr.dtype.str, "torch_dtype": dtype, "shape": list(arr.shape),
                    **_blob(arr.tobytes(), self.digest)}
        return None

    def instance(self, v: Any, t: type, name: str) -> dict[str, Any]:
        """An instance: its `__dict__` and slots where its class is written in Python (_plain), else
        what its reduce protocol gives; `unsupported` where it has neither."""
        flag = {"m": 1} if _mutable(v, t) else {}
        if _plain(t):
            attrs, contents = self.attrs(v, t), self.contents(v)
            if attrs or contents or _has_dict(v):
                return {"t": name, **flag, "attrs": attrs, **contents}
        try:
            rv = v.__reduce_ex__(4)
        except Exception as exc:
            attrs = self.attrs(v, t)
            if attrs:  # it refuses to be pickled (a socket, a file) but has state of its own
                return {"t": name, **flag, "attrs": attrs}
            return {"t": name, "unsupported": f"it cannot be pickled ({_type(exc).__name__}: {str(exc)[:200]})"}
        if _isinstance(rv, str):  # a global, by its name
            return {"t": name, "v": f"{getattr(v, '__module__', None) or t.__module__}.{rv}"}
        node: dict[str, Any] = {"t": name, **flag, "reduce": _qualified(rv[0]), "args": self.child(rv[1])}
        for field, part in zip(("state", "listitems", "dictitems"), rv[2:5], strict=False):
            if part is not None:
                node[field] = self.child(part if field == "state" else list(part))
        return node

    def attrs(self, v: Any, t: type) -> list[list[Any]]:
        """[name, child] for each attribute in `__dict__` and each slot of every class in the MRO."""
        found: dict[str, Any] = {}
        try:
            d = object.__getattribute__(v, "__dict__")
        except (AttributeError, TypeError):
            d = None
        if _type(d) is dict:
            found.update((str(k), x) for k, x in d.items())
        for cls in t.__mro__:
            slots = cls.__dict__.get("__slots__", ())
            for slot in (slots,) if _isinstance(slots, str) else slots:
                if slot in ("__dict__", "__weakref__"):
                    continue
                attr = f"_{cls.__name__.lstrip('_')}{slot}" if slot.startswith("__") and not slot.endswith("__") \
                    else slot
                desc = cls.__dict__.get(attr)
                if desc is None or not hasattr(desc, "__get__"):
                    continue
                try:
                    found[attr] = desc.__get__(v, t)
                except AttributeError:
                    found[attr] = _UNSET
        return [[k, found[k] if found[k] is _UNSET else self.child(found[k])] for k in sorted(found)]

    def contents(self, v: Any) -> dict[str, Any]:
        """The items of an instance of a list, tuple, set or dict subclass (a namedtuple, say)."""
        if _isinstance(v, (list, tuple)):
            return self.items(v)
        if _isinstance(v, dict):
            return self.pairs(v)
        if _isinstance(v, (set, frozenset)):
            return {"v": self.members(v)}
        return {}


def describe(value: Any, depth: int = 0) -> str:
    """A short description of a value for the LLM's prompt: type, dtype, shape, device, layout."""
    t = _type(value)
    if value is None or t in (bool, int, float, complex):
        return f"{t.__name__} (e.g. {value!r})"
    if t in (str, bytes):
        return f"{t.__name__} of length {_len(value)}"
    if t in (list, tuple):
        if not value or depth > 2:
            return f"{t.__name__} of {_len(value)}"
        kinds = {describe(v, depth + 1) for v in value[:64]}
        inner = kinds.pop() if _len(kinds) == 1 else "mixed items"
        return f"{t.__name__} of {_len(value)} x {inner}"
    if t is dict:
        keys = ", ".join(repr(k) for k in list(value)[:8])
        return f"dict of {_len(value)} ({keys}{', ...' if _len(value) > 8 else ''})"
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        parts = [f"{t.__module__.split('.')[0]}.{t.__name__}", str(dtype).replace("torch.", ""),
                 "shape (" + ", ".join(str(int(d)) for d in shape) + ("," if _len(shape) == 1 else "") + ")"]
        device = getattr(value, "device", None)
        if device is not None and str(device) != "cpu":
            parts.append(f"on {device}")
        contiguous = getattr(value, "is_contiguous", None)
        flags = getattr(value, "flags", None)
        if (callable(contiguous) and not contiguous()) or (flags is not None and not flags["C_CONTIGUOUS"]):
            parts.append("not contiguous")
        return " ".join(parts)
    return f"{t.__module__}.{t.__qualname__}"


