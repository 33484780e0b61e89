"""Comparing encoded outputs (sandbox/redline_worker/encoded.py) in the harness, with per-dtype tolerances."""

from __future__ import annotations

import base64
import hashlib
import math
from pathlib import Path
from typing import Any

from .sandbox.redline_worker.encoded import kind

# (rtol, atol): torch.testing.assert_close's defaults, except atol for half precisions. An eager
# bf16/fp16 chain rounds every intermediate, and a fused kernel that keeps fp32 intermediates differs
# from it by about one ulp of the intermediates near zero (3e-3 where eager gives -0.0); torch.testing's
# atol of 1e-5 would reject every fused rewrite, including torch.compile's.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (1.3e-6, 1e-5), "tf32": (1e-3, 1e-5),
    "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7),
    "float8_e4m3fn": (1.25e-1, 1e-2), "float8_e5m2": (2.5e-1, 1e-2),
}


class Mismatch(Exception):
    """Why two outputs differ, in words a reviewer understands."""


def _np() -> Any:
    import numpy

    return numpy


def _array(e: dict[str, Any]) -> Any:
    np = _np()
    if "file" in e:
        path = Path(e["file"])
        if not path.name.startswith("blob-") or not path.is_file():
            raise Mismatch(f"an output file {path.name!r} is missing")
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != e.get("sha256"):
            raise Mismatch("an output changed after the harness recorded it (work finishing outside the call)")
    else:
        data = base64.b64decode(e["b"])
    arr = np.frombuffer(data, dtype=np.dtype(e["dtype"]))
    return arr if "sampled" in e else arr.reshape(e["shape"])


def tolerance(dtype: str, rtol: float | None, atol: float | None) -> tuple[float, float]:
    base = TOLERANCES.get(dtype, (0.0, 0.0))
    return (base[0] if rtol is None else rtol, base[1] if atol is None else atol)


def compare(ref: Any, got: Any, where: str = "output", rtol: float | None = None, atol: float | None = None,
            oracle: Any = None) -> None:
    """Raise Mismatch if `got` is not `ref` within tolerance; types must match exactly. `oracle` is the
    reference computed in float32 (or None): a half-precision array that misses `ref` passes if it is
    at least as close to the oracle as `ref` itself is (see _against_oracle)."""
    if oracle is not None and (not isinstance(oracle, dict) or oracle.get("t") != ref["t"]):
        oracle = None
    if ref["t"] != got["t"]:
        raise Mismatch(f"{where} is a {got['t']}, the reference returns a {ref['t']}")
    t, k = ref["t"], kind(ref)
    if k != kind(got):
        raise Mismatch(f"{where}: a {t} encoded as {kind(got)}, the reference's as {k}")
    if k == "attrs":
        compare(ref["attrs"], got["attrs"], f"{where} attributes", rtol, atol)
        return
    if k == "opaque":
        raise Mismatch(f"{where}: values of type {t} cannot be compared; the target must return arrays, tensors "
                       "or plain Python values")
    if k == "items":
        if len(ref["v"]) != len(got["v"]):
            raise Mismatch(f"{where} has {len(got['v'])} items, the reference {len(ref['v'])}")
        parts = oracle["v"] if oracle is not None and len(oracle.get("v", ())) == len(ref["v"]) else [None] * len(ref["v"])
        for i, (a, b, o) in enumerate(zip(ref["v"], got["v"], parts, strict=True)):
            compare(a, b, f"{where}[{i}]", rtol, atol, o)
        return
    if k == "mapping":
        if len(ref["v"]) != len(got["v"]):
            raise Mismatch(f"{where} has {len(got['v'])} keys, the reference {len(ref['v'])}")
        # The float32 run builds the same dict in the same order: its value for a key stands beside it.
        pairs = oracle["v"] if oracle is not None and len(oracle.get("v", ())) == len(ref["v"]) else ()
        oracles = [o[1] if o[0] == ka else None for o, (ka, _) in zip(pairs, ref["v"], strict=True)] if pairs \
            else [None] * len(ref["v"])
        for (ka, va), (kb, vb), o in zip(ref["v"], got["v"], oracles, strict=True):
            compare(ka, kb, f"{where} key", 0.0, 0.0)
            compare(va, vb, f"{where}[{ka.get('v')!r}]", rtol, atol, o)
        return
    if t == "builtins.float":
        _floats(float(ref["v"]), float(got["v"]), where, *tolerance("float64", rtol, atol))
        return
    if t == "builtins.complex":
        for part, a, b in zip(("real", "imag"), ref["v"], got["v"], strict=True):
            _floats(float(a), float(b), f"{where}.{part}", *tolerance("float64", rtol, atol))
        return
    if k == "array":
        _arrays(ref, got, where, rtol, atol, oracle)
        return
    if k == "objects":
        if ref["shape"] != got.get("shape"):
            raise Mismatch(f"{where} has shape {got.get('shape')}, the reference {ref['shape']}")
        for i, (a, b) in enumerate(zip(ref["v"], got["v"], strict=True)):
            compare(a, b, f"{where}.flat[{i}]", rtol, atol)
        return
    if ref.get("v") != got.get("v"):
        raise Mismatch(f"{where} is {_short(got.get('v'))}, the reference {_short(ref.get('v'))}")


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) < 60 else s[:57] + "..."


