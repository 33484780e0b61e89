"""Triton templates (evaluator/proposers/templates.py): which targets they take, each instance right
against the original in Triton's interpreter on CPU tensors at the timed shape and at edge shapes,
and a template candidate through the real CLI's gate with its edge shapes (the GPU run times them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import redline
from redline.evaluator.proposers import Context
from redline.evaluator.proposers.builtin import TritonTemplateProposer
from redline.evaluator.proposers.templates import instances, shape_of
from redline.evaluator.target import check_candidate, load_target

pytest.importorskip("torch")
pytest.importorskip("triton")

SOFTMAX = "def f(x):\n    return torch.softmax(x, -1)\n"
METHOD_SOFTMAX = "def f(x):\n    return x.softmax(-1)\n"
LAYER_NORM = ("def f(x, w, b):\n    mu = x.mean(-1, keepdim=True)\n"
              "    return (x - mu) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5) * w + b\n")
RMS_NORM = "def f(x, w):\n    return torch.nn.functional.rms_norm(x, x.shape[-1:], w, 1e-6)\n"
LAYER_NORM_PLAIN = "def f(x):\n    return F.layer_norm(x, x.shape[-1:])\n"
LOG_SOFTMAX = "def f(x):\n    return x - torch.logsumexp(x, dim=-1, keepdim=True)\n"
CROSS_ENTROPY = "def f(x, t):\n    return F.cross_entropy(x, t)\n"


@pytest.mark.parametrize("source, op", [(SOFTMAX, "softmax"), (METHOD_SOFTMAX, "softmax"),
                                        (LAYER_NORM, "layer_norm"), (RMS_NORM, "rms_norm"),
                                        (LAYER_NORM_PLAIN, "layer_norm"), (LOG_SOFTMAX, "log_softmax"),
                                        ("def f(x):\n    return x.log_softmax(-1)\n", "log_softmax"),
                                        ("def f(x, t):\n    return F.cross_entropy(x, t)\n", "cross_entropy")])
def test_a_row_operation_becomes_templates(source: str, op: str) -> None:
    got = instances(source, ["torch.Tensor float32 shape (64, 1024)"])
    assert got and {i.op for i in got} == {op} and len(got) <= 4
    assert all(f"_redline_{op}(" in i.code and "def f(" in i.code for i in got)
    assert len({i.code for i in got}) == len(got)  # each configuration its own code
    assert got[0].config.strategy == "row"  # many short rows: a row per program first


@pytest.mark.parametrize("source", [
    "def f(x):\n    return torch.softmax(x, 0)\n",  # not the last dimension
    "def f(x):\n    return torch.softmax(x, -1, dtype=torch.float64)\n",  # another dtype
    "def f(x):\n    y = x * 2\n    return torch.softmax(y, -1) + 1\n",  # more than the one call
    "def f(x, t, w):\n    return F.cross_entropy(x, t, w)\n",  # class weights
    "def f(x, t):\n    return F.cross_entropy(x, t, label_smoothing=0.1)\n",  # smoothed targets
    "def f(x, t):\n    return F.cross_entropy(x, t, reduction=r)\n",  # an option known only at run time
    "def f(x):\n    return torch.log_softmax(x, 0)\n",  # not the last dimension
])
def test_what_is_not_one_row_operation_gets_none(source: str) -> None:
    assert instances(source, []) == []


def test_a_norm_over_other_dimensions_is_handed_to_the_library() -> None:
    """Which dimensions a norm covers is known only at run time: the wrapper checks it on every call."""
    got = instances("def f(x, w):\n    return torch.nn.functional.layer_norm(x, x.shape[-2:], w)\n", [])
    assert got and all("if x.dim() == 0 or x.numel() == 0 or tuple(shape) != (n,)" in i.code for i in got)


def test_few_long_rows_split_first_and_long_softmax_rows_loop_first() -> None:
    norm = instances(RMS_NORM, ["torch.Tensor float32 shape (16, 4194304)", "torch.Tensor float32 shape (4194304,)"])
    assert [i.config.strategy for i in norm[:2]] == ["split", "split"]
    soft = instances(SOFTMAX, ["torch.Tensor float32 shape (8, 100000)"])
    assert [i.config.strategy for i in soft] == ["loop", "loop", "loop"]  # rows that fit no `row` kernel
    assert [i.config.strategy for i in instances(CROSS_ENTROPY, ["torch.Tensor float32 shape (8, 32000)"])] == \
        ["loop", "loop", "loop"]
    assert shape_of(["torch.Tensor bfloat16 shape (3,) on cuda:0"]) == (3,) and shape_of([]) is None


CHECK = r"""
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
import torch.nn.functional as F
from redline.evaluator.proposers.templates import instances
src, shapes = sys.argv[1], eval(sys.argv[2])
ref = {"torch": torch, "F": F}
exec(src, ref)
n_args = ref["f"].__code__.co_argcount
for inst in instances(src, []):
    ns = {"F": F}
    exec(inst.code, ns)
    for shape, dtype, strided in shapes:
        g = torch.Generator().manual_seed(0)
        wide = torch.randn(*shape[:-1], 2 * shape[-1], generator=g) * 3 + 1
        x = (wide[..., ::2] if strided else wide[..., :shape[-1]].contiguous()).to(dtype)
        params = [torch.randn(shape[-1], generator=g).to(dtype) for _ in range(n_args - 1)]
        got, want = ns["f"](x, *params), ref["f"](x, *params)
        tol = 1e-4 if dtype == torch.float32 else 2e-2
        assert got.dtype == want.dtype and got.shape == want.shape, (inst.config, shape)
        if dtype != torch.float32:  # as the evaluator judges half precision: against the float32 oracle
            want = ref["f"](x.float(), *(p.float() for p in params))
        assert torch.allclose(got.float(), want.float(), rtol=tol, atol=tol), \
            (inst.config, shape, dtype, (got.float() - want.float()).abs().max().item())
