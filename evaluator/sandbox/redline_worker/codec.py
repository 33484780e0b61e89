"""Values as the harness sees them: an exact, JSON-able description of each output (its type, dtype,
shape and bytes, never a pickle), large arrays by a seeded sample plus exact sums; and a short
description of an argument for prompts. encoded.py describes the format, which the harness's
comparison (compare.py) reads."""

from __future__ import annotations

import hashlib
import os
import sys
import types
from typing import Any

from .state import _b64, _isinstance, _json_dumps, _len, _type, sample_seed, state

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


def encode(value: Any, depth: int = 0, digest: bool = False) -> Any:
    """A JSON-able, exact description of a value: its exact type and its contents (with `digest`,
    arrays are described by their sha256 only: enough to tell whether inputs were changed)."""
    if depth > 50:
        raise ValueError("value nested too deeply")
    t = _type(value)
    name = f"{t.__module__}.{t.__qualname__}"
    if value is None or t in (bool, int, str):
        return {"t": name, "v": value}
    if t is float:
        return {"t": name, "v": repr(value)}
    if t is complex:
        return {"t": name, "v": [repr(value.real), repr(value.imag)]}
    if t is bytes:
        return {"t": name, "v": _b64(value).decode()}
    if t in (list, tuple):
        return {"t": name, "v": [encode(v, depth + 1, digest) for v in value]}
    if t is dict:
        return {"t": name, "v": [[encode(k, depth + 1, digest), encode(v, depth + 1, digest)] for k, v in value.items()]}
    if t in (set, frozenset):  # in a canonical order: two equal sets encode the same
        return {"t": name, "v": sorted((encode(v, depth + 1, digest) for v in value), key=_json_dumps)}
    np = sys.modules.get("numpy")
    if np is not None and t is np.ndarray:
        arr = np.ascontiguousarray(value)
        if arr.dtype.hasobject:
            return {"t": name, "object": True, "shape": list(arr.shape),
                    "v": [encode(v, depth + 1, digest) for v in arr.ravel().tolist()]}
        if arr.size > _SAMPLE_OVER:
            return _sketch_numpy(arr, name, digest)
        return {"t": name, "dtype": arr.dtype.str, "shape": list(arr.shape), **_blob(arr.tobytes(), digest)}
    if np is not None and _isinstance(value, np.generic) and t.__module__ == "numpy":
        return {"t": name, "dtype": value.dtype.str, "shape": [], "b": _b64(value.tobytes()).decode()}
    torch = sys.modules.get("torch")
    if torch is not None and t is torch.Tensor:
        dtype = str(value.dtype).replace("torch.", "")
        if value.numel() > _SAMPLE_OVER:
            return _sketch_torch(value, name, dtype, digest)
        cpu = value.detach().to("cpu")
        if cpu.dtype in (torch.bfloat16, torch.float16) or dtype.startswith("float8"):
            cpu = cpu.float()
        arr = cpu.contiguous().numpy()
        return {"t": name, "dtype": arr.dtype.str, "torch_dtype": dtype, "shape": list(arr.shape),
                **_blob(arr.tobytes(), digest)}
    state = getattr(value, "__dict__", None)
    if _type(state) is dict and not _isinstance(value, (types.ModuleType, types.FunctionType, type)):
        # A plain object: compared by its type and attributes.
        return {"t": name, "attrs": encode(dict(state), depth + 1, digest)}
    return {"t": name, "opaque": True}  # the harness can only compare its type


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