def _floats(a: float, b: float, where: str, rtol: float, atol: float) -> None:
    if math.isnan(a) or math.isnan(b):
        if math.isnan(a) != math.isnan(b):
            raise Mismatch(f"{where} is {b}, the reference {a} (NaN positions differ)")
        return
    if math.isinf(a) or math.isinf(b):
        if a != b:
            raise Mismatch(f"{where} is {b}, the reference {a} (infinities differ)")
        return
    atol = _atol(atol, rtol, abs(a))
    if abs(a - b) > atol + rtol * abs(a):
        raise Mismatch(f"{where} is {b!r}, the reference {a!r} (beyond rtol={rtol:g}, atol={atol:g})")


def _arrays(ref: dict[str, Any], got: dict[str, Any], where: str, rtol: float | None, atol: float | None,
            oracle: dict[str, Any] | None = None) -> None:
    np = _np()
    rd, gd = ref.get("torch_dtype", ref["dtype"]), got.get("torch_dtype", got["dtype"])
    if rd != gd:
        raise Mismatch(f"{where} has dtype {gd}, the reference {rd}")
    if list(ref["shape"]) != list(got["shape"]):
        raise Mismatch(f"{where} has shape {tuple(got['shape'])}, the reference {tuple(ref['shape'])}")
    rs, gs = ref.get("sampled"), got.get("sampled")
    if (rs is None) != (gs is None) or (rs and gs and (rs["seed"], rs["n"]) != (gs["seed"], gs["n"])):
        raise Mismatch(f"{where}: the two sides were not sampled alike (an output of another size or layout)")
    if "b" not in ref and "file" not in ref:  # digests: equal or not
        if ref.get("sha256") != got.get("sha256") or rs != gs:
            raise Mismatch(f"{where}: its values changed")
        return
    a, b = _array(ref), _array(got)
    dtype = ref.get("torch_dtype") or a.dtype.name
    slack = 0.0
    try:
        _elements(a, b, ref, where + (" (sampled)" if rs else ""), rtol, atol)
    except Mismatch as first:
        o = _oracle_array(oracle, ref)
        if o is None:
            raise
        slack = _against_oracle(a, b, o, dtype, first, rtol, atol)
    if rs and gs:
        scale = float(np.max(np.abs(np.nan_to_num(a.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)))) \
            if a.size else 0.0
        try:
            _sampled(rs, gs, where, dtype, rtol, atol, scale)
        except Mismatch:
            os_ = oracle.get("sampled") if slack and oracle is not None else None
            if os_ is None:
                raise
            _sampled(os_, gs, where, dtype, rtol, atol, scale, slack)


# Outputs whose eager reference rounds every intermediate to a few bits of mantissa.
_HALF = ("bfloat16", "float16")
# The oracle describes the reference only if eager agrees with it nearly everywhere within a few
# times the dtype's tolerance (rounding, even with cancellation, not another function).
_ORACLE_AGREES, _ORACLE_WITHIN = 0.999, 8.0


