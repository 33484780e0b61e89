"""Triton templates for row operations over the last dimension (softmax, log-softmax, layer norm, RMS
norm, cross-entropy over class indices): where the target is one such call (as written, or once the
idiom matcher has rewritten it), the call is replaced by a Triton kernel instantiated with a launch
configuration.

Every instance is correct at every shape: rows of any length are masked, inputs are read through
their row stride, and what a template does not cover (another normalised shape, an empty tensor,
integer data, a weight of another length) goes to the library call it replaces. Three strategies:

- `row`: one program per row, the whole row in registers (rows up to 16,384 elements): one read,
  one write.
- `loop`: one program per row, the row in blocks (softmax of long rows: an online max and sum, then
  the normalised write; two reads). Cross-entropy writes nothing per element, so its loop reads each
  row once: the online log-sum-exp, and the target's logit.
- `split`: few long rows (a norm over millions of elements per row): a row is cut into chunks, one
  program per chunk; a first kernel writes each chunk's count, mean and sum of squared deviations,
  a second combines a row's chunks (Chan's parallel formula, numerically sound) and normalises its
  own chunk. Two reads of the input, every SM busy whatever the row count.
"""

from __future__ import annotations

import ast
import copy
import re
import textwrap
from dataclasses import dataclass

from .idioms import rewrites

ROW_MAX = 16384  # the longest row the `row` strategy keeps in registers
_SOFTMAXES = ("softmax", "log_softmax")
_OPS = {
    "softmax": ("torch.softmax", "torch.nn.functional.softmax", "F.softmax", "torch.special.softmax"),
    "log_softmax": ("torch.log_softmax", "torch.nn.functional.log_softmax", "F.log_softmax",
                    "torch.special.log_softmax"),
    "cross_entropy": ("torch.nn.functional.cross_entropy", "F.cross_entropy"),
    "layer_norm": ("torch.nn.functional.layer_norm", "F.layer_norm", "torch.layer_norm"),
    "rms_norm": ("torch.nn.functional.rms_norm", "F.rms_norm", "torch.rms_norm"),
}


@dataclass(frozen=True)
class Config:
    strategy: str  # row, loop or split
    warps: int
    block: int = 0  # loop: elements per step; split: elements per chunk

    @property
    def label(self) -> str:
        return f"{self.strategy}, {self.warps} warps" + (f", {self.block} per block" if self.block else "")


@dataclass(frozen=True)
class Instance:
    op: str
    code: str
    config: Config


def instances(function_source: str, inputs: list[str], method: bool = False) -> list[Instance]:
    """The target's call as Triton templates, in the order most likely to win for the shape of the
    call's input (read from the probe's description of the arguments, `inputs`, where the input is
    one; for a `method`, the arguments after self): at most four configurations. Empty where the
    target is not one such call."""
    found = None
    for source in [textwrap.dedent(function_source), *(rw.source for rw in rewrites(function_source))]:
        found = _match(source)
        if found is not None:
            break
    if found is None:
        return []
    op, fn, call = found
    params = [a.arg for a in fn.args.args][1 if method else 0:]
    first = call.args[0] if call.args else None
    shape = shape_of(inputs, params.index(first.id)) if isinstance(first, ast.Name) and first.id in params else None
    if op in _SOFTMAXES and _softmax_dim(call) not in (-1, len(shape or ()) - 1 if shape else -1):
        return []  # the kernels normalise the last dimension; softmax(x, 1) is that only where x has two
    out = []
    for config in _configs(op, shape):
        new = _replace_call(fn, call, op, config)
        out.append(Instance(op, f"{_KERNELS[op]}\n\n{_WRAPPERS[op]}\n\n{new}\n", config))
    return out


