"""Comparing encoded outputs (sandbox/redline_worker/encoded.py) in the harness, with per-dtype tolerances."""

from __future__ import annotations

import base64
import hashlib
import json
import math
from pathlib import Path
from typing import Any

from .sandbox.redline_worker.encoded import SETS, is_graph, kind

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
    """Raise Mismatch if `got` is not `ref` within tolerance: the same exact types, the same state and
    the same sharing of mutable objects, node by node (encoded.py); Unsupported where either holds a
    value redline cannot describe. `oracle` is the reference computed in float32 (or None): a
    half-precision array that misses `ref` passes if it is at least as close to the oracle as `ref`
    itself is (see _against_oracle)."""
    _Walk(ref, got, oracle, rtol, atol).run(where)


class Unsupported(Exception):
    """A value redline cannot compare (encoded.py's `unsupported`): redline's own limit, never a
    difference between the two sides."""


# Where a node is: the root's name, or (where its parent is, the step to it). Built as the walk goes
# and written out only for a message, so a path 10,000 steps deep costs one tuple per step.
_Path = Any
# One pair of children to compare: the reference's, the candidate's, where they are, the oracle's
# (or None), and whether the comparison is exact (dict keys).
_Task = tuple[Any, Any, _Path, Any, bool]


class _Where:
    """A path written out only if a message needs it (most atoms compare equal)."""

    def __init__(self, path: _Path) -> None:
        self.path = path

    def __str__(self) -> str:
        return _text(self.path)


def _at(path: _Path, step: str) -> _Path:
    return (path, step)


def _text(path: _Path, keep: int = 6) -> str:
    """A path in words; a long one keeps its first and last `keep` steps."""
    steps: list[str] = []
    while type(path) is tuple:
        path, step = path
        steps.append(step)
    steps.reverse()
    if len(steps) > 2 * keep:
        steps = [*steps[:keep], f"…({len(steps) - 2 * keep} steps)…", *steps[-keep:]]
    return str(path) + "".join(steps)


