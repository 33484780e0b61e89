"""Guarded specialisation: a candidate that matches the reference on the inputs it was checked at but not
at their edge variants may, where the project allows it (`specialise = true` for the target in
redline.toml), be offered behind a guard: the target keeps its own code and dispatches to the candidate
only for inputs keyed the same as those verified (sandbox/redline_worker/keys.py: arrays and tensors
by type, shape, dtype, device and strides, numbers by value, a method's `self` by its attributes).

The guarded code is a new candidate and goes through the whole gate and timing again: at the verified
inputs it runs the specialised code, at every edge variant the original's.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from .sandbox.redline_worker import keys
from .target import Target, function_node, rename_def

KEY_FN = "_redline_input_key"


def guarded(target: Target, code: str, verified: list[str]) -> str:
    """The candidate `code` renamed to `_<name>_specialised`, and the target as written with a guard at the
    top of its body that calls it for the `verified` input keys. Raises ValueError where the target
    cannot be guarded (no verified inputs, a candidate without the function).

    For a method the guard keys `self` too (by its attributes, as the worker keys a checked call) and the
    specialised function takes it as its first argument: applied, the method stays in its class and the
    rest goes to module level (target.apply_candidate), where the evaluator ran it."""
    name = target.qualname.rsplit(".", 1)[-1]
    if not verified:
        raise ValueError("no verified inputs to guard")
    special = f"_{name}_specialised"  # recursive calls in it reach the guarded function: still right
    renamed = rename_def(code, name, special)
    original = textwrap.dedent(target.function_source)
    fn = function_node(original, name)
    values, named, call = _forwarding(fn.args)
    table = f"_{name.upper()}_VERIFIED"
    indent = " " * fn.body[0].col_offset
    guard = textwrap.indent(
        "# Specialised code for the inputs redline verified it on (redline.toml: specialise), the original\n"
        "# code for every other input.\n"
        f"if {KEY_FN}([{values}], {{{named}}}) in {table}:\n"
        f"    return {special}({call})\n", indent)
    lines = original.splitlines(keepends=True)
    first = fn.body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
        isinstance(first.value.value, str) and len(fn.body) > 1
    at = (first.end_lineno if docstring else first.lineno - 1) or 0
    wrapped = "".join([*lines[:at], guard, *lines[at:]])
    entries = "".join(f"    {key!r},\n" for key in sorted(set(verified)))
    key_fn = inspect.getsource(keys.input_key).replace("def input_key(", f"def {KEY_FN}(", 1)
    key_fn = key_fn.replace("  # type: ignore[no-untyped-def]", "")
    return f"{renamed.rstrip()}\n\n\n{table} = frozenset({{\n{entries}}})\n\n\n{key_fn.rstrip()}\n\n\n{wrapped}"


def _forwarding(args: ast.arguments) -> tuple[str, str, str]:
    """For a signature: the guard's positional values, its named values (both as keys.call_key binds
    them) and the call that forwards every argument to the specialised function."""
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    values = [*positional, *([f"*{args.vararg.arg}"] if args.vararg else [])]
    named = [f"{a.arg!r}: {a.arg}" for a in args.kwonlyargs] + ([f"**{args.kwarg.arg}"] if args.kwarg else [])
    call = [*values,
            *(f"{a.arg}={a.arg}" for a in args.kwonlyargs), *([f"**{args.kwarg.arg}"] if args.kwarg else [])]
    return ", ".join(values), ", ".join(named), ", ".join(call)