def _match(source: str) -> tuple[str, ast.FunctionDef, ast.Call] | None:
    """(op, the function, the call) where the function's body is one `return` of a supported call."""
    tree = ast.parse(source)
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, ast.FunctionDef):
        return None
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and \
        isinstance(fn.body[0].value, ast.Constant) else fn.body
    if len(body) != 1 or not isinstance(body[0], ast.Return) or not isinstance(body[0].value, ast.Call):
        return None
    call = body[0].value
    name = ast.unparse(call.func)
    for op, names in _OPS.items():
        if name in names and _supported(op, call):
            return op, fn, call
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _SOFTMAXES and name not in _OPS[func.attr]:
        method = ast.Call(func=ast.Name(f"torch.{func.attr}"), args=[func.value, *call.args], keywords=call.keywords)
        if _supported(func.attr, method):  # x.softmax(-1), x.log_softmax(-1)
            body[0].value = method
            return func.attr, fn, method
    return None


def _supported(op: str, call: ast.Call) -> bool:
    names = {k.arg for k in call.keywords}
    if None in names:
        return False
    if op in _SOFTMAXES:  # over one dimension given as a number (see instances), in the input's dtype
        return len(call.args) <= 2 and names <= {"dim"} and _softmax_dim(call) is not None
    if op == "cross_entropy":  # class indices, no class weights or label smoothing; constant options
        return len(call.args) == 2 and names <= {"reduction", "ignore_index"} and \
            all(isinstance(k.value, ast.Constant) or ast.unparse(k.value).lstrip("-").isdigit() for k in call.keywords)
    allowed = {"layer_norm": {"normalized_shape", "weight", "bias", "eps"}, "rms_norm": {"normalized_shape",
                                                                                    "weight", "eps"}}[op]
    return len(call.args) + len(names) >= 2 and names <= allowed and len(call.args) <= len(allowed) + 1


def _softmax_dim(call: ast.Call) -> int | None:
    dim = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "dim"), None)
    try:
        value = ast.literal_eval(dim) if dim is not None else None
    except ValueError:
        return None
    return value if isinstance(value, int) else None


def _configs(op: str, shape: tuple[int, ...] | None) -> list[Config]:
    n = shape[-1] if shape else 0
    rows = 1
    for d in (shape or ())[:-1]:
        rows *= d
    row = [Config("row", w) for w in ((4, 8) if n <= 2048 else (8, 16))]
    if op == "cross_entropy":  # one read either way: a row in registers, or streamed through an online sum
        loop = [Config("loop", 8, 4096), Config("loop", 16, 8192), Config("loop", 4, 2048)]
        return (loop if n > ROW_MAX else row + loop)[:4]
    # Rows longer than ROW_MAX do not fit the `row` kernels (their wrapper hands them to the library).
    if op in _SOFTMAXES:
        loop = [Config("loop", 8, 4096), Config("loop", 16, 8192)]
        return [*loop, Config("loop", 4, 2048)] if n > ROW_MAX else row + loop
    split = [Config("split", 8, 8192), Config("split", 16, 32768)]
    if n > ROW_MAX:
        return [*split, Config("split", 4, 4096)]
    # Few long rows: splitting keeps every SM busy; otherwise a row per program reads the input once.
    return split + row if shape and rows < 512 and n >= 8192 else row + split


def _replace_call(fn: ast.FunctionDef, call: ast.Call, op: str, config: Config) -> str:
    """The function (left as it is) with its one `return` calling the template's wrapper in `config`."""
    new = ast.Call(func=ast.Name(f"_redline_{op}"), args=list(call.args),
                   keywords=[*call.keywords, *(ast.keyword(k, ast.Constant(v)) for k, v in
                                               (("STRATEGY", config.strategy), ("WARPS", config.warps),
                                                ("BLOCK", config.block)))])
    out = copy.deepcopy(fn)
    out.body[-1] = ast.Return(value=new)
    return ast.unparse(ast.fix_missing_locations(out))


def shape_of(inputs: list[str], index: int = 0) -> tuple[int, ...] | None:
    """The shape of argument `index` from the probe's description of the inputs ('... shape (16, 4096) ...')."""
    if index >= len(inputs):
        return None
    m = re.search(r"shape \(([\d, ]*)\)", inputs[index])
    return tuple(int(d) for d in m.group(1).replace(" ", "").split(",") if d) if m else None


_HEAD = """import torch
import triton
import triton.language as tl
"""

