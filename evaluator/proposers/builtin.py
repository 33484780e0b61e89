"""Built-in proposers that work offline: numba for numeric Python loops, library idioms and
torch.compile for torch code, a launch-configuration search for Triton wrappers."""

from __future__ import annotations

import ast
import importlib.util
import re
import textwrap

from ..target import Target, rename_def
from . import Context, Proposal, Proposer
from .idioms import rewrites
from .templates import instances


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


# Argument descriptions (codec.describe) numba compiles: numbers, booleans and NumPy arrays.
_NUMBA_TYPED = re.compile(r"(int|float|bool|complex) |numpy\.ndarray ")


def _torch_skip(t: Target, cuda_only: bool = False, device: str = "cpu") -> str | None:
    """Why a torch proposer does not apply: no torch in the module, a nested method, torch missing, the CPU."""
    if "torch" not in t.source:
        return "the module does not use torch"
    if t.qualname.count(".") > 1:
        return "a method of a nested class"
    if cuda_only and device != "cuda":
        return "CUDA only; this run is on the CPU"
    if not _available("torch"):
        return "torch is not installed"
    return None


class NumbaProposer(Proposer):
    """`numba.njit` variants of a function whose body loops, when numba is installed."""

    name = "numba"

    def skip(self, ctx: Context) -> str | None:
        src = textwrap.dedent(ctx.target.function_source)
        if "." in ctx.target.qualname:
            return "numba compiles functions, not methods"
        if not re.search(r"^\s+(for|while) ", src, re.M):
            return "the function has no loop to compile"
        others = sorted({kind.split(" ")[0] for kind in ctx.inputs if not _NUMBA_TYPED.match(kind)})
        if others:
            return f"numba types numbers and NumPy arrays; the function takes {', '.join(others)}"
        if not _available("numba"):
            return "numba is not installed (pip install numba)"
        return None

    def propose(self, ctx: Context) -> list[Proposal]:
        if ctx.round != 1 or self.skip(ctx):
            return []
        body = re.sub(r"^@.*\n", "", textwrap.dedent(ctx.target.function_source), flags=re.M)
        return [Proposal(code=f"import numba\n\n\n@numba.njit(cache=False{opts})\n{body}", origin="builtin:numba",
                         approach=f"numba.njit{opts}", trusted=True)
                for opts in ("", ", fastmath=True")]


def torch_compile_code(t: Target, mode: str | None = "default", options: dict[str, object] | None = None,
                       source: str | None = None) -> str | None:
    """The target (or `source`, a rewrite of it) wrapped in `torch.compile` (None for code that does not
    use torch). A method (`Model.forward`) is compiled as a function of `self`, assigned to the method's name."""
    if "torch" not in t.source or t.qualname.count(".") > 1 or not _available("torch"):
        return None
    src = textwrap.dedent(source if source is not None else t.function_source)
    eager = f"_redline_eager_{t.name}"
    renamed = rename_def(src, t.name, eager)
    how = f"options={options!r}" if options else f"mode={mode!r}"  # torch.compile takes one or the other, not both
    return f"import torch\n\n\n{renamed}\n\n{t.name} = torch.compile({eager}, {how}, dynamic=False)\n"


class _SigmoidTanh(ast.NodeTransformer):
    """`torch.tanh(e)` and `e.tanh()` as `2 * torch.sigmoid(2 * e) - 1`: the same function, which
    Triton computes with one fast exponential and a reciprocal where libdevice's accurate tanh costs
    enough arithmetic to make an elementwise kernel compute-bound (docs/performance.md)."""

    def __init__(self) -> None:
        self.count = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if not isinstance(f, ast.Attribute) or f.attr != "tanh" or node.keywords:
            return node
        if isinstance(f.value, ast.Name) and f.value.id == "torch":
            if len(node.args) != 1:
                return node
            arg = node.args[0]
        elif not node.args:
            arg = f.value
        else:
            return node
        self.count += 1
        sigmoid = ast.Call(func=ast.Attribute(value=ast.Name("torch", ast.Load()), attr="sigmoid", ctx=ast.Load()),
                           args=[ast.BinOp(ast.Constant(2.0), ast.Mult(), arg)], keywords=[])
        return ast.BinOp(ast.BinOp(ast.Constant(2.0), ast.Mult(), sigmoid), ast.Sub(), ast.Constant(1.0))