print("checked", len({inst.code for inst in instances(src, [])}))
"""
SHAPES = "[((6, 1000), torch.float32, False), ((5, 999), torch.float32, True), ((1, 1), torch.float32, False), " \
         "((3, 4, 17), torch.bfloat16, False), ((2, 20000), torch.float32, False), ((0, 8), torch.float32, False)]"


@pytest.mark.parametrize("source", [SOFTMAX, LAYER_NORM, RMS_NORM, LAYER_NORM_PLAIN, LOG_SOFTMAX])
def test_every_instance_matches_the_original_in_the_interpreter(source: str) -> None:
    """Every configuration at a 1000-wide input, an odd width read through a stride, one element,
    three dimensions in bfloat16, rows long enough to split or loop, and no rows at all."""
    res = subprocess.run([sys.executable, "-c", CHECK, source, SHAPES], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "checked 4" in res.stdout, res.stderr[-3000:]


CE_CHECK = r"""
import os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
import torch.nn.functional as F
from redline.evaluator.proposers.templates import instances
checked = set()
for reduction in ("mean", "sum", "none"):
    src = f"def f(x, t):\n    return F.cross_entropy(x, t, reduction={reduction!r})\n"
    ref = {"F": F}
    exec(src, ref)
    for inst in instances(src, []):
        ns = {"F": F}
        exec(inst.code, ns)
        for rows, classes, dtype, strided, ignored in eval(sys.argv[1]):
            g = torch.Generator().manual_seed(rows * classes)
            wide = torch.randn(rows, 2 * classes, generator=g) * 3
            x = (wide[:, ::2] if strided else wide[:, :classes].contiguous()).to(dtype)
            t = torch.randint(0, max(classes, 1), (rows,), generator=g)
            t[:ignored] = -100  # ignore_index: no loss, and not counted in the mean
            got, want = ns["f"](x, t), ref["f"](x, t)
            tol = 1e-4 if dtype == torch.float32 else 2e-2
            assert got.dtype == want.dtype and got.shape == want.shape, (inst.config, rows, classes)
            assert torch.allclose(got.float(), want.float(), rtol=tol, atol=tol, equal_nan=True), \
                (inst.config, reduction, rows, classes, dtype, got, want)
        checked.add(inst.code)