_KERNELS = {
    "softmax": _HEAD + '''

@triton.jit
def _redline_softmax_row(X, Y, n, sx, sy, LOG: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * sx + cols, mask=cols < n, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, 0)
    e = tl.where(cols < n, tl.exp(z), 0.0)
    if LOG:
        y = z - tl.log(tl.sum(e, 0))
    else:
        y = e / tl.sum(e, 0)
    tl.store(Y + row * sy + cols, y, mask=cols < n)


@triton.jit
def _redline_online_max_sum(X, row, n, sx, BLOCK: tl.constexpr):
    """A row's maximum and its sum of exp(x - maximum) in one streaming read, BLOCK elements at a time."""
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n, BLOCK):
        c = start + cols
        x = tl.load(X + row * sx + c, mask=c < n, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = tl.where(m_new == -float("inf"), 0.0, s * tl.exp(m - m_new) + tl.exp(x - m_new))
        m = m_new
    top = tl.max(m, 0)
    return top, tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp(m - top)), 0)


@triton.jit
def _redline_softmax_loop(X, Y, n, sx, sy, LOG: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    top, total = _redline_online_max_sum(X, row, n, sx, BLOCK)
    for start in range(0, n, BLOCK):
        c = start + cols
        x = tl.load(X + row * sx + c, mask=c < n, other=-float("inf")).to(tl.float32)
        if LOG:
            y = x - top - tl.log(total)
        else:
            y = tl.exp(x - top) / total
        tl.store(Y + row * sy + c, y, mask=c < n)


@triton.jit
def _redline_cross_entropy_rows(X, T, L, n, sx, ignore, ROW: tl.constexpr, BLOCK: tl.constexpr):
    """Per row: the loss (log-sum-exp minus the target's logit; 0 where the target is ignore_index, NaN
    where it is outside the classes) and whether it counts, into L[row, 0:2]."""
    row = tl.program_id(0).to(tl.int64)
    if ROW:
        cols = tl.arange(0, BLOCK)
        x = tl.load(X + row * sx + cols, mask=cols < n, other=-float("inf")).to(tl.float32)
        top = tl.max(x, 0)
        total = tl.sum(tl.where(cols < n, tl.exp(x - top), 0.0), 0)
    else:
        top, total = _redline_online_max_sum(X, row, n, sx, BLOCK)
    t = tl.load(T + row).to(tl.int64)
    counts = t != ignore
    inside = (t >= 0) & (t < n)
    picked = tl.load(X + row * sx + t, mask=counts & inside, other=0.0).to(tl.float32)
    loss = tl.where(inside, top + tl.log(total) - picked, float("nan"))
    tl.store(L + row * 2, tl.where(counts, loss, 0.0))
    tl.store(L + row * 2 + 1, counts.to(tl.float32))
''',
    "layer_norm": _HEAD + '''

@triton.jit
def _redline_norm_row(X, Y, W, B, n, sx, sy, eps, RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                      BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(X + row * sx + cols, mask=mask, other=0.0).to(tl.float32)
    if RMS:
        y = x * tl.rsqrt(tl.sum(x * x, 0) / n + eps)
    else:
        mean = tl.sum(x, 0) / n
        d = tl.where(mask, x - mean, 0.0)
        y = d * tl.rsqrt(tl.sum(d * d, 0) / n + eps)
    if HAS_W:
        y = y * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_B:
        y = y + tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * sy + cols, y, mask=mask)


@triton.jit
def _redline_norm_parts(X, P, n, sx, chunks, RMS: tl.constexpr, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = cols < n
    x = tl.load(X + row * sx + cols, mask=mask, other=0.0).to(tl.float32)
    count = tl.minimum(n - chunk * CHUNK, CHUNK).to(tl.float32)
    if RMS:
        mean = 0.0
        m2 = tl.sum(x * x, 0)
    else:
        mean = tl.sum(x, 0) / count
        d = tl.where(mask, x - mean, 0.0)
        m2 = tl.sum(d * d, 0)
    at = P + (row * chunks + chunk) * 3
    tl.store(at, count)
    tl.store(at + 1, mean)
    tl.store(at + 2, m2)


@triton.jit
def _redline_norm_apply(X, Y, W, B, P, n, sx, sy, chunks, eps, RMS: tl.constexpr, HAS_W: tl.constexpr,
                        HAS_B: tl.constexpr, CHUNK: tl.constexpr, MAXC: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    k = tl.arange(0, MAXC)
    at = P + (row * chunks + k) * 3
    count = tl.load(at, mask=k < chunks, other=0.0)
    means = tl.load(at + 1, mask=k < chunks, other=0.0)
    m2s = tl.load(at + 2, mask=k < chunks, other=0.0)
    if RMS:
        mean = 0.0
        var = tl.sum(m2s, 0) / n
    else:
        mean = tl.sum(count * means, 0) / n
        dm = means - mean
        var = (tl.sum(m2s, 0) + tl.sum(count * dm * dm, 0)) / n
    rstd = tl.rsqrt(var + eps)
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = cols < n
    x = tl.load(X + row * sx + cols, mask=mask, other=0.0).to(tl.float32)
    y = (x - mean) * rstd
    if HAS_W:
        y = y * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_B:
        y = y + tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * sy + cols, y, mask=mask)
''',
}
_KERNELS["rms_norm"] = _KERNELS["layer_norm"]

