"""Built-in proposers: what they propose for real targets (the GPU and numba runs measure them)."""

from __future__ import annotations

import pytest
from helpers import REPO, WORKLOAD
from redline.evaluator.proposers import Context
from redline.evaluator.proposers.builtin import (
    NumbaProposer,
    TorchCompileProposer,
    TritonConfigProposer,
    sigmoid_tanh_source,
)
from redline.evaluator.target import Target, check_candidate, load_target


def target_of(path, qual: str, inputs: str | None = None) -> Target:
    return load_target(f"{path}::{qual}", inputs)


def test_triton_config_search_varies_the_launch_wrappers_knobs(tmp_path) -> None:
    (tmp_path / "inputs.py").write_text("def make_inputs(seed):\n    return ()\n")
    inputs = f"{tmp_path / 'inputs.py'}::make_inputs"
    t = target_of(WORKLOAD / "model" / "kernels.py", "gelu_bias_triton", inputs)
    props = TritonConfigProposer().propose(Context(target=t, round=1))
    assert 1 < len(props) <= 6
    heads = [p.code.split("\n", 1)[0] for p in props]
    assert len(set(heads)) == len(heads) and all(h.startswith("def gelu_bias_triton(") for h in heads)
    assert any("BLOCK=1024" in h for h in heads) and any("num_warps=4" in h for h in heads)
    assert all(check_candidate(p.code, t) is None for p in props)
    assert TritonConfigProposer().propose(Context(target=t, round=2)) == []


def test_torch_compile_variants(tmp_path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "inputs.py").write_text("def make_inputs(seed):\n    return ()\n")
    eager = target_of(WORKLOAD / "model" / "kernels.py", "gelu_bias", f"{tmp_path / 'inputs.py'}::make_inputs")
    compiled = TorchCompileProposer().propose(Context(target=eager, round=1))
    assert [p.approach for p in compiled] == ["torch.compile(default)", "torch.compile(max-autotune-no-cudagraphs)"]
    assert all("gelu_bias = torch.compile(_redline_eager_gelu_bias" in p.code for p in compiled)
    on_gpu = TorchCompileProposer().propose(Context(target=eager, round=1, device="cuda"))
    # The variant that won on the H200 comes right after default, so a budget of two tries it.
    assert [p.approach for p in on_gpu] == [
        "torch.compile(default)", "torch.compile(coordinate descent), tanh through sigmoid",
        "torch.compile(default), tanh through sigmoid", "torch.compile(max-autotune-no-cudagraphs)",
        "torch.compile(max-autotune-no-cudagraphs, coordinate descent)"]  # no multi-kernel: gelu_bias reduces nothing
    for fast in on_gpu[1:3]:
        assert "torch.tanh" not in fast.code and "torch.sigmoid(2.0 * (0.7978845608" in fast.code
        assert check_candidate(fast.code, eager) is None
    assert "options={'coordinate_descent_tuning': True}" in on_gpu[1].code
    rows = target_of(WORKLOAD / "model" / "kernels.py", "softmax_naive", f"{tmp_path / 'inputs.py'}::make_inputs")
    reducing = TorchCompileProposer().propose(Context(target=rows, round=1, device="cuda"))
    assert reducing[1].approach == "torch.compile(max-autotune-no-cudagraphs, multi-kernel reductions)"
    assert "'triton.multi_kernel': 1" in reducing[1].code and "'max_autotune': True" in reducing[1].code
    assert len(reducing) == 4 and all(check_candidate(p.code, rows) is None for p in reducing)
    assert not any("multi-kernel" in p.approach  # multi-kernel is Triton's: not on the CPU
                   for p in TorchCompileProposer().propose(Context(target=rows, round=1)))


def test_numba_only_for_loops() -> None:
    demo = target_of(REPO / "examples" / "demo" / "app.py", "rolling_zscore")
    props = NumbaProposer().propose(Context(target=demo, round=1))
    assert [p.approach for p in props] == ["numba.njit", "numba.njit, fastmath=True"]
    assert NumbaProposer().propose(Context(target=target_of(REPO / "examples" / "demo" / "app.py", "make_inputs"),
                                           round=1)) == []


