"""Where a value's memory is: the array buffers inside it, the CUDA storages behind its tensors, and
whether two values share memory (aliasing inputs, reusing an earlier call's output)."""

from __future__ import annotations

import sys
from typing import Any

from .state import _isinstance, _type


def buffers(value: Any) -> list[Any]:
    """Array-like buffers inside a value (to detect aliasing)."""
    out: list[Any] = []
    np = sys.modules.get("numpy")
    torch = sys.modules.get("torch")
    stack = [value]
    while stack:
        v = stack.pop()
        t = _type(v)
        if t in (list, tuple):
            stack.extend(v)
        elif t is dict:
            stack.extend(v.values())
        elif (np is not None and t is np.ndarray) or (torch is not None and t is torch.Tensor) or _isinstance(v, (bytearray, memoryview)):
            out.append(v)
    return out


def tensor_storages(value: Any) -> list[Any]:
    """The distinct storages (by device and address) behind the torch tensors in `value`."""
    torch = sys.modules.get("torch")
    out: dict[tuple[str, int], Any] = {}
    if torch is not None:
        for t in buffers(value):
            if _type(t) is torch.Tensor and t.numel():
                st = t.untyped_storage()
                out.setdefault((str(t.device), st.data_ptr()), st)
    return list(out.values())


def flip_bits(storage: Any) -> bool:
    """Invert every bit of `storage` in place (on the current stream; twice restores it exactly).
    False where torch refuses the write (an inference-mode tensor's storage, say): that storage is
    then simply not held back."""
    torch = sys.modules["torch"]
    try:
        torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage).bitwise_not_()
    except Exception:
        return False
    return True


def shares(a: Any, b: Any) -> bool:
    np = sys.modules.get("numpy")
    torch = sys.modules.get("torch")
    if torch is not None and _isinstance(a, torch.Tensor) and _isinstance(b, torch.Tensor):
        if a.device != b.device or a.numel() == 0 or b.numel() == 0:
            return False
        sa = a.untyped_storage()
        sb = b.untyped_storage()
        return bool(sa.data_ptr() == sb.data_ptr())
    if np is not None and _isinstance(a, np.ndarray) and _isinstance(b, np.ndarray):
        return bool(np.shares_memory(a, b))
    return a is b


def aliases(out: Any, args: tuple[Any, ...]) -> bool:
    ins = buffers(list(args))
    return any(shares(o, i) for o in buffers(out) for i in ins)




def nbytes(value: Any) -> int:
    total = 0
    for b in buffers(value):
        nb = getattr(b, "nbytes", None)
        total += int(nb) if nb is not None else 0
    return total


