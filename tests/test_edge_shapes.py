"""Edge shapes through the real CLI: a candidate correct only at the shapes it was timed on is
`incorrect`, its reason naming the shapes; honest rewrites still win and list the shapes they were
checked at; a function whose domain is one shape keeps working."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import TESTS, redline

HONEST = """import numpy as np


def moving_average(xs, k):
    c = np.concatenate(([0.0], np.cumsum(xs)))
    idx = np.arange(1, xs.shape[0] + 1)
    lo = np.maximum(0, idx - k)
    return (c[idx] - c[lo]) / (idx - lo)
"""
# The edge weights precomputed for length 400: right at 400, wrong (or failing) anywhere else.
FOR_400 = """import numpy as np

_DEN = np.minimum(np.arange(1, 401), 8).astype(float)


def moving_average(xs, k):
    c = np.concatenate(([0.0], np.cumsum(xs)))
    idx = np.arange(1, xs.shape[0] + 1)
    lo = np.maximum(0, idx - k)
    return (c[idx] - c[lo]) / _DEN
"""


def run(tmp_path: Path, target: str, cands: dict[str, str], *extra: str) -> dict[str, dict]:
    d = tmp_path / "cands"
    d.mkdir()
    for name, code in cands.items():
        (d / name).write_text(code)
    res = redline("optimise", target, "--candidates", str(d), "--no-builtin", "--json", str(tmp_path / "r.json"),
                  *extra, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads((tmp_path / "r.json").read_text())
    out = {c["origin"].removeprefix("file:"): c for c in doc["candidates"]}
    out["__winner__"] = doc["winner"]
    return out


def test_length_specialised_numpy_is_incorrect_and_the_honest_rewrite_wins(tmp_path: Path) -> None:
    shutil.copy(TESTS / "shapes" / "moving_average.py", tmp_path / "ma.py")
    got = run(tmp_path, f"{tmp_path / 'ma.py'}::moving_average", {"honest.py": HONEST, "for_400.py": FOR_400})
    wrong = got["for_400.py"]
    assert wrong["status"] == "incorrect" and wrong["reason"].startswith("correct at (400,); ") \
        and "(399,)" in wrong["reason"], wrong["reason"]
    honest = got["honest.py"]
    assert honest["status"] == "ok" and got["__winner__"]["id"] == honest["id"]
    assert {"(399,)", "(1,)", "(0,)", "(400,) as non-contiguous views"} <= set(honest["shapes_checked"])
    assert not any(name.endswith("+guarded") for name in got)  # the project did not allow specialising


def test_where_the_project_allows_specialising_the_candidate_is_offered_guarded(tmp_path: Path) -> None:
    """redline.toml's `specialise` for the target: the length-400 candidate stays incorrect, and its guarded
    form (the original code with a dispatch to it at the verified input) is verified, wins, is applied,
    and runs the specialised code at length 400 and the original everywhere else."""
    shutil.copy(TESTS / "shapes" / "moving_average.py", tmp_path / "ma.py")
    (tmp_path / "redline.toml").write_text('[targets."ma.py::moving_average"]\nspecialise = true\n')
    original = load(tmp_path / "ma.py", "original_ma")
    got = run(tmp_path, f"{tmp_path / 'ma.py'}::moving_average", {"for_400.py": FOR_400}, "--apply")
    wrong, guard = got["for_400.py"], got["for_400.py+guarded"]
    assert wrong["status"] == "incorrect" and wrong["correct_only_at"] == ["ndarray(400,) float64 cpu strides=(8,); 8"]
    assert guard["status"] == "ok" and guard["parent"] == wrong["id"], guard["reason"]
    assert "(399,)" in guard["shapes_checked"] and "(400,) as non-contiguous views" in guard["shapes_checked"]
    assert got["__winner__"]["id"] == guard["id"] and "+    if _redline_input_key([xs, k], {}) in _MOVING_AVERAGE" \
        in got["__winner__"]["diff"]
    applied = load(tmp_path / "ma.py", "applied_ma")
    rng = np.random.default_rng(7)
    for xs, k in ((rng.standard_normal(400), 8), (rng.standard_normal(399), 8), (rng.standard_normal(1000), 8),
                  (rng.standard_normal(800)[::2], 8), (rng.standard_normal(400), 3)):
        np.testing.assert_allclose(applied.moving_average(xs, k), original.moving_average(xs, k))
    applied._moving_average_specialised = lambda xs, k: "specialised"
    assert applied.moving_average(rng.standard_normal(400), 8) == "specialised"
    assert isinstance(applied.moving_average(rng.standard_normal(400), 3), np.ndarray)  # ints are in the key
    assert isinstance(applied.moving_average(rng.standard_normal(401), 8), np.ndarray)


METHOD = """import numpy as np