def test_tanh_through_sigmoid_computes_the_same_function() -> None:
    """The rewrite behind the CUDA variant, run eagerly on the CPU, for torch.tanh and Tensor.tanh over the
    whole range, infinities and NaN included: the same function in float64, and in float32 within float32
    rounding of the true value wherever the original is (a CPU's float32 tanh may itself be approximate: one
    CI machine's was 4.5e-5 off at 5.0; the rewrite may be no worse than the original, not better)."""
    torch = pytest.importorskip("torch")
    src = "def f(x, b):\n    y = x + b\n    return torch.tanh(y) * 0.5 + (y * 3).tanh()\n"
    fast = sigmoid_tanh_source(src)
    assert fast is not None and "tanh" not in fast
    ns_ref: dict = {"torch": torch}
    ns_fast: dict = {"torch": torch}
    exec(src, ns_ref)
    exec(fast, ns_fast)
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(100_000, generator=g) * s for s in (1e-3, 1.0, 10.0, 100.0)])
    x = torch.cat([x, torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan")])])
    b = torch.zeros(())
    exact = ns_ref["f"](x.double(), b.double())
    torch.testing.assert_close(ns_fast["f"](x.double(), b.double()), exact, rtol=0, atol=1e-12, equal_nan=True)
    error = (ns_fast["f"](x, b).double() - exact).abs().nan_to_num()
    allowed = (ns_ref["f"](x, b).double() - exact).abs().nan_to_num().clamp(min=2e-6)
    assert bool((error <= allowed).all()), f"worst excess {(error - allowed).max().item():.3g}"
    assert bool(ns_fast["f"](x, b).isnan().eq(exact.isnan()).all())
    assert sigmoid_tanh_source("def f(x):\n    return torch.sigmoid(x)\n") is None


def test_cuda_graph_of_a_plain_torch_function_first_where_launches_dominate(tmp_path) -> None:
    from redline.evaluator.proposers.builtin import CudaGraphProposer, IdiomProposer, builtin_proposers

    (tmp_path / "m.py").write_text("import torch\n\n\ndef mlp(x, w):\n    return torch.relu(x @ w) * 2\n\n\n"
                                   "class Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n"
                                   "def make_inputs(seed):\n    return ()\n")
    fn = load_target(f"{tmp_path / 'm.py'}::mlp")
    (graph,) = CudaGraphProposer().propose(Context(target=fn, round=1, device="cuda"))
    assert graph.origin == "builtin:cuda-graph" and "torch.cuda.graph(graph)" in graph.code
    assert "return _redline_clone(out)" in graph.code and check_candidate(graph.code, fn) is None
    compile(graph.code, "<graph>", "exec")
    assert CudaGraphProposer().propose(Context(target=fn, round=1)) == []  # CUDA only
    # A module's forward: captured on the module's own parameters and buffers, keyed by where they are.
    method = load_target(f"{tmp_path / 'm.py'}::Model.forward")
    (graphed,) = CudaGraphProposer().propose(Context(target=method, round=1, device="cuda"))
    assert "key = (_redline_key(args), _redline_state_key(self))" in graphed.code
    assert check_candidate(graphed.code, method) is None
    # The profile orders the proposers: the graph first on a launch-bound target, last otherwise.
    launch = Context(target=fn, round=1, device="cuda", bound="launch-bound")
    memory = Context(target=fn, round=1, device="cuda", bound="memory-bound")
    order = [p.name for p in sorted(builtin_proposers(), key=lambda p: p.rank(launch))]
    assert order[0] == "cuda-graph"
    assert [p.name for p in sorted(builtin_proposers(), key=lambda p: p.rank(memory))][-1] == "cuda-graph"
    assert IdiomProposer().rank(launch) == 0


def test_what_bounds_a_cuda_call_from_its_timed_split() -> None:
    from redline.evaluator.timing import bound_of

    h200 = 3.9e12  # the copy bandwidth measured on the H200, bytes/s
    assert bound_of(8e-6, 30e-6, 4096, h200) == "launch-bound"  # the host issues slower than the GPU runs
    assert bound_of(25e-6, 5e-6, 10 << 20, h200) == "launch-bound"  # under 30 µs on the GPU
    assert bound_of(200e-6, 20e-6, 512 << 20, h200) == "memory-bound"  # 2.7 TB/s of inputs and output
    assert bound_of(2e-3, 20e-6, 64 << 20, h200) == "compute-bound"  # 34 GB/s: the time goes elsewhere
    assert bound_of(None, 1e-5, 0, h200) == ""  # no figures, no class