def has_half(e: Any) -> bool:
    """Whether an encoded value holds a bf16 or fp16 array anywhere (the outputs an oracle can judge)."""
    if isinstance(e, dict):
        return e.get("torch_dtype") in _HALF or any(has_half(v) for v in e.values())
    if isinstance(e, list):
        return any(has_half(v) for v in e)
    return False


def _oracle_array(oracle: dict[str, Any] | None, ref: dict[str, Any]) -> Any:
    if oracle is None or ref.get("torch_dtype") not in _HALF or list(oracle.get("shape", ())) != list(ref["shape"]):
        return None
    if ("sampled" in oracle) != ("sampled" in ref) or ("b" not in oracle and "file" not in oracle):
        return None
    if "sampled" in ref and (oracle["sampled"]["seed"], oracle["sampled"]["n"]) != (ref["sampled"]["seed"],
                                                                                     ref["sampled"]["n"]):
        return None
    try:
        return _array(oracle)
    except Mismatch:
        return None


def _against_oracle(a: Any, b: Any, o: Any, dtype: str, first: Mismatch, rtol: float | None,
                    atol: float | None) -> float:
    """Accept `b` (the candidate) that misses `a` (eager, half precision) if it is as accurate as `a`:
    against `o`, the same function in float32, each element within the dtype's tolerance or within
    twice eager's own worst error (FlashAttention's test rule). A fused kernel that keeps float32
    intermediates differs from eager by eager's rounding, not by its own error. Returns the slack
    (twice eager's worst error) for the sampled sums; raises `first`, extended, otherwise."""
    np = _np()
    r, t = tolerance(dtype, rtol, atol)
    n_fin, scale = 0, 0.0
    for ac, bc, oc in _pieces(a, b, o):
        fin = np.isfinite(ac)
        if not np.array_equal(fin, np.isfinite(bc)) or not np.array_equal(fin, np.isfinite(oc)):
            raise first
        n_fin += int(np.count_nonzero(fin))
        scale = max(scale, _abs_max(oc, fin))
    if n_fin == 0:
        raise first
    t_eff = _atol(t, r, scale)
    agree, eager_worst = 0, 0.0
    for ac, oc in _pieces(a, o):
        fin = np.isfinite(oc)
        af, of = _finite64(ac, fin), _finite64(oc, fin)
        eager_err = np.abs(af - of)
        agree += int(np.count_nonzero(eager_err[fin] <= _ORACLE_WITHIN * (t_eff + r * np.abs(of[fin]))))
        eager_worst = max(eager_worst, float(eager_err.max(initial=0.0)))
    if agree < _ORACLE_AGREES * n_fin:
        raise first  # the float32 run is not the same computation (the function depends on its dtype)
    slack = 2.0 * eager_worst
    bad, worst = 0, (-math.inf, 0.0, 0.0)
    for bc, oc in _pieces(b, o):
        fin = np.isfinite(oc)
        bf, of = _finite64(bc, fin), _finite64(oc, fin)
        over = np.abs(bf - of) - np.maximum(t_eff + r * np.abs(of), slack)
        bad += int(np.count_nonzero(over > 0))
        i = int(np.argmax(over))
        if over[i] > worst[0]:
            worst = (float(over[i]), float(bf[i]), float(of[i]))
    if bad:
        raise Mismatch(f"{first}; against the float32 result {bad} elements are further off than eager {dtype} "
                       f"itself (worst {worst[1]!r} vs {worst[2]!r}, eager within {slack / 2:.3g})") from None
    return slack


def _atol(atol: float, rtol: float, scale: float) -> float:
    """The absolute tolerance for an array whose largest magnitude is `scale`: never more than rtol of
    that magnitude, so a reference of tiny values cannot pass on atol alone (an all-zero output)."""
    return min(atol, scale * rtol) if scale > 0 else atol


# Elements per pass over large arrays: temporaries this small reuse freed memory, where whole-array
# float64 temporaries fault in fresh pages for every step (seconds per comparison on some VMs).
_CHUNK = 1 << 16