class _Walk:
    """The two graphs side by side, without recursion. A mutable object of the reference is paired with
    the candidate's at its first meeting; meeting either again with another partner is a difference in
    sharing (two names for one list where the reference has two lists, or the opposite)."""

    def __init__(self, ref: Any, got: Any, oracle: Any, rtol: float | None, atol: float | None) -> None:
        if not is_graph(ref):
            raise Mismatch("the reference's value is not well-formed")
        if not is_graph(got):
            raise Mismatch("the value is not well-formed")
        self.r, self.g = ref["nodes"], got["nodes"]
        self.o = oracle["nodes"] if is_graph(oracle) and oracle["nodes"][0].get("t") == ref["nodes"][0].get("t") \
            else None
        self.rtol, self.atol = rtol, atol
        self.paired_r: dict[int, tuple[int, _Path]] = {}
        self.paired_g: dict[int, tuple[int, _Path]] = {}
        self.seen: set[tuple[int, int]] = set()

    def run(self, where: str) -> None:
        stack: list[_Task] = [(0, 0, where, 0 if self.o is not None else None, False)]
        while stack:
            rc, gc, path, oc, exact = stack.pop()
            if self._met(rc, gc, path):
                continue
            r, g = _node(self.r, rc, path), _node(self.g, gc, path)
            o = _node(self.o, oc, path) if self.o is not None and oc is not None else None
            more = self._pair(r, g, o, path, exact)
            stack.extend(reversed(more))  # children in order: the first difference found is the first one

    def _met(self, rc: Any, gc: Any, path: _Path) -> bool:
        """Whether this pair was compared before (or is being compared: a cycle); raises where the
        sharing of a mutable object differs."""
        if type(rc) is not int or type(gc) is not int:
            return False
        if not (0 <= rc < len(self.r)) or type(self.r[rc]) is not dict or not self.r[rc].get("m"):
            if (rc, gc) in self.seen:
                return True
            self.seen.add((rc, gc))
            return False
        before_r, before_g = self.paired_r.get(rc), self.paired_g.get(gc)
        if before_r is not None:
            if before_r[0] != gc:
                raise Mismatch(f"{_text(path)} is not the object at {_text(before_r[1])}, as it is in the reference "
                               "(the reference shares one object there, the candidate has two)")
            return True
        if before_g is not None:
            raise Mismatch(f"{_text(path)} is the object at {_text(before_g[1])}, where the reference has two "
                           "distinct objects")
        self.paired_r[rc] = (gc, path)
        self.paired_g[gc] = (rc, path)
        return False

    def _pair(self, r: dict[str, Any], g: dict[str, Any], o: dict[str, Any] | None, path: _Path,
              exact: bool) -> list[_Task]:
        """Compare one node of each side; returns the pairs of children to compare next."""
        for side, n in (("the reference's", r), ("the candidate's", g)):
            if "unsupported" in n:
                raise Unsupported(f"{_text(path)}: {side} value of type {n['t']} cannot be compared: {n['unsupported']}")
        t, k = r["t"], kind(r)
        if g["t"] != t:
            raise Mismatch(f"{_text(path)} is a {g['t']}, the reference's a {t}")
        if kind(g) != k:
            raise Mismatch(f"{_text(path)}: a {t} encoded as {kind(g)}, the reference's as {k}")
        rtol, atol = (0.0, 0.0) if exact else (self.rtol, self.atol)
        if o is not None and o.get("t") != t:
            o = None
        if k == "atom":
            _atoms(r, g, _Where(path), rtol, atol)
            return []
        if k == "back":
            if g["back"] != r["back"]:
                raise Mismatch(f"{_text(path)} refers to another object than the reference's does (graphs up, index: "
                               f"{g['back']}, the reference's {r['back']})")
            return []
        if k == "array":
            _arrays(r, g, _text(path), rtol, atol, o)
            return []
        if k == "objects":
            if r["shape"] != g.get("shape"):
                raise Mismatch(f"{_text(path)} has shape {g.get('shape')}, the reference's {r['shape']}")
            return _zipped(r["v"], g["v"], None, [_at(path, f".flat[{i}]") for i in range(len(r["v"]))], exact, path)
        if k == "reduce":
            return self._reduced(r, g, o, path, exact)
        more: list[_Task] = []
        if k == "object":
            more += self._attrs(r, g, o, path, exact)
            if "v" not in r and "v" not in g:
                return more
        if t in SETS or (k == "object" and r.get("v") and type(r["v"][0]) is dict and "nodes" in r["v"][0]):
            self._members(r, g, path, rtol, atol)
            return more
        if _sampling(r) != _sampling(g):
            raise Mismatch(f"{_text(path)} has {g.get('n', len(g.get('v', ())))} items, the reference's "
                           f"{r.get('n', len(r.get('v', ())))}")
        if len(r.get("v", ())) != len(g.get("v", ())):
            raise Mismatch(f"{_text(path)} has {len(g.get('v', ()))} items, the reference's {len(r.get('v', ()))}")
        ov = o.get("v") if o is not None and len(o.get("v", ())) == len(r.get("v", ())) else None
        if k == "mapping" or (r.get("v") and type(r["v"][0]) is list):
            return more + self._pairs(r["v"], g["v"], ov, path, exact)
        return more + _zipped(r.get("v", []), g.get("v", []), ov, [_at(path, f"[{i}]") for i in range(len(r.get("v", ())))],
                              exact, path)

    def _pairs(self, rv: list[Any], gv: list[Any], ov: list[Any] | None, path: _Path, exact: bool) -> list[_Task]:
        out: list[_Task] = []
        for i, (pr, pg) in enumerate(zip(rv, gv, strict=True)):
            label = _label(self.r, pr[0])
            po = ov[i] if ov is not None and type(ov[i]) is list and len(ov[i]) == 2 else None
            out.append((pr[0], pg[0], _at(path, f" key {label}"), None, True))
            out.append((pr[1], pg[1], _at(path, f"[{label}]"), po[1] if po is not None else None, exact))
        return out

    def _attrs(self, r: dict[str, Any], g: dict[str, Any], o: dict[str, Any] | None, path: _Path,
               exact: bool) -> list[_Task]:
        names_r, names_g = [a[0] for a in r["attrs"]], [a[0] for a in g["attrs"]]
        if names_r != names_g:
            extra = sorted(set(names_g) - set(names_r))
            missing = sorted(set(names_r) - set(names_g))
            raise Mismatch(f"{_text(path)} " + (f"has attributes {extra} that the reference's lacks" if extra
                                         else f"lacks the attributes {missing} that the reference's has"))
        oa = dict((a[0], a[1]) for a in o["attrs"]) if o is not None and "attrs" in o else {}
        return [(ar[1], ag[1], _at(path, f".{ar[0]}"), oa.get(ar[0]), exact)
                for ar, ag in zip(r["attrs"], g["attrs"], strict=True)]

    def _reduced(self, r: dict[str, Any], g: dict[str, Any], o: dict[str, Any] | None, path: _Path,
                 exact: bool) -> list[_Task]:
        if r["reduce"] != g["reduce"]:
            raise Mismatch(f"{_text(path)} is rebuilt by {g['reduce']}, the reference's by {r['reduce']}")
        out: list[_Task] = []
        for field in ("args", "state", "listitems", "dictitems"):
            if (field in r) != (field in g):
                raise Mismatch(f"{_text(path)}: its {field} differ from the reference's (present on one side only)")
            if field in r:
                out.append((r[field], g[field], path if field == "state" else _at(path, f" ({field})"),
                            o.get(field) if o is not None else None, exact))
        return out

    def _members(self, r: dict[str, Any], g: dict[str, Any], path: _Path, rtol: float | None,
                 atol: float | None) -> None:
        """A set's members, each a graph of its own in canonical order (encoded.py)."""
        if len(r["v"]) != len(g["v"]):
            raise Mismatch(f"{_text(path)} has {len(g['v'])} members, the reference's {len(r['v'])}")
        for i, (a, b) in enumerate(zip(r["v"], g["v"], strict=True)):
            try:
                compare(a, b, f"{_text(path)} member {i}", rtol, atol)
            except Mismatch as exc:
                raise Mismatch(f"{_text(path)}: the members differ ({exc})") from None