class Model:
    def __init__(self, k):
        self.k = k

    def forward(self, xs):
        n = xs.shape[0]
        out = np.empty(n)
        for i in range(n):
            lo = max(0, i - self.k + 1)
            out[i] = xs[lo:i + 1].sum() / (i + 1 - lo)
        return out


def get_inputs():
    return [np.random.standard_normal(400)]


def get_init_inputs():
    return [8]
"""


def test_a_method_is_guarded_on_its_instance_and_its_arguments(tmp_path: Path) -> None:
    """A KernelBench-style model whose forward is specialised for length 400 with the model's window
    (8) baked in: the guard keys `self` by its attributes as well as the argument, so another model's
    window, or another length, takes the original code; applied, the helpers sit at module level."""
    (tmp_path / "ma.py").write_text(METHOD)
    (tmp_path / "redline.toml").write_text('[targets."ma.py::Model.forward"]\nspecialise = true\n')
    original = load(tmp_path / "ma.py", "original_model")
    special = FOR_400.replace("def moving_average(xs, k):", "def forward(self, xs):").replace("idx - k", "idx - self.k")
    got = run(tmp_path, f"{tmp_path / 'ma.py'}::Model.forward", {"for_400.py": special}, "--apply")
    wrong, guard = got["for_400.py"], got["for_400.py+guarded"]
    assert wrong["status"] == "incorrect" and wrong["correct_only_at"] == [
        "Model(k=8); ndarray(400,) float64 cpu strides=(8,)"], wrong["correct_only_at"]
    assert guard["status"] == "ok" and got["__winner__"]["id"] == guard["id"], guard["reason"]
    applied = load(tmp_path / "ma.py", "applied_model")
    rng = np.random.default_rng(3)
    for k, xs in ((8, rng.standard_normal(400)), (8, rng.standard_normal(399)), (3, rng.standard_normal(400))):
        np.testing.assert_allclose(applied.Model(k).forward(xs), original.Model(k).forward(xs))
    applied._forward_specialised = lambda self, xs: "specialised"
    assert applied.Model(8).forward(rng.standard_normal(400)) == "specialised"
    assert isinstance(applied.Model(3).forward(rng.standard_normal(400)), np.ndarray)  # the window is keyed


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_function_defined_at_one_shape_only_keeps_working(tmp_path: Path) -> None:
    src = (TESTS / "shapes" / "moving_average.py").read_text().replace(
        "    n = xs.shape[0]\n", "    if xs.shape != (400,) or not xs.flags['C_CONTIGUOUS']:\n"
        "        raise ValueError('400 contiguous samples expected')\n    n = xs.shape[0]\n", 1)
    (tmp_path / "ma.py").write_text(src)
    got = run(tmp_path, f"{tmp_path / 'ma.py'}::moving_average", {"honest.py": HONEST})
    assert got["honest.py"]["status"] == "ok", got["honest.py"]["reason"]
    assert got["honest.py"]["shapes_checked"] == []  # every variant is outside the function's domain


def test_shape_specialised_torch_is_incorrect_at_the_shapes_that_change_together(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "rows.py").write_text(
        "import torch\n\n\ndef shift_rows(x, b):\n    out = torch.empty_like(x)\n    for i in range(x.shape[0]):\n"
        "        out[i] = x[i] * 2.0 + b\n    return out\n\n\ndef make_inputs(seed):\n"
        "    g = torch.Generator().manual_seed(seed)\n    return torch.randn(64, 96, generator=g), torch.randn(96, generator=g)\n")
    honest = "def shift_rows(x, b):\n    return x * 2.0 + b\n"
    fixed = "def shift_rows(x, b):\n    return (x.reshape(64, 96) * 2.0 + b.reshape(1, 96)).reshape(x.shape)\n"
    got = run(tmp_path, f"{tmp_path / 'rows.py'}::shift_rows", {"honest.py": honest, "fixed.py": fixed})
    assert got["honest.py"]["status"] == "ok", got["honest.py"]["reason"]
    assert "(64, 95), (95,)" in got["honest.py"]["shapes_checked"]  # the bias shrinks with the matrix
    wrong = got["fixed.py"]
    assert wrong["status"] == "incorrect" and wrong["reason"].startswith("correct at (64, 96), (96,); at "), \
        wrong["reason"]


def test_a_triton_kernel_written_for_one_row_length_is_incorrect_in_the_interpreter(tmp_path: Path) -> None:
    """The Triton interpreter on CPU tensors (TRITON_INTERPRET=1, set by the evaluator): a kernel whose
    row length is the tested shape's passes the first checks and fails at the derived shapes, while the
    honest masked kernel keeps its verdict."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    ops = (TESTS / "gpu" / "ops.py").read_text().replace('device="cuda"', 'device="cpu"').replace("2048, 4096", "96, 1000")
    (tmp_path / "ops.py").write_text(ops.replace("(4096,", "(1000,"))
    got = run(tmp_path, f"{tmp_path / 'ops.py'}::gelu_bias", {
        "row_1000.py": (TESTS / "shapes" / "triton_row_1000.py").read_text(),
        "masked.py": (TESTS / "gpu" / "candidates" / "triton_fused.py").read_text()})
    wrong = got["row_1000.py"]
    assert wrong["status"] == "incorrect" and wrong["reason"].startswith("correct at (96, 1000), (1000,); "), \
        wrong["reason"]
    assert got["masked.py"]["status"] in ("ok", "not_faster"), got["masked.py"]["reason"]
    assert "(96, 999), (999,)" in got["masked.py"]["shapes_checked"]


