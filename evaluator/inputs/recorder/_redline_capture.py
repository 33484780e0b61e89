"""The call recorder that `redline capture` puts into the program it runs. Standard library only.

Only the targets pay: each target's module is compiled with one statement added after the target's
definition that replaces it with a recording wrapper; nothing traces the program's other calls.
For each call the wrapper decides at once whether this call is one to keep (a reservoir per argument
signature, so rare signatures are kept next to common ones), and only a kept call is snapshotted:
its arguments pickled before the call, its outcome (return value, or exception type) after it.
Nothing live is held: a snapshot is bytes. Each process writes what it kept to the plan's output
folder about a second after it changes (a timer), and again however the process ends: at exit,
on SIGTERM or SIGHUP (where the program has not set its own handler), at `os._exit` (pre-fork
servers' workers end so). At most about a second of calls is at risk, from SIGKILL alone.
`redline capture` merges the processes' files into the store.

Run as a script (`python _redline_capture.py SCRIPT ARGS…`) it runs SCRIPT as `__main__`, so the
functions of a program's main script can be targets too.
"""

from __future__ import annotations

import ast
import atexit
import copy
import copyreg
import enum
import functools
import hashlib
import importlib
import importlib.machinery
import inspect
import io
import json
import marshal
import os
import pickle
import random
import re
import signal
import sys
import threading
import time
import types
from typing import Any, NoReturn

_random = random.random
# Every call of a target is examined (its signature counted, perhaps kept) until this many have been;
# after that one call in (1 + (examined - EXAMINE_ALL) // THIN), and each examined call counts for that
# many: examined calls then grow with the square root of all calls (about 23,000 of 720,000), and a
# hot target's cost stays small.
EXAMINE_ALL = 1024
THIN = 64
_COST_CUT = "its snapshots had cost its share of the program's time ({:.0%}; a longer run keeps more)"
FREE_FILLS = 8  # calls of a target kept whatever they cost; past them, snapshots keep to their share (_Cost)
_PLAN: dict[str, Any] = {}
_RECORDERS: dict[str, Recorder] = {}  # "real path::qualname" -> its recorder
_BY_FILE: dict[str, list[str]] = {}  # real path of a target file -> the qualnames it holds
FLUSH_S = 1.0  # a change is written within this long
_SIZED = (str, bytes, bytearray, list, tuple, dict, set, frozenset)
_SCALAR = (int, float, bool, complex, type(None))


_SIZED_TYPES = {t: True for t in _SIZED}
_SCALAR_TYPES = {t: True for t in _SCALAR if t is not bool}


def _part(value: Any) -> Any:
    """An argument's part of a call's signature, cheap to make and hash: its type, and a flag's value, a
    sized value's length class (powers of two) or an array's shape and dtype."""
    t = type(value)
    if t in _SCALAR_TYPES:
        return t
    if t in _SIZED_TYPES:
        return t, len(value).bit_length()
    if t is bool:
        return value  # a flag usually picks a path through the function
    if hasattr(t, "shape") and hasattr(t, "dtype"):
        try:
            return t, tuple(int(d) for d in value.shape), str(value.dtype)
        except (TypeError, ValueError):
            return t
    return t


def signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """(positional parts, (keyword, part) pairs): which arguments were given, and what they were like."""
    if kwargs:
        return tuple(map(_part, args)), tuple([(k, _part(v)) for k, v in kwargs.items()])
    return tuple(map(_part, args)), ()


def _render_part(part: Any) -> str:
    if isinstance(part, bool):
        return repr(part)
    if isinstance(part, type):
        return part.__name__ if part.__module__ == "builtins" else f"{part.__module__}.{part.__qualname__}"
    t = part[0]
    name = t.__name__ if t.__module__ == "builtins" else f"{t.__module__.split('.')[0]}.{t.__name__}"
    if len(part) == 3:
        return f"{name}{part[1]}:{part[2]}"
    bits = part[1]
    return f"{name}[{bits if bits < 2 else f'<{1 << bits}'}]"


def render(sig: tuple[tuple[Any, ...], tuple[Any, ...]]) -> str:
    """A signature as the manifest shows it, e.g. `str[<2048], int; multiline=True`."""
    pos, kw = sig
    text = ", ".join(_render_part(p) for p in pos)
    if kw:
        text += "; " + ", ".join(f"{k}={_render_part(v)}" for k, v in sorted(kw))
    return text


class _Cost:
    """What a target's snapshots may cost, against this process's time since the recorder started: each
    of N targets SHARE / N of it, so a target whose snapshots are dear does not starve the others.
    Replacing a kept call by a later one (the reservoir's uniform sample) stops while a target's
    snapshots have cost more than its share; keeping more calls past its first FREE_FILLS (other than a
    signature's first) waits while they have cost more than that plus its part of GRACE: a target
    whose `self` holds a large object graph would otherwise pay a full snapshot for each of hundreds of
    calls (Markdown's inline processor, 0.3 ms a snapshot, has 106 signatures)."""

    SHARE = 0.08
    GRACE = 0.1  # seconds on top for filling the stores (not for replacing kept calls): a short program keeps its calls
    started = time.perf_counter()

    @classmethod
    def over(cls, rec: Recorder, grace: float = 0.0) -> bool:
        n = max(1, len(_RECORDERS))
        return rec.spent > (cls.SHARE * (time.perf_counter() - cls.started) + grace) / n