def _node(nodes: list[Any], c: Any, path: _Path) -> dict[str, Any]:
    """The node a child refers to: an index into `nodes`, or an atom in place."""
    if type(c) is int and 0 <= c < len(nodes) and type(nodes[c]) is dict:
        return nodes[c]
    if type(c) is dict and "t" in c:
        return c
    raise Mismatch(f"{_text(path)} is not a well-formed value")


def _zipped(rv: list[Any], gv: list[Any], ov: list[Any] | None, paths: list[_Path], exact: bool,
            path: _Path) -> list[_Task]:
    if len(rv) != len(gv):
        raise Mismatch(f"{_text(path)} has {len(gv)} items, the reference's {len(rv)}")
    return [(a, b, p, ov[i] if ov is not None else None, exact) for i, (a, b, p) in enumerate(zip(rv, gv, paths, strict=True))]


def _sampling(n: dict[str, Any]) -> tuple[Any, Any]:
    return n.get("n"), n.get("seed")


def _label(nodes: list[Any], c: Any) -> str:
    """A dict key as a path shows it: its value where it is an atom."""
    if type(c) is dict and "v" in c:
        return _short(c["v"] if c["t"] != "builtins.float" else float(c["v"]))
    t = nodes[c]["t"] if type(c) is int and 0 <= c < len(nodes) and type(nodes[c]) is dict else "?"
    return f"<{t}>"


def _atoms(r: dict[str, Any], g: dict[str, Any], path: _Where, rtol: float | None, atol: float | None) -> None:
    t = r["t"]
    if t == "builtins.float":
        _floats(float(r["v"]), float(g["v"]), path, *tolerance("float64", rtol, atol))
    elif t == "builtins.complex":
        for part, a, b in zip(("real", "imag"), r["v"], g["v"], strict=True):
            _floats(float(a), float(b), f"{path}.{part}", *tolerance("float64", rtol, atol))
    elif r.get("v") != g.get("v"):
        raise Mismatch(f"{path} is {_short(g.get('v'))}, the reference's {_short(r.get('v'))}")


def canonical(e: Any) -> str:
    """An encoded value as text that two equal encodings share (blob files named apart, same bytes)."""
    nodes = e.get("nodes", []) if isinstance(e, dict) else []
    return json.dumps([{k: v for k, v in n.items() if k != "file"} if isinstance(n, dict) else n for n in nodes],
                      sort_keys=True)


def _short(v: Any) -> str:
    s = repr(v)
    return s if len(s) < 60 else s[:57] + "..."


def _floats(a: float, b: float, where: object, rtol: float, atol: float) -> None:
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