_ROWS = '''def _redline_rows(x):
    """x as rows of its last dimension, each row contiguous (a copy only where it is not)."""
    rows = x.reshape(-1, x.shape[-1])
    return rows if rows.stride(-1) == 1 else rows.contiguous()
'''

_WRAPPERS = {
    "softmax": _ROWS + '''

def _redline_softmaxes(x, dim, log, strategy, warps, block):
    n = x.shape[-1] if x.dim() else 0
    if x.dim() == 0 or dim not in (-1, x.dim() - 1) or x.numel() == 0 or not x.is_floating_point() or \\
            x.dtype == torch.float64 or (strategy == "row" and n > _ROW_MAX_):
        return torch.log_softmax(x, dim) if log else torch.softmax(x, dim)
    rows = _redline_rows(x)
    y = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    if strategy == "row":
        _redline_softmax_row[(rows.shape[0],)](rows, y, n, rows.stride(0), y.stride(0), LOG=log,
                                                BLOCK=triton.next_power_of_2(n), num_warps=warps)
    else:
        _redline_softmax_loop[(rows.shape[0],)](rows, y, n, rows.stride(0), y.stride(0), LOG=log, BLOCK=block,
                                                 num_warps=warps)
    return y.reshape(x.shape)


def _redline_softmax(x, dim=-1, STRATEGY="row", WARPS=4, BLOCK=0):
    return _redline_softmaxes(x, dim, False, STRATEGY, WARPS, BLOCK)
''',
    "layer_norm": _ROWS + '''

def _redline_norm(x, shape, weight, bias, eps, rms, strategy, warps, block):
    n = x.shape[-1] if x.dim() else 0
    fits = all(p is None or (p.shape == (n,) and p.device == x.device) for p in (weight, bias))
    if x.dim() == 0 or x.numel() == 0 or tuple(shape) != (n,) or not x.is_floating_point() or \\
            x.dtype == torch.float64 or not fits or (strategy == "row" and n > _ROW_MAX_) or \\
            (strategy == "split" and triton.cdiv(n, block) > 4096):
        return None
    rows = _redline_rows(x)
    y = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    w = weight.contiguous() if weight is not None else rows
    b = bias.contiguous() if bias is not None else rows
    if strategy == "row":
        _redline_norm_row[(rows.shape[0],)](rows, y, w, b, n, rows.stride(0), y.stride(0), eps, RMS=rms,
                                            HAS_W=weight is not None, HAS_B=bias is not None,
                                            BLOCK=triton.next_power_of_2(n), num_warps=warps)
    else:
        chunks = triton.cdiv(n, block)
        parts = torch.empty((rows.shape[0], chunks, 3), dtype=torch.float32, device=x.device)
        _redline_norm_parts[(rows.shape[0], chunks)](rows, parts, n, rows.stride(0), chunks, RMS=rms, CHUNK=block,
                                                     num_warps=warps)
        _redline_norm_apply[(rows.shape[0], chunks)](rows, y, w, b, parts, n, rows.stride(0), y.stride(0), chunks,
                                                     eps, RMS=rms, HAS_W=weight is not None,
                                                     HAS_B=bias is not None, CHUNK=block,
                                                     MAXC=triton.next_power_of_2(chunks), num_warps=warps)
    return y.reshape(x.shape)


def _redline_layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, STRATEGY="row", WARPS=4, BLOCK=0):
    y = _redline_norm(x, normalized_shape, weight, bias, eps, False, STRATEGY, WARPS, BLOCK)
    return y if y is not None else torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps)
''',
}
_WRAPPERS["rms_norm"] = _WRAPPERS["layer_norm"].replace('''

def _redline_layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, STRATEGY="row", WARPS=4, BLOCK=0):
    y = _redline_norm(x, normalized_shape, weight, bias, eps, False, STRATEGY, WARPS, BLOCK)
    return y if y is not None else torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps)
''', '''

def _redline_rms_norm(x, normalized_shape, weight=None, eps=None, STRATEGY="row", WARPS=4, BLOCK=0):
    e = torch.finfo(x.dtype).eps if eps is None and x.is_floating_point() else eps
    y = _redline_norm(x, normalized_shape, weight, None, e, True, STRATEGY, WARPS, BLOCK)
    return y if y is not None else torch.nn.functional.rms_norm(x, normalized_shape, weight, eps)
''')
_KERNELS["log_softmax"] = _KERNELS["cross_entropy"] = _KERNELS["softmax"]
_WRAPPERS["log_softmax"] = _WRAPPERS["softmax"].replace("""

def _redline_softmax(x, dim=-1, STRATEGY="row", WARPS=4, BLOCK=0):
    return _redline_softmaxes(x, dim, False, STRATEGY, WARPS, BLOCK)
""", """

def _redline_log_softmax(x, dim=-1, STRATEGY="row", WARPS=4, BLOCK=0):
    return _redline_softmaxes(x, dim, True, STRATEGY, WARPS, BLOCK)
""")
# Class indices only (int64, one per row of 2-D logits), no class weights or label smoothing: anything
# else, and a row the `row` strategy cannot hold, goes to the library.
_WRAPPERS["cross_entropy"] = _ROWS + '''

def _redline_cross_entropy(input, target, reduction="mean", ignore_index=-100, STRATEGY="loop", WARPS=8,
                           BLOCK=4096):
    n = input.shape[-1] if input.dim() else 0
    if input.dim() != 2 or target.dim() != 1 or target.shape[0] != input.shape[0] or input.shape[0] == 0 or \\
            n == 0 or target.dtype != torch.int64 or target.device != input.device or \\
            not input.is_floating_point() or input.dtype == torch.float64 or \\
            reduction not in ("mean", "sum", "none") or (STRATEGY == "row" and n > _ROW_MAX_):
        return torch.nn.functional.cross_entropy(input, target, reduction=reduction, ignore_index=ignore_index)
    rows = _redline_rows(input)
    parts = torch.empty((rows.shape[0], 2), dtype=torch.float32, device=input.device)
    _redline_cross_entropy_rows[(rows.shape[0],)](rows, target.contiguous(), parts, n, rows.stride(0), ignore_index,
                                                  ROW=STRATEGY == "row",
                                                  BLOCK=triton.next_power_of_2(n) if STRATEGY == "row" else BLOCK,
                                                  num_warps=WARPS)
    if reduction == "none":
        return parts[:, 0].contiguous().to(input.dtype)
    total = parts.sum(0)
    return (total[0] if reduction == "sum" else total[0] / total[1]).to(input.dtype)
'''
_WRAPPERS = {op: code.replace("_ROW_MAX_", str(ROW_MAX)) for op, code in _WRAPPERS.items()}