def sigmoid_tanh_source(function_source: str) -> str | None:
    """The function with every tanh written through sigmoid (see _SigmoidTanh); None if it has none."""
    tree = ast.parse(textwrap.dedent(function_source))
    rewrite = _SigmoidTanh()
    tree = ast.fix_missing_locations(rewrite.visit(tree))
    return ast.unparse(tree) + "\n" if rewrite.count else None


# Calls that reduce along a dimension: where a function has one, inductor's multi-kernel mode is tried.
_REDUCTION = re.compile(r"\.(sum|mean|amax|amin|max|min|var|std|norm|logsumexp|softmax|log_softmax|prod)\("
                        r"|\b(softmax|log_softmax|layer_norm|rms_norm|group_norm|batch_norm|normalize)\(")

# Inductor options of the CUDA variants (tests/perf/bench_gpu_variants.py compiles these same ones).
TUNED: dict[str, object] = {"max_autotune": True, "triton.cudagraphs": False}
MULTI_KERNEL: dict[str, object] = {**TUNED, "triton.multi_kernel": 1}


class TorchCompileProposer(Proposer):
    """`torch.compile` of a torch function: default, autotuned, and on CUDA variants that are slower
    to compile, in the order measured to pay off (docs/performance.md), so a small budget tries the
    likely winner first:
    - a function with tanh, compiled with tanh written through sigmoid (see _SigmoidTanh) and
      coordinate-descent tuning of the generated kernel's block size and warps;
    - a function with a reduction, multi-kernel mode: inductor also generates a persistent reduction
      (one row held in registers, read once) for rows up to 16x longer than its usual 1024 and picks
      the faster kernel by timing both;
    - then the rewrite alone, max-autotune, and coordinate descent without the rewrite."""

    name = "torch.compile"

    def skip(self, ctx: Context) -> str | None:
        return _torch_skip(ctx.target)

    def propose(self, ctx: Context) -> list[Proposal]:
        if ctx.round != 1 or self.skip(ctx):
            return []
        variants: list[tuple[str | None, dict[str, object] | None, str, str | None]] = [
            ("default", None, "torch.compile(default)", None)]
        if ctx.device == "cuda":
            fast = sigmoid_tanh_source(ctx.target.function_source)
            if fast is not None:
                variants.append((None, {"coordinate_descent_tuning": True},
                                 "torch.compile(coordinate descent), tanh through sigmoid", fast))
            if _REDUCTION.search(ctx.target.function_source):
                variants.append((None, MULTI_KERNEL,
                                 "torch.compile(max-autotune-no-cudagraphs, multi-kernel reductions)", None))
            if fast is not None:
                variants.append(("default", None, "torch.compile(default), tanh through sigmoid", fast))
        variants.append(("max-autotune-no-cudagraphs", None, "torch.compile(max-autotune-no-cudagraphs)", None))
        if ctx.device == "cuda":
            variants.append((None, {**TUNED, "coordinate_descent_tuning": True},
                             "torch.compile(max-autotune-no-cudagraphs, coordinate descent)", None))
        out = []
        for mode, options, approach, source in variants:
            code = torch_compile_code(ctx.target, mode, options, source)
            if code is None:
                return []
            out.append(Proposal(code=code, origin="builtin:torch.compile", approach=approach, trusted=True))
        return out


_KNOB = re.compile(r"\b(?P<name>BLOCK\w*|num_warps|num_stages)\s*(?::\s*int\s*)?=\s*(?P<value>\d+)")