def test_a_guard_forwards_every_kind_of_argument_and_keys_tensors_by_strides(tmp_path: Path) -> None:
    """The guard around a signature with positional-only, default, *args, keyword-only and **kwargs
    parameters: it keys the call as the worker keys a checked input (keys.call_key) and forwards every
    argument unchanged; a non-contiguous tensor of the verified shape is another input."""
    torch = pytest.importorskip("torch")
    from redline.evaluator.sandbox.redline_worker.keys import call_key
    from redline.evaluator.specialise import guarded
    from redline.evaluator.target import apply_candidate, load_target

    (tmp_path / "f.py").write_text(
        "import torch\n\n\ndef f(a, /, b, c=2, *rest, scale, **extra):\n    \"\"\"Doc.\"\"\"\n"
        "    return a * b + c + sum(rest) + scale + len(extra)\n\n\n"
        "def make_inputs(seed):\n    return torch.ones(4, 3), 2.0\n")
    target = load_target(f"{tmp_path / 'f.py'}::f")
    cand = "def f(a, /, b, c=2, *rest, scale, **extra):\n    return ('special', a, b, c, rest, scale, extra)\n"
    x = torch.ones(4, 3)
    verified = call_key(target_fn(tmp_path / "f.py"), (x, 2.0, 5, 7), {"scale": 1, "z": 3})
    assert verified == "Tensor(4, 3) torch.float32 cpu strides=(3, 1); 2.0; 5; 7; scale=1; z=3"
    (tmp_path / "f.py").write_text(apply_candidate(target, guarded(target, cand, [verified])))
    f = load(tmp_path / "f.py", "guarded_f").f
    assert f.__doc__ == "Doc."
    assert f(x, 2.0, 5, 7, scale=1, z=3) == ("special", x, 2.0, 5, (7,), 1, {"z": 3})
    assert not isinstance(f(x, 2.0, 5, 8, scale=1, z=3), tuple)  # another int
    strided = torch.ones(4, 6)[:, ::2]
    assert not isinstance(f(strided, 2.0, 5, 7, scale=1, z=3), tuple)  # same shape, other strides


def target_fn(path: Path):
    return load(path, "plain_f").f