class Recorder:
    """The kept calls of one target in this process, a reservoir of at most `limit` per signature."""

    def __init__(self, key: str, qualname: str, limit: int, budget: int) -> None:
        self.key, self.qualname, self.limit, self.budget = key, qualname, limit, budget
        self.module = ""
        # Reentrant: a signal handler that writes the store may run while this thread holds it.
        self.lock = threading.RLock()
        self.reset()

    def reset(self) -> None:
        self.seen: dict[Any, int] = {}  # signature -> calls
        self.kept: dict[Any, list[dict[str, Any]]] = {}
        self.bytes = 0
        self.filled = 0  # calls kept in a slot of their own (not replacing another)
        self.unrecordable: dict[str, int] = {}  # why a call could not be kept -> calls
        self.dropped: dict[str, int] = {}
        self.cut = 0  # calls not kept because this target's snapshots had cost their share (_Cost)
        self.countdown = 1  # calls until the next one examined
        self.examined = 0
        self.spent = 0.0  # seconds this process spent snapshotting this target's calls (see _Cost)

    def admit(self, sig: Any) -> int | None:
        """The slot a call of `sig` is kept in, or None (most calls, once the reservoir is full). No lock:
        under the GIL a race between threads costs at most a count, never a kept call's bytes."""
        self.examined += 1
        stride = 1 + max(0, self.examined - EXAMINE_ALL) // THIN
        self.countdown = stride
        n = self.seen.get(sig, 0) + stride
        self.seen[sig] = n
        _changed()
        if n <= self.limit:
            if self.bytes >= self.budget:
                self._drop("the --max-mb limit was reached")
                return None
            # The store takes `limit` calls across all signatures: past 4x that many kept, a signature
            # fills only its share (at least one call), so a target of many signatures is not
            # snapshotted `limit` times per signature.
            if self.filled >= 4 * self.limit and n > max(1, self.limit // len(self.seen)):
                return None
            # Past the first FREE_FILLS calls kept, keeping more than a signature's first call waits for
            # the cost share (rare signatures are what the store is for, while it has room for them).
            if self.filled >= min(self.limit, FREE_FILLS) and (n > stride or len(self.kept) >= self.limit) \
                    and _Cost.over(self, _Cost.GRACE):
                self.cut += 1
                return None
            return n - 1
        if _Cost.over(self):
            return None
        j = int(_random() * n)
        return j if j < self.limit else None

    def keep(self, sig: Any, slot: int, record: dict[str, Any]) -> None:
        size = len(record["call"]) + len(record["outcome"].get("value") or b"") + sum(map(len, record["streams"]))
        record["bytes"] = size
        if _REDACT:
            record["redacted"] = any(_REDACTED_BYTES in b for b in (record["call"], record["outcome"].get("value") or b"",
                                                                   *record["streams"]))
        with self.lock:
            bucket = self.kept.setdefault(sig, [])
            if slot < len(bucket):
                self.bytes -= bucket[slot]["bytes"]
                bucket[slot] = record
            else:
                bucket.append(record)
                self.filled += 1
            self.bytes += size
        _changed()

    def _drop(self, why: str) -> None:
        self.dropped[why] = self.dropped.get(why, 0) + 1

    def unrecordable_call(self, why: str) -> None:
        with self.lock:
            self.unrecordable[why] = self.unrecordable.get(why, 0) + 1
        _changed()

    def dump(self) -> dict[str, Any]:
        with self.lock:
            seen: dict[str, int] = {}
            kept: dict[str, list[dict[str, Any]]] = {}
            for sig, n in self.seen.items():
                text = render(sig)
                seen[text] = seen.get(text, 0) + n
                kept.setdefault(text, []).extend(self.kept.get(sig, []))
            dropped = dict(self.dropped)
            if self.cut and self.filled < self.limit:  # worth saying only where the store did not fill
                dropped[_COST_CUT.format(_Cost.SHARE / max(1, len(_RECORDERS)))] = self.cut
            return {"key": self.key, "qualname": self.qualname, "module": self.module, "seen": seen, "kept": kept,
                    "examined": self.examined, "unrecordable": dict(self.unrecordable), "dropped": dropped}


# Module-level objects of the targets' packages, by id: (module name, attribute). Built when first
# needed and again when more modules have been imported.
_SHARED: dict[int, tuple[str, str]] = {}
_SHARED_SEEN = [0]
_ATOMIC = (type(None), bool, int, float, complex, str, bytes, type, types.FunctionType, types.BuiltinFunctionType,
           types.ModuleType)


def _shared_objects() -> dict[int, tuple[str, str]]:
    """The objects that the targets' packages keep at module level (singletons: token types, sentinels,
    default instances, registries), so that a snapshot refers to them by name rather than copying
    them: code that tests them by identity (`x is tokens.Keyword`) behaves in the sandbox as in the
    program. Classes, functions and atoms are left to pickle, which handles them already."""
    if len(sys.modules) == _SHARED_SEEN[0]:
        return _SHARED
    mods = sys.modules.copy()
    _SHARED_SEEN[0] = len(mods)
    tops = _target_packages()
    for name, module in mods.items():
        if module is None or name.split(".")[0] not in tops:
            continue
        try:
            attrs = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in attrs:
            if not attr.startswith("__") and not isinstance(value, _ATOMIC):
                _SHARED.setdefault(id(value), (name, attr))
    return _SHARED


def _target_packages() -> set[str]:
    """The top-level packages of the targets' modules."""
    return {m.split(".")[0] for m in (r.module for r in _RECORDERS.values()) if m and m != "__main__"}


def _class_with_state(module: str, qualname: str, state: bytes) -> type:
    """A class pickled with the attributes the program gave it after its definition ran (_class_state).
    The worker's unpickler maps this name to its own restore; here it is the same, for completeness."""
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    for name, value in pickle.loads(state).items():
        if name not in vars(cls):
            setattr(cls, name, value)
    return cls


def _new_bare(cls: type) -> Any:
    """An instance made without its class's own `__new__` (which wants arguments pickle does not keep),
    as the nearest built-in base makes one; pickle then restores its state. The worker's unpickler maps
    this name to its own."""
    base: Any = next(b for b in cls.__mro__ if not b.__flags__ & _HEAPTYPE_FLAG)
    return base.__new__(cls)


_HEAPTYPE_FLAG = 1 << 9
_NEWOBJ = vars(copyreg)["__newobj__"]  # what the default reduce makes an instance with: cls.__new__(cls)


_A_CLASS, _A_MATCH, _NEW_WANTS_ARGUMENTS = 1, 2, 3
_SPECIAL: dict[type, int] = {}  # per type of object met by the snapshot pickler: what applies to it (0: nothing)


def _special(t: type) -> int:
    """What the snapshot pickler does with objects of type `t` (cached in _SPECIAL): a class (not an
    enum's, whose members are its state by design) may carry what the program set on it (_class_state);
    a regex match is made again; an instance whose default reduce makes it again with `t.__new__(t)`,
    while its own `__new__` requires arguments (jinja2's Template), is made by _new_bare."""
    special = 0
    if issubclass(t, type):
        special = 0 if issubclass(t, enum.EnumMeta) else _A_CLASS
    elif t is re.Match:
        special = _A_MATCH
    elif t.__flags__ & _HEAPTYPE_FLAG and t.__reduce_ex__ is object.__reduce_ex__ and t.__reduce__ is object.__reduce__ \
            and not hasattr(t, "__getnewargs_ex__") and not hasattr(t, "__getnewargs__"):
        new = inspect.getattr_static(t, "__new__", None)
        try:
            params = list(inspect.signature(new.__func__).parameters.values())[1:] \
                if isinstance(new, staticmethod) else []
        except (TypeError, ValueError):
            params = []
        if any(p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
            special = _NEW_WANTS_ARGUMENTS
    _SPECIAL[t] = special
    return special


def _special_reduce(obj: Any, special: int, tops: set[str], stating: set[type]) -> Any:
    """How the snapshot pickler writes `obj`, whose type _special marked, or None to write it as pickle
    would. `stating`: the classes whose carried state is being written (a reference to one of them from
    its own state goes by name)."""
    if special == _A_CLASS:
        if obj in stating or str(getattr(obj, "__module__", "")).split(".")[0] not in tops \
                or "<locals>" in obj.__qualname__:
            return None
        state = _class_state(obj)
        if state is None:
            return None
        stating.add(obj)
        return _class_with_state, (obj.__module__, obj.__qualname__, state)
    if special == _A_MATCH:  # made again by its pattern, at its place in the same string
        return obj.re.match, (obj.string, obj.start(), obj.endpos)
    rv = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)  # _NEW_WANTS_ARGUMENTS
    if type(rv) is tuple and len(rv) >= 2 and rv[0] is _NEWOBJ and len(rv[1]) == 1:
        return (_new_bare, rv[1], *rv[2:])
    return None


# Per class: what it carries (see _class_state), pickled, with the size of its namespace then.
_STATES: dict[type, tuple[int, bytes | None]] = {}
_NAME_BYTES, _STATE_BYTES = 1 << 16, 1 << 18
_FUNCTION_LIKE = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, staticmethod, classmethod,
                  property, type, types.ModuleType)