class TritonConfigProposer(Proposer):
    """A search over the launch configuration of a Triton launch wrapper: its integer defaults for
    block sizes, `num_warps` and `num_stages` (the wrapper's signature names them)."""

    name = "triton-config"
    max_variants = 6

    def skip(self, ctx: Context) -> str | None:
        t = ctx.target
        if "triton" not in t.source or "." in t.qualname:
            return "the target is not a Triton launch wrapper"
        if not _KNOB.search(textwrap.dedent(t.function_source).split(":\n", 1)[0]):
            return "its signature has no BLOCK, num_warps or num_stages default to tune"
        return None

    def propose(self, ctx: Context) -> list[Proposal]:
        t = ctx.target
        if ctx.round != 1 or self.skip(ctx):
            return []
        src = textwrap.dedent(t.function_source)
        header = src.split(":\n", 1)[0]
        knobs = {m.group("name"): int(m.group("value")) for m in _KNOB.finditer(header)}
        options: dict[str, list[int]] = {}
        for name, value in knobs.items():
            if name.startswith("BLOCK"):
                options[name] = [v for v in (value // 4, value // 2, value * 2) if v >= 16]
            elif name == "num_warps":
                options[name] = [v for v in (2, 4, 8, 16) if v != value]
            else:
                options[name] = [v for v in (1, 2, 3, 4) if v != value]
        variants: list[dict[str, int]] = []
        for name, values in options.items():  # one knob at a time first, then pairs
            variants += [{name: v} for v in values]
        names = list(options)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                variants += [{a: va, b: vb} for va in options[a][:2] for vb in options[b][:2]]
        out = []
        for change in variants[:self.max_variants]:
            new_header = header
            for name, value in change.items():
                new_header = re.sub(rf"(\b{name}\s*(?::\s*int\s*)?=\s*)\d+", rf"\g<1>{value}", new_header)
            label = ", ".join(f"{k}={v}" for k, v in change.items())
            out.append(Proposal(code=src.replace(header, new_header, 1), origin="builtin:triton-config",
                                approach=f"triton config {label}", trusted=True))
        return out


class IdiomProposer(Proposer):
    """Hand-written torch formulations replaced by the fused library call (idioms.py): the rewrite as
    it is, and compiled with torch.compile (which fuses what surrounds the library call)."""

    name = "idioms"

    def skip(self, ctx: Context) -> str | None:
        return _torch_skip(ctx.target)

    def propose(self, ctx: Context) -> list[Proposal]:
        t = ctx.target
        if ctx.round != 1 or self.skip(ctx):
            return []
        eager, compiled = [], []
        for rw in rewrites(t.function_source):  # each rewrite as it is first: cheap to build and to time
            source = rw.source
            if re.search(r"^import torch\.nn\.functional as F$", t.source, re.M):
                source = source.replace("torch.nn.functional.", "F.")
            approach = "library idioms: " + ", ".join(dict.fromkeys(rw.idioms))
            eager.append(Proposal(code=f"import torch\n\n\n{source}", origin="builtin:idioms", approach=approach,
                                  trusted=True))
            code = torch_compile_code(t, "default", None, source)
            if code is not None:
                compiled.append(Proposal(code=code, origin="builtin:idioms",
                                         approach=f"torch.compile(default), {approach}", trusted=True))
        return eager + compiled


class TritonTemplateProposer(Proposer):
    """A target (a function, or a method such as a KernelBench model's forward) that is one row operation
    over the last dimension (softmax, log-softmax, layer norm, RMS norm, cross-entropy over class
    indices, as written or once the idioms are rewritten) as Triton kernels (templates.py), in up to
    four launch configurations ordered by the input's shape; on CUDA only (Triton's CPU interpreter is
    for tests)."""

    name = "triton-templates"

    def skip(self, ctx: Context) -> str | None:
        reason = _torch_skip(ctx.target, cuda_only=True, device=ctx.device)
        return reason or (None if _available("triton") else "Triton is not installed")

    def propose(self, ctx: Context) -> list[Proposal]:
        t = ctx.target
        if ctx.round != 1 or self.skip(ctx):
            return []
        return [Proposal(code=inst.code, origin="builtin:triton-templates", trusted=True,
                         approach=f"Triton template: {inst.op} ({inst.config.label})")
                for inst in instances(t.function_source, ctx.inputs, method="." in t.qualname)]

    def rank(self, ctx: Context) -> int:
        return -1 if ctx.bound == "memory-bound" else 0  # a row reduction that streams memory: first


_GRAPH_HELPERS = """import threading

import torch


{eager}

_redline_graphs = {{}}
_redline_inside = threading.local()


def _redline_key(value):
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), tuple(value.stride()), value.dtype, value.device)
    if isinstance(value, (list, tuple)):
        return tuple(_redline_key(v) for v in value)
    return ("value", value)


def _redline_fill(static, value):
    if isinstance(static, torch.Tensor):
        static.copy_(value)
    elif isinstance(static, (list, tuple)):
        for s, v in zip(static, value):
            _redline_fill(s, v)


def _redline_clone(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_redline_clone(v) for v in value)
    if isinstance(value, dict):
        return {{k: _redline_clone(v) for k, v in value.items()}}
    return value


def _redline_capture(run):
    # Warm-up outside the capture (lazy initialisation, autotuning), then one capture.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run()
    return graph, out
"""

# One CUDA graph per input signature, captured on static copies of the inputs: each call copies its
# inputs in, replays the graph, and returns a copy of the output (the graph's own buffers are
# overwritten by the next replay).
_GRAPH_FUNCTION = """

def {name}(*args):
    key = _redline_key(args)
    if key not in _redline_graphs:
        static = _redline_clone(args)
        _redline_graphs[key] = (*_redline_capture(lambda: {eager_name}(*static)), static)
    graph, out, static = _redline_graphs[key]
    _redline_fill(static, args)
    graph.replay()
    return _redline_clone(out)
"""

# A method: the graph is captured on the module's own parameters and buffers, where they are (no copies
# per call), so in-place updates of them (an optimiser step, load_state_dict, a buffer the forward
# updates) are read or made by every replay; a module whose tensors moved (replaced, or another module)
# or whose plain attributes (training, a scale) differ gets a graph of its own.
_GRAPH_METHOD = """

def _redline_state_key(module):
    tensors = [*module.parameters(), *module.buffers()]
    attrs = tuple((k, v) for k, v in sorted(vars(module).items())
                  if isinstance(v, (bool, int, float, str, type(None))))
    return (type(module), attrs, tuple((t.data_ptr(),) + _redline_key(t)[1:] for t in tensors))


def {name}(self, *args):
    if getattr(_redline_inside, "on", False):
        return {eager_name}(self, *args)
    key = (_redline_key(args), _redline_state_key(self))
    if key not in _redline_graphs:
        static = _redline_clone(args)

        def run():
            _redline_inside.on = True
            try:
                return {eager_name}(self, *static)
            finally:
                _redline_inside.on = False

        _redline_graphs[key] = (*_redline_capture(run), static)
    graph, out, static = _redline_graphs[key]
    _redline_fill(static, args)
    graph.replay()
    return _redline_clone(out)
"""


class CudaGraphProposer(Proposer):
    """A torch function (or a module's forward) on CUDA replayed as a CUDA graph: the whole call's
    kernels launched at once, for targets whose host takes about as long to issue the kernels as the
    GPU takes to run them."""

    name = "cuda-graph"

    def skip(self, ctx: Context) -> str | None:
        return _torch_skip(ctx.target, cuda_only=True, device=ctx.device)

    def propose(self, ctx: Context) -> list[Proposal]:
        t = ctx.target
        if ctx.round != 1 or self.skip(ctx):
            return []
        src = textwrap.dedent(t.function_source)
        header = src.split(":\n", 1)[0]
        if "*" in header or "=" in header:  # keyword defaults and *args: not captured by position
            return []
        eager = f"_redline_eager_{t.name}"
        renamed = rename_def(src, t.name, eager)
        body = _GRAPH_METHOD if "." in t.qualname else _GRAPH_FUNCTION
        code = _GRAPH_HELPERS.format(eager=renamed.rstrip("\n")) + body.format(name=t.name, eager_name=eager)
        return [Proposal(code=code, origin="builtin:cuda-graph", approach="CUDA graph of the whole call", trusted=True)]

    def rank(self, ctx: Context) -> int:
        return -1 if ctx.bound == "launch-bound" else 1  # first where launches dominate, else last


def builtin_proposers() -> list[Proposer]:
    # The Triton search first: it is cheap to build and aimed at the kernel the user wrote; the idioms
    # before torch.compile: offered only where the code has one, and then usually the larger step.
    # (Each proposer's rank moves it by what the target's profile says: see Proposer.rank.)
    # Plain Python's proposers last: where numba or the torch proposers apply, theirs is the larger step
    # (and a small budget reaches it first); on plain Python those are skipped.
    from .compiled import CythonProposer
    from .lint import RuffFixProposer
    from .mypyc import MypycProposer
    from .rewrites import PlainPythonProposer

    return [NumbaProposer(), TritonConfigProposer(), IdiomProposer(), TritonTemplateProposer(), TorchCompileProposer(),
            CudaGraphProposer(), RuffFixProposer(), PlainPythonProposer(), CythonProposer(),
            MypycProposer()]