print("checked", len(checked))
"""


def test_every_cross_entropy_instance_matches_the_library_in_the_interpreter() -> None:
    """Each configuration under each reduction: a 1000-class input, an odd class count read through a
    stride with ignored targets, one class, bfloat16, rows too long for the `row` kernels, a batch whose
    targets are all ignored (a mean over nothing), and no rows."""
    cases = "[(6, 1000, torch.float32, False, 0), (5, 999, torch.float32, True, 2), (1, 1, torch.float32, False, 0), " \
            "(3, 17, torch.bfloat16, False, 1), (2, 20000, torch.float32, False, 0), " \
            "(3, 7, torch.float32, False, 3), (0, 8, torch.float32, False, 0)]"
    res = subprocess.run([sys.executable, "-c", CE_CHECK, cases], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "checked 12" in res.stdout, res.stderr[-3000:]


def test_the_proposer_offers_templates_on_cuda_only_and_first_when_memory_bound(tmp_path: Path) -> None:
    (tmp_path / "norm.py").write_text("import torch\n\n\n" + RMS_NORM + "\n\ndef make_inputs(seed):\n"
                                      "    return torch.randn(8, 512), torch.randn(512)\n")
    target = load_target(f"{tmp_path / 'norm.py'}::f")
    p = TritonTemplateProposer()
    assert p.propose(Context(target=target, round=1, device="cpu")) == []
    props = p.propose(Context(target=target, round=1, device="cuda", inputs=["torch.Tensor float32 shape (8, 512)"]))
    assert len(props) == 4 and all(check_candidate(q.code, target) is None for q in props)
    assert props[0].origin == "builtin:triton-templates" and props[0].approach.startswith("Triton template: rms_norm")
    assert p.rank(Context(target=target, round=1, bound="memory-bound")) < 0 <= p.rank(Context(target=target, round=1))


def test_a_template_passes_the_gate_and_its_edge_shapes_through_the_cli(tmp_path: Path) -> None:
    """On the CPU the evaluator runs Triton in its interpreter: slow (so not faster), but the gate's
    verdict on correctness, at the input and at its edge shapes, is the one the GPU run gets."""
    (tmp_path / "norm.py").write_text("import torch\n\n\n" + RMS_NORM + "\n\ndef make_inputs(seed):\n"
                                      "    g = torch.Generator().manual_seed(seed)\n"
                                      "    return torch.randn(8, 300, generator=g), torch.randn(300, generator=g)\n")
    cands = tmp_path / "cands"
    cands.mkdir()
    for i, inst in enumerate(instances(RMS_NORM, ["torch.Tensor float32 shape (8, 300)"])[:3:2]):
        (cands / f"{inst.config.strategy}_{i}.py").write_text(inst.code)
    res = redline("optimise", f"{tmp_path / 'norm.py'}::f", "--candidates", str(cands), "--no-builtin",
                  "--json", str(tmp_path / "r.json"), cwd=tmp_path, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert len(doc["candidates"]) == 2
    for c in doc["candidates"]:
        assert c["status"] in ("ok", "not_faster"), c["reason"]
        assert "(8, 299), (299,)" in c["shapes_checked"] and "(1, 300), (300,)" in c["shapes_checked"]


def test_cross_entropy_templates_are_checked_at_fewer_classes_with_their_targets_inside(tmp_path: Path) -> None:
    """Class targets index the logits' last axis: where an edge shape cuts the classes, the targets wrap
    into the new count, so the reference accepts the call and the templates are checked there too (and
    on CUDA no out-of-range target stops the process with a device-side assert)."""
    (tmp_path / "loss.py").write_text(
        "import torch\n\n\ndef loss(logits, targets):\n    logp = torch.log_softmax(logits, dim=1)\n"
        "    return -logp.gather(1, targets.unsqueeze(1)).squeeze(1).mean()\n\n\ndef make_inputs(seed):\n"
        "    g = torch.Generator().manual_seed(seed)\n"
        "    return torch.randn(8, 300, generator=g), torch.randint(0, 300, (8,), generator=g)\n")
    source = "def loss(logits, targets):\n    return F.cross_entropy(logits, targets)\n"
    cands = tmp_path / "cands"
    cands.mkdir()
    for inst in instances(source, ["torch.Tensor float32 shape (8, 300)"])[::2]:
        (cands / f"{inst.config.strategy}.py").write_text("import torch.nn.functional as F\n" + inst.code)
    res = redline("optimise", f"{tmp_path / 'loss.py'}::loss", "--candidates", str(cands), "--no-builtin",
                  "--json", str(tmp_path / "r.json"), cwd=tmp_path, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert sorted(c["origin"] for c in doc["candidates"]) == ["file:loop.py", "file:row.py"]
    for c in doc["candidates"]:
        assert c["status"] in ("ok", "not_faster"), c["reason"]
        assert "(8, 299), (8,)" in c["shapes_checked"] and "(8, 1), (8,)" in c["shapes_checked"], c["shapes_checked"]
        assert "(8, 0), (8,)" not in c["shapes_checked"]  # no class for a target to name: the reference raises


KB_CHECK = r"""
import importlib.util, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
from redline.evaluator.proposers.templates import instances
from redline.evaluator.target import load_target
path = sys.argv[1]
spec = importlib.util.spec_from_file_location("kb", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
torch.manual_seed(0)
model = mod.Model(*mod.get_init_inputs())
args = [a[:2] for a in mod.get_inputs()]  # two rows of the problem's own width
described = [f"torch.Tensor float32 shape {tuple(a.shape)}" for a in args]
found = instances(load_target(f"{path}::Model.forward").function_source, described, method=True)
for inst in found:
    ns = {}
    exec(inst.code, ns)
    got, want = ns["forward"](model, *args), model(*args)
    assert got.shape == want.shape and torch.allclose(got, want, rtol=1e-4, atol=1e-4), \
        (inst.config, (got - want).abs().max().item())
print("checked", len(found), [i.config.strategy for i in found])
"""


@pytest.mark.parametrize("problem, strategies", [
    ("l1_softmax", "['row', 'row', 'loop', 'loop']"), ("l1_log_softmax", "['row', 'row', 'loop', 'loop']"),
    ("l1_layernorm", "['split', 'split', 'row', 'row']"), ("l1_rmsnorm", "['row', 'row', 'split', 'split']"),
    ("l1_layernorm_long_rows", "['split', 'split', 'split']"), ("l1_cross_entropy", "['loop', 'loop', 'loop']")])
def test_a_kernelbench_models_forward_becomes_templates_that_match_it(problem: str, strategies: str) -> None:
    """The benchmark's row operations, written out in a model's forward (self.weight and all), as templates
    in the interpreter on two rows of the problem's own width, every configuration matched against the
    model; rows too long to hold in registers (4M elements, a 32000-token vocabulary) get only the
    kernels that stream them."""
    path = Path(__file__).parent / "perf" / "kernelbench" / f"{problem}.py"
    res = subprocess.run([sys.executable, "-c", KB_CHECK, str(path)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and f"checked {strategies.count(',') + 1} {strategies}" in res.stdout, \
        res.stdout + res.stderr[-3000:]


def test_a_softmax_over_a_numbered_dimension_is_a_template_only_where_that_dimension_is_the_last() -> None:
    src = "def f(x):\n    return torch.softmax(x, 1)\n"
    assert len(instances(src, ["torch.Tensor float32 shape (4, 16)"])) == 4
    assert instances(src, ["torch.Tensor float32 shape (4, 8, 16)"]) == [] and instances(src, []) == []