def _class_state(cls: type) -> bytes | None:
    """The data attributes of a class of the targets' packages as they are now, pickled: among them
    what the program set on the class after its definition ran, the caches a metaclass or a first
    instance builds (pygments' lexers compile their token tables into `cls._tokens` when the first
    lexer is made). pickle writes a class by name, and a fresh import in the sandbox would lack them;
    the sandbox sets only the names its fresh class lacks. Functions, descriptors, classes and modules
    are left out, and values that do not pickle or pickle larger than _NAME_BYTES (or than what is left
    of _STATE_BYTES, taken newest first: the names a program adds after the class statement come last
    in its namespace). Pickled once, and again only when the class gains or loses a name: a snapshot
    copies the bytes, walking nothing. None where there is nothing to carry."""
    size = len(vars(cls))
    known = _STATES.get(cls)
    if known is not None and known[0] == size:
        return known[1]
    _STATES[cls] = (size, None)  # while it is pickled: a value holding the class pickles it by name
    state, left = {}, _STATE_BYTES
    for name, value in reversed(list(vars(cls).items())):
        if name.startswith("__") or isinstance(value, _FUNCTION_LIKE):
            continue
        try:
            pickled = len(_dumps(value))
        except Exception:
            continue
        if pickled <= min(_NAME_BYTES, left):
            state[name], left = value, left - pickled
    data = None
    if state:
        try:
            data = _dumps(state)
        except Exception:
            data = None
    _STATES[cls] = (size, data)
    return data


def _shared_name(obj: Any, shared: dict[int, tuple[str, str]] | None = None) -> tuple[str, str] | None:
    """(module, attribute) where `obj` is one of _shared_objects (still there: ids are reused), else None."""
    where = (shared if shared is not None else _shared_objects()).get(id(obj))
    if where is None or getattr(sys.modules.get(where[0]), where[1], None) is not obj:
        return None
    return where


class _ByValue(Exception):
    """Plain pickle would write this object by a reference the sandbox cannot follow (a class of the
    program's main script where the target is elsewhere): write the snapshot with cloudpickle."""