LAYER_NORM_MODEL = """import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d))
        self.bias = nn.Parameter(torch.randn(d))

    def forward(self, x):
        out = torch.empty_like(x)
        for i in range(x.shape[0]):
            row = x[i]
            mu = row.mean()
            out[i] = (row - mu) / torch.sqrt(((row - mu) ** 2).mean() + 1e-5) * self.weight + self.bias
        return out


def get_inputs():
    return [torch.randn(48, 300)]


def get_init_inputs():
    return [300]
"""


def test_a_models_own_sizes_stay_while_its_inputs_change(tmp_path: Path) -> None:
    """A KernelBench model's forward with weights of the row length: the rows vary (48 -> 47, 1, 0), the
    row length is the model's and stays (at (48, 1) the written-out reference only broadcasts the
    weights, where the library call rightly raises). The honest library call wins; a candidate written
    for 48 rows is still caught."""
    pytest.importorskip("torch")
    (tmp_path / "ln.py").write_text(LAYER_NORM_MODEL)
    honest = "import torch\n\n\ndef forward(self, x):\n" \
             "    return torch.nn.functional.layer_norm(x, x.shape[-1:], self.weight, self.bias, 1e-5)\n"
    rows48 = "import torch\n\n\ndef forward(self, x):\n    y = x.reshape(48, 300)\n" \
             "    return torch.nn.functional.layer_norm(y, (300,), self.weight, self.bias, 1e-5)\n"
    got = run(tmp_path, f"{tmp_path / 'ln.py'}::Model.forward", {"honest.py": honest, "rows48.py": rows48})
    assert got["honest.py"]["status"] == "ok", got["honest.py"]["reason"]
    assert got["honest.py"]["shapes_checked"][:3] == ["(47, 300)", "(1, 300)", "(0, 300)"]
    wrong = got["rows48.py"]
    assert wrong["status"] == "incorrect" and wrong["reason"].startswith("correct at (48, 300); at (47, 300)"), \
        wrong["reason"]


# CI has no GPU: this module stands in for a CUDA target whose kernel asserts on the device at odd
# lengths. After a device-side assert, every CUDA call in that process fails with "CUDA error: ...";
# here the first odd length marks the process as failed the same way.
DEVICE_ASSERT = '''import numpy as np


class AcceleratorError(RuntimeError):
    pass


_context = {"lost": False}


def _launch(x):
    if _context["lost"] or x.shape[0] % 2:
        _context["lost"] = True
        raise AcceleratorError("CUDA error: device-side assert triggered")


def halve(x):
    _launch(x)
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        out[i] = x[i] * 0.5 + 1.0
    return out


def make_inputs(seed):
    return (np.random.default_rng(seed).standard_normal(4000),)
'''


def test_a_device_assert_at_an_edge_shape_does_not_turn_away_an_honest_candidate(tmp_path: Path) -> None:
    """Where the reference itself asserts on the device at an edge shape (outside its domain), neither
    worker can run anything after it: the edge checks stop there and the candidate is timed in a fresh
    pair, so an honest rewrite is still verified faster."""
    (tmp_path / "dev.py").write_text(DEVICE_ASSERT)
    honest = "def halve(x):\n    _launch(x)\n    return x * 0.5 + 1.0\n"
    got = run(tmp_path, f"{tmp_path / 'dev.py'}::halve", {"honest.py": honest})
    assert got["honest.py"]["status"] == "ok" and got["honest.py"]["speedup"] > 2, got["honest.py"]["reason"]
    assert got["honest.py"]["shapes_checked"] == []  # the first variant, 3999 long, is the assert


def test_a_kernel_error_that_surfaces_at_the_synchronisation_is_the_calls_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA a device-side assert is raised when the host next waits for the device, after the call has
    returned: an edge variant's call counts it as its own error, so the gate sees where the reference
    fails. CI has no GPU: the worker's synchronisation is a stand-in that raises as torch does there."""
    from redline.evaluator.sandbox.redline_worker import ops

    def device_assert() -> None:
        raise RuntimeError("CUDA error: device-side assert triggered")

    monkeypatch.setattr(ops, "_sync", device_assert)
    out, err = ops.synced_call(lambda x: x + 1, (1,), {})
    assert out is None and err is not None and err["message"].startswith("CUDA error: device-side assert")
    monkeypatch.setattr(ops, "_sync", lambda: None)
    assert ops.synced_call(lambda x: x + 1, (1,), {}) == (2, None)
