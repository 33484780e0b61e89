"""What identifies one call's inputs for a guarded specialisation: each argument's type, and for arrays
and tensors their shape, dtype, device and strides; numbers, short strings and short tuples or lists of
numbers by value; other sequences by length; an object (a method's `self`, a model) by its attributes,
each keyed the same way one level deep (deeper objects by their type).

`input_key` is also written, as it is, into a guarded candidate's code (evaluator/specialise.py), so the
key the worker reports for a checked input and the one the guard computes at run time are the same
function's; it must stay self-contained (no imports, no helpers outside its body).
"""

from __future__ import annotations

import inspect
from typing import Any


def input_key(values, named):  # type: ignore[no-untyped-def]
    def leaf(v):  # type: ignore[no-untyped-def]
        t = type(v)
        if t in (bool, int, float, type(None)) or (t is str and len(v) <= 64):
            return repr(v)
        if t in (tuple, list) and len(v) <= 16 and all(type(x) in (bool, int, float, type(None)) for x in v):
            return repr(v)
        if t in (str, bytes, list, tuple, dict):
            return f"{t.__name__}[{len(v)}]"
        shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
        if shape is not None and dtype is not None:
            stride = getattr(v, "stride", None)
            strides = stride() if callable(stride) else getattr(v, "strides", ())
            return (f"{t.__name__}{tuple(int(n) for n in shape)} {dtype} {getattr(v, 'device', 'cpu')} "
                    f"strides={tuple(int(n) for n in strides)}")
        return None

    def one(v):  # type: ignore[no-untyped-def]
        key = leaf(v)
        if key is not None:
            return key
        state = getattr(v, "__dict__", None)
        if type(state) is dict and not isinstance(v, type):  # an object: its attributes, one level deep
            return f"{type(v).__name__}(" + ", ".join(
                f"{k}={leaf(a) or type(a).__name__}" for k, a in sorted(state.items())) + ")"
        return type(v).__name__
    return "; ".join([one(v) for v in values] + [f"{k}={one(v)}" for k, v in sorted(named.items())])


def call_key(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """`input_key` of a call of `fn`, its arguments bound to its parameters the way a guard sees them:
    positional parameters (defaults applied) and the extra positional ones in order, keyword-only
    parameters and extra keywords by name. '' where they do not bind."""
    try:
        sig = inspect.signature(fn)
        bound = sig.bind(*args, **kwargs)
    except (TypeError, ValueError):
        return ""
    bound.apply_defaults()
    values: list[Any] = []
    named: dict[str, Any] = {}
    for name, p in sig.parameters.items():
        v = bound.arguments[name]
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            values.append(v)
        elif p.kind is p.VAR_POSITIONAL:
            values.extend(v)
        elif p.kind is p.KEYWORD_ONLY:
            named[name] = v
        else:
            named.update(v)
    try:
        return input_key(values, named)
    except Exception:  # an argument whose shape or strides cannot be read
        return ""