def _picklers() -> dict[tuple[bool, bool], type]:
    """The snapshot picklers, by (cloudpickle, with iterator arguments). Plain pickle first (the C
    pickler, fast); cloudpickle where plain pickle cannot write the value: closures, lambdas, local
    classes, and classes of the program's main script, by value, as Ray and Dask do (redline lends it
    to the program on its path). On top, the targets' packages' module-level objects go by reference
    (see _shared_objects), a regex match as its pattern matched again, and where a target lives in the
    main script, that script's classes and functions by reference (the sandbox loads the script as
    the target's module, so `self`'s class is the one a candidate is put into)."""
    if _PICKLERS:
        return _PICKLERS
    try:
        import cloudpickle

        cloud: type | None = cloudpickle.Pickler
    except ImportError:
        cloud = None
    main_is_target = any(r.module == "__main__" for r in _RECORDERS.values())
    for by_value, base in ((False, pickle.Pickler), (True, cloud)):
        if base is None:
            continue

        class Snapshots(base):  # type: ignore[misc,valid-type]
            def __init__(self, file: Any, shared: dict[int, tuple[str, str]], streams: dict[int, int]) -> None:
                super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
                self.shared, self.streams = shared, streams
                self.tops, self.stating = _target_packages(), set[type]()

            def reducer_override(self, obj: Any, by_value: bool = by_value) -> Any:
                where = _shared_name(obj, self.shared)
                if where is not None:
                    return getattr, (_ModuleRef(where[0]), where[1])
                special = _SPECIAL.get(type(obj))  # called for every object: one lookup where nothing applies
                if special is None:
                    special = _special(type(obj))
                if special:
                    rv = _special_reduce(obj, special, self.tops, self.stating)
                    if rv is not None:
                        return rv
                if isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == "__main__" \
                        and "<locals>" not in obj.__qualname__:
                    if main_is_target:
                        return NotImplemented
                    if not by_value:
                        raise _ByValue
                return super().reducer_override(obj) if by_value else NotImplemented

        class Streaming(Snapshots):
            def persistent_id(self, obj: Any) -> Any:
                i = self.streams.get(id(obj))
                return ("stream", i) if i is not None else None

        _PICKLERS[(by_value, False)] = Snapshots
        _PICKLERS[(by_value, True)] = Streaming
    return _PICKLERS


_PICKLERS: dict[tuple[bool, bool], type] = {}