def _pieces(*arrays: Any) -> Any:
    """The arrays, flattened, in aligned chunks of _CHUNK elements."""
    flat = [x.reshape(-1) for x in arrays]
    for s in range(0, flat[0].size, _CHUNK):
        yield [x[s:s + _CHUNK] for x in flat]


def _finite64(x: Any, fin: Any) -> Any:
    """`x` in float64 with its non-finite elements (where `fin` is False) set to 0."""
    np = _np()
    return np.where(fin, x, 0).astype(np.float64, copy=False)


def _abs_max(x: Any, fin: Any) -> float:
    return float(_np().abs(_finite64(x, fin)).max(initial=0.0))


def _elements(a: Any, b: Any, ref: dict[str, Any], where: str, rtol: float | None, atol: float | None) -> None:
    np = _np()
    rd = ref.get("torch_dtype", ref["dtype"])
    kind = a.dtype.kind
    if kind in "biuSUV" or kind == "M" or kind == "m":
        if not np.array_equal(a, b):
            bad = int(np.sum(a != b))
            raise Mismatch(f"{where}: {bad} of {a.size} elements differ (exact dtype {rd})")
        return
    name = ref.get("torch_dtype") or a.dtype.name
    r, t = tolerance(name, rtol, atol)
    nan_diff, inf_diff, n_fin, scale = 0, False, 0, 0.0
    for ac, bc in _pieces(a, b):
        an, bn = np.isnan(ac), np.isnan(bc)
        nan_diff += int(np.count_nonzero(an != bn))
        ai, bi = np.isinf(ac), np.isinf(bc)
        inf_diff = inf_diff or not np.array_equal(ai, bi) or not np.array_equal(ac[ai], bc[bi])
        fin = ~(an | ai)
        n_fin += int(np.count_nonzero(fin))
        scale = max(scale, _abs_max(ac, fin))
    if nan_diff:
        raise Mismatch(f"{where}: NaN positions differ ({nan_diff} elements)")
    if inf_diff:
        raise Mismatch(f"{where}: infinities differ")
    if n_fin == 0:
        return
    t_eff = _atol(t, r, scale)
    bad, worst = 0, (-math.inf, 0.0, 0.0)
    for ac, bc in _pieces(a, b):
        fin = np.isfinite(ac)
        af, bf = _finite64(ac, fin), _finite64(bc, fin)
        over = np.abs(af - bf) - (t_eff + r * np.abs(af))
        bad += int(np.count_nonzero(over > 0))
        i = int(np.argmax(over))
        if over[i] > worst[0]:
            worst = (float(over[i]), float(bf[i]), float(af[i]))
    if bad:
        got, want = worst[1], worst[2]
        err = abs(got - want)
        rel = err / abs(want) if want != 0 else float("inf")
        raise Mismatch(f"{where}: {bad} of {n_fin} elements beyond {name} tolerance "
                       f"(rtol={r:g}, atol={t_eff:g}); worst {got!r} vs {want!r}, "
                       f"abs err {err:.3g}, rel err {rel:.3g}")


def _sampled(rs: dict[str, Any], gs: dict[str, Any], where: str, dtype: str, rtol: float | None,
             atol: float | None, scale: float, slack: float = 0.0) -> None:
    """The whole-array checks of a sampled output: NaN and inf counts, and float64 sums within the
    elementwise tolerance summed over all elements (the sample itself is compared like an array)."""
    if rs["nan"] != gs["nan"]:
        raise Mismatch(f"{where}: {gs['nan']} NaNs, the reference {rs['nan']}")
    if rs["inf"] != gs["inf"]:
        raise Mismatch(f"{where}: {gs['inf']} infinities, the reference {rs['inf']}")
    r, t = tolerance(dtype, rtol, atol)
    t_eff = _atol(t, r, scale)
    allowed = r * rs["abs_sum"] + (t_eff + slack) * rs["n"]
    if abs(rs["sum"] - gs["sum"]) > allowed or abs(rs["abs_sum"] - gs["abs_sum"]) > allowed:
        raise Mismatch(f"{where}: the sum over all {rs['n']} elements is {gs['sum']:.6g}, the reference "
                       f"{rs['sum']:.6g} (beyond {dtype} tolerance summed over the elements)")
