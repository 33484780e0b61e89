"""Edge inputs derived from one call's arguments: other shapes and layouts that the function should
handle as well as the one it is timed on.

Arrays and tensors change together by dimension size: every axis of every argument that has size d
becomes 1, an odd size just below d, or 0 (arguments that must agree, such as a bias whose length is
the matrix's last dimension, keep agreeing). A size that a tensor held by the call's object has (a
model's weight, for its forward; an instance passed as an argument) is the object's, which no
variant can change, so it stays as it is. Integer arrays may hold indices into the others (class
targets, token ids, gather positions): where a variant cuts an axis their values could index, values
past the new size wrap into it, so the indices stay valid; on CUDA, where an index out of range is a
device-side assert that no later call in the process survives, an axis they could index is not emptied. A layout variant passes the same
values as non-contiguous views. Sequences and strings become empty, one item long, or an odd length. Large arrays shrink their
other long axes, so that a variant costs at most about what the call does. The list is the same in
every process for the same arguments, so the reference and the candidate run the same variants.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .state import _type

MAX_VARIANTS = 10
LAYOUT = " as non-contiguous views"  # how a layout variant's label ends
_LARGE = 1 << 22  # elements of one array above which its other long axes shrink to _SHRUNK
_SHRUNK = 1024

Transform = Callable[[Any], Any]


def _arrays(values: list[Any]) -> list[Any]:
    np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    return [v for v in values if (np is not None and _type(v) is np.ndarray and v.ndim >= 1)
            or (torch is not None and _type(v) is torch.Tensor and v.dim() >= 1)]


def _odd_below(d: int) -> int:
    return d - 1 if d % 2 == 0 else d - 2


def _held(values: list[Any]) -> list[Any]:
    """The arrays and tensors that objects among `values` hold: a torch module's parameters and buffers,
    another object's array attributes (one level deep)."""
    torch = sys.modules.get("torch")
    held: list[Any] = []
    for v in values:
        if torch is not None and isinstance(v, torch.nn.Module):
            held += [*v.parameters(), *v.buffers()]
        elif hasattr(v, "__dict__") and not isinstance(v, type):
            held += _arrays(list(vars(v).values()))
    return held


def _new_shape(shape: Any, sizes: dict[int, int], shrink: bool, keep: frozenset[int] = frozenset()) -> list[int]:
    out = []
    for n in shape:
        n = int(n)
        out.append(sizes.get(n, _SHRUNK if shrink and n > _SHRUNK and n not in keep else n))
    return out


def _resize(value: Any, sizes: dict[int, int], shrink: bool, keep: frozenset[int], cut: dict[int, int]) -> Any:
    """`value` with every axis of size `d` in `sizes` cut to `sizes[d]` (a contiguous copy); an integer
    array's values kept inside the axes they may index (`cut`: every axis size the variant changes)."""
    out = value[tuple(slice(0, n) for n in _new_shape(value.shape, sizes, shrink, keep))]
    out = out.copy() if hasattr(out, "copy") and not hasattr(out, "clone") else out.clone()
    return _indices_inside(out, cut)


def _cut(arrays: list[Any], change: dict[int, int], large: bool, keep: frozenset[int]) -> dict[int, int]:
    """Every axis size a variant changes, to what: the varied size, and the long axes of a large call."""
    out = dict(change)
    for a in arrays:
        for n in a.shape:
            if large and int(n) > _SHRUNK and int(n) not in keep:
                out.setdefault(int(n), _SHRUNK)
    return out


def _on_cuda(value: Any) -> bool:
    return getattr(getattr(value, "device", None), "type", None) == "cuda"


def _integer_top(value: Any) -> int | None:
    """The largest value of a non-empty integer array (bool excluded); None for any other array."""
    torch = sys.modules.get("torch")
    if torch is not None and _type(value) is torch.Tensor:
        integer = not value.is_floating_point() and not value.is_complex() and value.dtype != torch.bool
        empty = value.numel() == 0
    else:
        integer, empty = value.dtype.kind in "iu", value.size == 0
    return int(value.max()) if integer and not empty else None