class _ModuleRef:
    """A module, pickled as the call that imports it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> Any:
        return importlib.import_module, (self.name,)


def _dumps(value: Any, streams: list[int] | None = None) -> bytes:
    """`value` pickled for the store; the objects whose ids are in `streams` (tapped iterator arguments)
    as persistent references ("stream", i) to the items kept for them."""
    ids = {s: i for i, s in enumerate(streams or ())}
    picklers = _picklers()
    shared = _shared_objects()
    try:
        buf = io.BytesIO()
        picklers[(False, bool(ids))](buf, shared, ids).dump(value)
        return buf.getvalue()
    except Exception:
        cloud = picklers.get((True, bool(ids)))
        if cloud is None:
            raise
        buf = io.BytesIO()
        cloud(buf, shared, ids).dump(value)
        return buf.getvalue()


REDACTED = "<redacted by redline>"
_REDACTED_BYTES = REDACTED.encode()


class _Unredactable(Exception):
    """A value with a secret name in it that cannot be copied to redact it."""


_REDACT: list[list[str]] = []  # each pattern of the plan's `redact`, as its words


def _words(name: str) -> list[str]:
    """`accessToken`, `access_token`, `X-Access-Token` -> ["access", "token"] (and `x` first)."""
    return [w for w in re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()) if w]


_SECRET_NAMES: dict[str, bool] = {}  # name -> whether it is secret, for the names met so far (bounded)
_SECRET_SCAN: list[re.Pattern[bytes]] = []  # set by install(): see _may_hold_secret


def _secret(name: Any) -> bool:
    """Whether a name (an argument's, a key's, an attribute's) is one whose value is not stored."""
    if not _REDACT or not isinstance(name, str):
        return False
    known = _SECRET_NAMES.get(name)
    if known is None:
        words = _words(name)
        known = any(words[i:i + len(p)] == p for p in _REDACT for i in range(len(words) - len(p) + 1))
        if len(_SECRET_NAMES) < 1 << 16:
            _SECRET_NAMES[name] = known
    return known


def _scan_for(patterns: list[list[str]]) -> re.Pattern[bytes]:
    """One search of pickled bytes for the longest word of each pattern spelled as _words can split it
    out of a name: an upper-case start of any length, then lower case (`token`, `Token`, `TOKEN`;
    `tOKen` splits elsewhere), followed by no lower-case letter or digit (`tokens` and `token2` are
    other words; `tokenType`, `token_id` and `TOKEN` are not). One alternation of literals is a fast
    search in C (a few ms for 2 MB)."""
    spellings = {word[:k].upper() + word[k:] for word in (max(p, key=len) for p in patterns)
                 for k in range(len(word) + 1)}
    return re.compile(b"(?:" + b"|".join(re.escape(w.encode()) for w in sorted(spellings)) + rb")(?![a-z0-9])")


def redact(patterns: list[str]) -> None:
    """Redact the values under these names (redline.toml's `redact`) from here on; [] stores them as
    they are."""
    _REDACT[:] = [_words(p) for p in patterns if _words(p)]
    _SECRET_SCAN[:] = [_scan_for(_REDACT)] if _REDACT else []
    _SECRET_NAMES.clear()


def _may_hold_secret(data: bytes) -> bool:
    """Whether pickled bytes may hold a secret name: the bytes hold every name a stored object's
    dicts, attributes and keyword arguments have, so where none of the patterns' words is in them,
    there is nothing to redact (a fast scan instead of a walk over the objects)."""
    return bool(_SECRET_SCAN) and _SECRET_SCAN[0].search(data) is not None


def _stored(value: Any, streams: list[int] | None = None, depth: int = 0) -> bytes:
    """`value` pickled for the store, with what its secret names hold redacted (see _redacted; `depth`
    where the walk starts); raises _Unredactable where a secret cannot be taken out."""
    data = _dumps(value, streams)
    if _REDACT and _may_hold_secret(data):  # rare: taken apart only where a secret's name may be
        hidden = _redacted(value, depth)
        if hidden is not value:
            data = _dumps(hidden, streams)
    return data


def _holds_secret(value: Any) -> bool:
    """Whether a value under a secret's name is replaced whole: a string, bytes or a number (what a
    password, a token or a key is), or a list or tuple of them. A dict or an object under such a name
    (a lexer's `token`, an OAuth token object) is looked into instead, its own secret names redacted."""
    scalar = (str, bytes, bytearray, int, float)
    return isinstance(value, scalar) or (type(value) in (list, tuple) and all(isinstance(x, scalar) for x in value))


def _redacted(value: Any, depth: int = 0) -> Any:
    """`value` with what its secret names hold replaced by REDACTED, in copies: the program's own objects
    are never changed. Dicts, lists, tuples and plain objects are looked into, a few levels deep; the
    targets' packages' module-level objects are not (a snapshot refers to them by name: see
    _shared_objects)."""
    if not _REDACT or depth > 4 or _shared_name(value) is not None:
        return value
    t = type(value)
    if t is dict:
        changed: dict[Any, Any] = {}
        for k, v in value.items():
            r = REDACTED if _secret(k) and _holds_secret(v) else _redacted(v, depth + 1)
            if r is not v:
                changed[k] = r
        return {**value, **changed} if changed else value
    if t is list or t is tuple:
        items = [_redacted(v, depth + 1) for v in value]
        return t(items) if any(items[i] is not v for i, v in enumerate(value)) else value
    state = getattr(value, "__dict__", None)
    if type(state) is dict and not isinstance(value, (type, types.ModuleType, types.FunctionType)):
        hidden = _redacted(state, depth)
        if hidden is not state:
            try:
                clone = copy.copy(value)  # its slots too, where it has them
                clone.__dict__.update(hidden)
                return clone
            except Exception as exc:  # the call is not kept: a secret is never stored
                raise _Unredactable(f"{t.__module__}.{t.__qualname__} ({type(exc).__name__})") from None
    return value


def _snapshot(rec: Recorder, args: tuple[Any, ...], kwargs: dict[str, Any], params: list[str],
              streams: list[int] | None = None) -> bytes | None:
    if _REDACT and any(_secret(params[i]) for i in range(min(len(args), len(params)))):
        args = tuple(REDACTED if i < len(params) and _secret(params[i]) and _holds_secret(a) else a
                     for i, a in enumerate(args))
    try:
        # The (args, kwargs) pair and the args tuple are the call's packing, not levels of its objects.
        return _stored((args, kwargs), streams, depth=-2)
    except _Unredactable as exc:
        rec.unrecordable_call(f"a secret in a {exc} could not be redacted")
        return None
    except Exception as exc:
        names = [(f"argument {params[i] if i < len(params) else i + 1}", a) for i, a in enumerate(args)]
        names += [(f"argument {k}", v) for k, v in kwargs.items()]
        for name, value in names:
            try:
                _dumps(value)
            except Exception as inner:
                t = type(value)
                rec.unrecordable_call(f"{name} ({t.__module__}.{t.__qualname__}) cannot be snapshotted: "
                                      f"{type(inner).__name__}: {str(inner)[:120]}")
                return None
        rec.unrecordable_call(f"the arguments cannot be snapshotted together: {type(exc).__name__}: {str(exc)[:120]}")
        return None


def _returned(rec: Recorder, value: Any) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        return {"kind": "return", "value": _stored(value)}
    except Exception:
        t = type(value)
        return {"kind": "return", "value": None, "unpicklable": f"{t.__module__}.{t.__qualname__}"}
    finally:
        rec.spent += time.perf_counter() - started


def _raised(exc: BaseException) -> dict[str, Any]:
    t = type(exc)
    return {"kind": "raise", "type": f"{t.__module__}.{t.__qualname__}", "message": str(exc)[:300]}


def recording(fn: Any, rec: Recorder) -> Any:
    """`fn` wrapped so that its kept calls are recorded; every call still runs `fn` itself, once."""
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    if inspect.isgeneratorfunction(fn):
        return _generator_wrapper(fn, rec, params)
    if inspect.iscoroutinefunction(fn):
        return _async_wrapper(fn, rec, params)
    return _plain_wrapper(fn, rec, params)


def _tapped(source: Any, items: list[Any]) -> Any:
    """A generator argument (or a built-in iterator: a map, a zip, a dict's items) passed on to the call
    as a generator over the same items, keeping what the call takes: the call is replayed on a fresh
    iterator over those items. Objects of the program's own iterator classes are never replaced (they
    have state and methods of their own): they are snapshotted as they are."""
    for item in source:
        items.append(item)
        yield item


_ITERATOR_MODULES = ("builtins", "itertools", "collections", "_collections")


def _is_stream(value: Any) -> bool:
    t = type(value)
    return t is types.GeneratorType or (t.__module__ in _ITERATOR_MODULES and hasattr(t, "__next__"))


class _Kept:
    """A call that is kept: its snapshot before the call, and how to record its outcome after."""

    def __init__(self, rec: Recorder, sig: Any, slot: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.rec, self.sig, self.slot = rec, sig, slot
        self.taps: dict[int, list[Any]] = {}  # id of a tapped argument -> the items the call took from it
        self.args = tuple(self._tap(a) for a in args)
        self.kwargs = {k: self._tap(v) for k, v in kwargs.items()}
        self.call: bytes | None = None

    def _tap(self, value: Any) -> Any:
        if not _is_stream(value):
            return value
        items: list[Any] = []
        tap = _tapped(value, items)
        self.taps[id(tap)] = items
        return tap

    def record(self, outcome: dict[str, Any]) -> None:
        assert self.call is not None
        t = time.perf_counter()
        try:
            streams = [_stored(items) for items in self.taps.values()]
        except Exception as exc:
            self.rec.unrecordable_call(f"the items of an iterator argument cannot be snapshotted: "
                                       f"{type(exc).__name__}: {str(exc)[:120]}")
            return
        self.rec.keep(self.sig, self.slot, {"call": self.call, "streams": streams, "outcome": outcome})
        self.rec.spent += time.perf_counter() - t


def _kept(rec: Recorder, args: tuple[Any, ...], kwargs: dict[str, Any], params: list[str]) -> _Kept | None:
    """The kept call (its iterator arguments tapped) where this call is to be kept, else None."""
    sig = signature(args, kwargs)
    slot = rec.admit(sig)
    if slot is None:
        return None
    t = time.perf_counter()
    kept = _Kept(rec, sig, slot, args, kwargs)
    kept.call = _snapshot(rec, kept.args, kept.kwargs, params, list(kept.taps))
    rec.spent += time.perf_counter() - t
    return kept if kept.call is not None else None


def _plain_wrapper(fn: Any, rec: Recorder, params: list[str]) -> Any:
    """A function's calls, through a wrapper with the function's own parameters (see _exact_wrapper):
    a call that is not examined costs a countdown and a plain call, no packing of *args and **kwargs."""
    def kept_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        kept = _kept(rec, args, kwargs, params)
        if kept is None:
            return fn(*args, **kwargs)
        try:
            result = fn(*kept.args, **kept.kwargs)
        except BaseException as exc:
            kept.record(_raised(exc))
            raise
        kept.record(_returned(rec, result))
        return result

    exact = _exact_wrapper(fn, rec, kept_call)
    if exact is not None:
        return exact

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rec.countdown -= 1
        return fn(*args, **kwargs) if rec.countdown > 0 else kept_call(args, kwargs)
    return wrapper


def _exact_wrapper(fn: Any, rec: Recorder, kept_call: Any) -> Any:
    """A wrapper declared with `fn`'s parameters (read from its code object, its defaults the same
    objects), which passes them on as they are and hands an examined call to `kept_call(args, kwargs)`
    with the defaults the caller left out taken out again; None where `fn` has no plain code object."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    names = code.co_varnames
    n_pos, n_only, n_kw = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    pos, kw_only = list(names[:n_pos]), list(names[n_pos:n_pos + n_kw])
    i = n_pos + n_kw
    star = names[i] if code.co_flags & inspect.CO_VARARGS else None
    i += bool(star)
    stars = names[i] if code.co_flags & inspect.CO_VARKEYWORDS else None
    declared = [*pos[:n_only], *(["/"] if n_only else []), *pos[n_only:],
                *([f"*{star}"] if star else (["*"] if kw_only else [])), *kw_only, *([f"**{stars}"] if stars else [])]
    passed = [*pos, *([f"*{star}"] if star else []), *(f"{k}={k}" for k in kw_only), *([f"**{stars}"] if stars else [])]
    args = "(" + "".join(f"{a}, " for a in pos) + (f"*{star}" if star else "") + ")"
    kwargs = "{" + "".join(f"{k!r}: {k}, " for k in kw_only) + (f"**{stars}" if stars else "") + "}"
    source = (f"def wrapper({', '.join(declared)}):\n"
              f"    __redline_rec.countdown -= 1\n"
              f"    if __redline_rec.countdown > 0:\n"
              f"        return __redline_fn({', '.join(passed)})\n"
              f"    return __redline_kept(*__redline_trim({args}, {kwargs}))\n")
    scope = {"__redline_rec": rec, "__redline_fn": fn, "__redline_kept": kept_call,
             "__redline_trim": functools.partial(_as_called, fn, n_pos, bool(star))}
    try:
        exec(compile(source, f"<redline wrapper of {fn.__qualname__}>", "exec"), scope)
    except SyntaxError:
        return None
    wrapper: Any = functools.wraps(fn)(scope["wrapper"])
    wrapper.__defaults__, wrapper.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
    return wrapper


def _as_called(fn: Any, n_pos: int, star: bool, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """(args, kwargs) with the trailing defaults a caller could have left out left out: the kept call is
    the call as it was made, defaults that are sentinels (`is MISSING`) included by the function's own."""
    defaults = fn.__defaults__ or ()
    if not star or len(args) == n_pos:
        keep = len(args)
        first_default = n_pos - len(defaults)
        while keep > first_default and keep <= n_pos and args[keep - 1] is defaults[keep - 1 - first_default]:
            keep -= 1
        args = args[:keep]
    kwdefaults = fn.__kwdefaults__ or {}
    if kwdefaults:
        kwargs = {k: v for k, v in kwargs.items() if k not in kwdefaults or v is not kwdefaults[k]}
    return args, kwargs


class _Yielded:
    """What a kept generator call yields, each item pickled as it is yielded, into one stream with one
    memo (an item that refers to an earlier one refers to it in the stream too): the caller may change
    an item once it has it (sqlparse regroups each statement it is given), and what the reference is
    checked against is the item as the generator made it. Where an item cannot be pickled this way, or
    the stream may hold a secret, the list is pickled at the end as before (see _returned)."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.items: list[Any] = []
        self.buf: io.BytesIO | None = io.BytesIO()
        self.pickler = _picklers()[(False, False)](self.buf, _shared_objects(), {})

    def add(self, item: Any) -> None:
        self.items.append(item)
        if self.buf is None:
            return
        started = time.perf_counter()
        try:
            self.pickler.dump(item)
        except Exception:
            self.buf = None
        finally:
            self.rec.spent += time.perf_counter() - started

    def outcome(self) -> dict[str, Any]:
        data = self.buf.getvalue() if self.buf is not None else None
        if data is None or (_REDACT and _may_hold_secret(data)):
            return _returned(self.rec, self.items)
        return {"kind": "return", "value": data, "yielded": len(self.items)}


def _generator_wrapper(fn: Any, rec: Recorder, params: list[str]) -> Any:
    """A generator function's calls: the outcome is the list of what it yielded (see _Yielded), kept only
    when the caller consumed it to its end."""
    @functools.wraps(fn)
    def gen_wrapper(*args: Any, **kwargs: Any) -> Any:
        rec.countdown -= 1
        kept = _kept(rec, args, kwargs, params) if rec.countdown <= 0 else None
        if kept is None:
            return (yield from fn(*args, **kwargs))
        yielded = _Yielded(rec)
        try:
            for item in fn(*kept.args, **kept.kwargs):
                yielded.add(item)
                yield item
        except GeneratorExit:
            rec.unrecordable_call("the generator was not consumed to its end")
            raise
        except BaseException as exc:
            kept.record(_raised(exc))
            raise
        kept.record(yielded.outcome())
    return gen_wrapper


def _async_wrapper(fn: Any, rec: Recorder, params: list[str]) -> Any:
    """A coroutine function's calls: the outcome is what the awaited call returns."""
    @functools.wraps(fn)
    async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
        rec.countdown -= 1
        kept = _kept(rec, args, kwargs, params) if rec.countdown <= 0 else None
        if kept is None:
            return await fn(*args, **kwargs)
        try:
            result = await fn(*kept.args, **kept.kwargs)
        except BaseException as exc:
            kept.record(_raised(exc))
            raise
        kept.record(_returned(rec, result))
        return result
    return async_wrapper


def mangled(owner: Any, name: str) -> str:
    """A class's private name as Python stores it (`__apply` in class `_Inline` is `_Inline__apply`)."""
    if isinstance(owner, type) and name.startswith("__") and not name.endswith("__"):
        return f"_{owner.__name__.lstrip('_')}{name}"
    return name


def wrap(namespace: dict[str, Any], qualname: str, key: str) -> None:
    """Replace `qualname` (found from the module's globals) with its recording wrapper."""
    rec = _RECORDERS.get(key)
    if rec is None:
        return
    rec.module = str(namespace.get("__name__", ""))
    parts = qualname.split(".")
    owner: Any = None
    obj: Any = namespace.get(parts[0])
    for part in parts[1:]:
        owner, obj = obj, inspect.getattr_static(obj, mangled(obj, part), None)
    if owner is None:
        if isinstance(obj, types.FunctionType):
            namespace[parts[0]] = recording(obj, rec)
        else:
            rec.unrecordable_call(f"{qualname} is not a plain function here ({type(obj).__name__})")
        return
    name = mangled(owner, parts[-1])
    if isinstance(obj, staticmethod):
        setattr(owner, name, staticmethod(recording(obj.__func__, rec)))
    elif isinstance(obj, types.FunctionType) and isinstance(owner, type):
        wrapper = recording(obj, rec)
        setattr(owner, name, wrapper)
        for alias, value in list(vars(owner).items()):  # `_parse = _parseNoCache` in the class body
            if value is obj:
                setattr(owner, alias, wrapper)
    else:
        rec.unrecordable_call(f"{qualname} is a {type(obj).__name__}, which capture does not record")


def transform(source: bytes, path: str, qualnames: list[str]) -> ast.Module:
    """The module's code with `wrap(...)` called right after each target's top-level definition."""
    tree = ast.parse(source, path)
    body: list[ast.stmt] = []
    for node in tree.body:
        body.append(node)
        name = getattr(node, "name", None)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for qual in qualnames:
            if qual.split(".")[0] != name:
                continue
            call = ast.parse(f"__import__('_redline_capture').wrap(globals(), {qual!r}, {os.path.realpath(path) + '::' + qual!r})").body[0]
            for n in ast.walk(call):
                n.lineno = n.end_lineno = node.end_lineno or node.lineno  # type: ignore[attr-defined]
                n.col_offset = n.end_col_offset = 0  # type: ignore[attr-defined]
            body.append(call)
    tree.body = body
    return tree


def transformed_code(source: bytes, path: str, qualnames: list[str]) -> types.CodeType:
    """The module's code with its targets wrapped (see transform), compiled once per source, targets,
    interpreter and recorder: kept in the plan's `cache` folder (a large module takes ~100 ms to parse
    and compile, a cached one ~1 ms to read)."""
    folder = _PLAN.get("cache")
    key = hashlib.sha256(b"\0".join([source, path.encode(), "\n".join(qualnames).encode(), sys.version.encode(),
                                       _RECORDER_STAMP])).hexdigest()
    cached = os.path.join(folder, key + ".code") if folder else None
    if cached is not None:
        try:
            with open(cached, "rb") as fh:
                code: types.CodeType = marshal.loads(fh.read())
            os.utime(cached)  # in use: the capture keeps the most recently used (see _prune_code_cache)
            return code
        except (OSError, ValueError, EOFError, TypeError):
            pass
    code = compile(transform(source, path, qualnames), path, "exec", dont_inherit=True)
    if cached is not None:
        try:
            fd = os.open(f"{cached}.{os.getpid()}.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(marshal.dumps(code))
            os.replace(f"{cached}.{os.getpid()}.tmp", cached)
        except OSError:
            pass
    return code


_stat = os.stat(__file__)
_RECORDER_STAMP = f"{_stat.st_mtime_ns}:{_stat.st_size}".encode()  # a changed recorder compiles anew


class _Loader(importlib.machinery.SourceFileLoader):
    """Loads a target's module from its source with the wrapping statements (see transformed_code)."""

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        return transformed_code(self.get_data(path), path, _BY_FILE[os.path.realpath(path)])


class _Finder:  # a meta path finder (importlib.abc would import importlib.resources and pathlib)
    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is None:
                continue
            if spec.origin and os.path.realpath(spec.origin) in _BY_FILE and \
                    isinstance(spec.loader, importlib.machinery.SourceFileLoader):
                spec.loader = _Loader(name, spec.origin)
            return spec
        return None


class _Flush:
    """This process's store file and when it is next written."""

    lock = threading.RLock()
    timer: threading.Timer | None = None
    name = ""


def _changed() -> None:
    """Write this process's store within FLUSH_S of a change (one timer at a time; it is cheap to check,
    and never waits for a write under way: the next change schedules the next one)."""
    if _Flush.timer is None and _Flush.lock.acquire(blocking=False):
        try:
            if _Flush.timer is None:
                timer = threading.Timer(FLUSH_S, _write)
                timer.daemon = True
                _Flush.timer = timer
                timer.start()
        finally:
            _Flush.lock.release()


def _write() -> None:
    """Write what this process kept so far, replacing its earlier file in one step (a reader never sees
    half a file)."""
    with _Flush.lock:
        _Flush.timer = None
        recs = [r.dump() for r in _RECORDERS.values() if r.seen or r.unrecordable]
        if not recs:
            return
        if not _Flush.name:
            _Flush.name = f"process-{os.getpid()}-{random.getrandbits(32):08x}.pkl"
        out = os.path.join(_PLAN["out"], _Flush.name)
        fd = os.open(out + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            pickle.dump({"pid": os.getpid(), "targets": recs, "executable": sys.executable,
                         "version": sys.version.split()[0]}, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(out + ".tmp", out)
        # The counts alone, for a progress report that should not read the snapshots each second.
        counts = out[:-len(".pkl")] + ".counts"
        fd = os.open(counts + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"seen": sum(sum(r["seen"].values()) for r in recs),
                       "kept": sum(len(b) for r in recs for b in r["kept"].values())}, fh)
        os.replace(counts + ".tmp", counts)


def _forget() -> None:
    """In a forked child: its calls are its own (the parent writes what it kept), in a file of its own."""
    _Flush.lock = threading.RLock()
    _Flush.timer = None
    _Flush.name = ""
    _Cost.started = time.perf_counter()
    for rec in _RECORDERS.values():
        rec.lock = threading.RLock()
        rec.reset()


def _on_signal(signum: int, frame: Any) -> None:
    """SIGTERM or SIGHUP where the program keeps the default: write, then end as the default would."""
    try:
        _write()
    finally:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


_real_exit = os._exit


def _exit(status: int) -> NoReturn:
    """os._exit skips atexit: write first (a pre-fork server's worker ends this way)."""
    try:
        _write()
    except BaseException:
        pass
    _real_exit(status)


def install(plan_path: str) -> None:
    """Read the capture plan and put the finder in front of every import."""
    if _PLAN:
        return
    with open(plan_path) as fh:
        _PLAN.update(json.load(fh))
    for t in _PLAN["targets"]:
        real = os.path.realpath(t["file"])
        key = real + "::" + t["qualname"]
        _RECORDERS[key] = Recorder(key, t["qualname"], int(_PLAN["calls"]), int(_PLAN["max_bytes"]))
        _BY_FILE.setdefault(real, []).append(t["qualname"])
    redact(_PLAN.get("redact", []))
    sys.meta_path.insert(0, _Finder())
    atexit.register(_write)
    os.register_at_fork(after_in_child=_forget)
    os._exit = _exit
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) is signal.SIG_DFL:
                signal.signal(signum, _on_signal)


def run_script(argv: list[str]) -> None:
    """Run argv[0] as `__main__` with argv as its sys.argv, its targets wrapped like an imported module's."""
    path = argv[0]
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    with open(path, "rb") as fh:
        source = fh.read()
    quals = _BY_FILE.get(os.path.realpath(path), [])
    code = transformed_code(source, path, quals) if quals else compile(source, path, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __builtins__=__builtins__)
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


if __name__ == "__main__":
    sys.modules["_redline_capture"].run_script(sys.argv[1:])