def _indices_inside(value: Any, cut: dict[int, int]) -> Any:
    """An integer array whose largest value is v can index any axis longer than v; where the variant cuts
    such an axis to t, the values at or above t wrap (v % t). Negative values (sentinels such as an
    ignore_index) stay as they are."""
    top = _integer_top(value)
    caps = [t for d, t in cut.items() if top is not None and d > top >= t >= 1]
    if not caps:
        return value
    cap = min(caps)
    wrapped = value % cap
    torch = sys.modules.get("torch")
    if torch is not None and _type(value) is torch.Tensor:
        return torch.where(value >= cap, wrapped, value)
    return sys.modules["numpy"].where(value >= cap, wrapped, value).astype(value.dtype)


def _strided(value: Any) -> Any:
    """The same values as a view that is not contiguous (every other element of a wider buffer)."""
    shape = tuple(int(n) for n in value.shape)
    wide = (*shape[:-1], 2 * shape[-1])
    if hasattr(value, "clone"):
        buf = sys.modules["torch"].empty(wide, dtype=value.dtype, device=value.device)
    else:
        buf = sys.modules["numpy"].empty(wide, dtype=value.dtype)
    buf[..., ::2] = value
    return buf[..., ::2]


def _shape_label(shapes: list[Any]) -> str:
    return ", ".join("(" + ", ".join(str(int(n)) for n in shape) + ("," if len(shape) == 1 else "") + ")"
                     for shape in shapes)


def derive(args: tuple[Any, ...], kwargs: dict[str, Any],
           fn: Any = None) -> tuple[str, list[tuple[str, Transform]]]:
    """The shapes of the call as given, and its variants: (label, function of one argument value).
    `fn`: the callable, whose bound object's tensors (a model's weights) fix the sizes they have."""
    values = [*args, *kwargs.values()]
    arrays = _arrays(values)
    out: list[tuple[str, Transform]] = []
    if arrays:
        keep = frozenset(int(n) for a in _held([*values, getattr(fn, "__self__", None)]) for n in a.shape)
        large = any(int(a.numel() if hasattr(a, "numel") else a.size) > _LARGE for a in arrays)
        sizes = sorted({int(n) for a in arrays for n in a.shape if int(n) > 1} - keep, reverse=True)
        # On CUDA an index into an emptied axis is a device-side assert, fatal to the process; elsewhere
        # the reference raises (outside its domain) or the integers were not indices.
        tops = [top for a in arrays if _on_cuda(a) and (top := _integer_top(a)) is not None]
        for d in sizes:
            for t in dict.fromkeys((_odd_below(d), 1, 0)):
                if t < 0 or t == d or (t == 0 and any(d > top for top in tops)):
                    continue  # no index is valid in an emptied axis
                change = {d: t}
                out.append((_shape_label([_new_shape(a.shape, change, large, keep) for a in arrays]),
                            _array_transform(arrays, change, large, keep)))
        if any(int(n) > 1 for a in arrays for n in a.shape):
            out.append((_shape_label([a.shape for a in arrays]) + LAYOUT, _layout_transform(arrays)))
    for i, v in enumerate(args):
        if _type(v) in (list, tuple, str, bytes) and len(v) > 1:
            for n, what in ((0, "empty"), (1, "one item"), (len(v) - 1 if len(v) % 2 == 0 else len(v) - 2, "odd")):
                if 0 <= n < len(v):
                    out.append((f"argument {i + 1} {what} (length {n})", _seq_transform(v, n)))
    return _shape_label([a.shape for a in arrays]) if arrays else "as given", out[:MAX_VARIANTS]


def _array_transform(arrays: list[Any], change: dict[int, int], large: bool, keep: frozenset[int]) -> Transform:
    ids = {id(a) for a in arrays}
    cut = _cut(arrays, change, large, keep)
    return lambda v: _resize(v, change, large, keep, cut) if id(v) in ids else v


def _layout_transform(arrays: list[Any]) -> Transform:
    ids = {id(a) for a in arrays}
    return lambda v: _strided(v) if id(v) in ids else v


def _seq_transform(target: Any, n: int) -> Transform:
    return lambda v: v[:n] if v is target else v


def apply(transform: Transform, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return tuple(transform(a) for a in args), {k: transform(v) for k, v in kwargs.items()}
