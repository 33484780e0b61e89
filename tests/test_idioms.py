"""The idiom proposer: hand-written torch formulations found and replaced by the fused library call.

Each positive example's rewrite is run against the original on CPU tensors; the look-alikes that
differ (another softmax dimension, a norm over another dimension, biased and unbiased variance, a
value read after its name was reassigned) must not be rewritten. Through the real CLI, the rewrite
of a causal attention wins, and a mask that is not causal is carried over exactly, its is_causal
alternative rejected by the gate.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest
from helpers import redline

torch = pytest.importorskip("torch")

from redline.evaluator.proposers import Context  # noqa: E402
from redline.evaluator.proposers.builtin import IdiomProposer  # noqa: E402
from redline.evaluator.proposers.idioms import rewrites  # noqa: E402
from redline.evaluator.target import check_candidate, load_target  # noqa: E402

F = torch.nn.functional


def run(source: str, *args: object) -> object:
    space: dict[str, object] = {"torch": torch, "math": math, "F": F}
    exec(compile(textwrap.dedent(source), "<test>", "exec"), space)
    fn = next(v for k, v in space.items() if callable(v) and k not in ("F",) and not isinstance(v, type(math)))
    return fn(*args)  # type: ignore[operator]


def randn(*shape: int) -> object:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)), dtype=torch.float64)


POSITIVE = {
    "causal attention (tril of ones)": ('''
        def attention(q, k, v):
            T = q.shape[-2]
            mask = torch.tril(torch.ones(T, T))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            scores = scores.masked_fill(mask == 0, float("-inf"))
            return torch.softmax(scores, dim=-1) @ v
        ''', ["scaled_dot_product_attention (causal)"], "is_causal=True)", lambda: (randn(2, 3, 16, 8),) * 3),
    "attention with a scale constant": ('''
        def attention(q, k, v):
            return (q @ k.mT * 0.125).softmax(-1) @ v
        ''', ["scaled_dot_product_attention"], "scale=0.125", lambda: (randn(2, 16, 8), randn(2, 12, 8), randn(2, 12, 5))),
    "layer norm written out": ('''
        def ln(x, w, b):
            mu = x.mean(dim=-1, keepdim=True)
            var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
            return (x - mu) / torch.sqrt(var + 1e-5) * w + b
        ''', ["layer_norm"], "layer_norm(x, x.shape[-1:], w, b, 1e-05)", lambda: (randn(6, 32), randn(32), randn(32))),
    "layer norm with var(unbiased=False)": ('''
        def ln(x):
            return (x - x.mean(-1, keepdim=True)) * torch.rsqrt(x.var(-1, keepdim=True, correction=0) + 1e-6)
        ''', ["layer_norm"], "eps=1e-06", lambda: (randn(6, 32),)),
    "layer norm without weights (not an RMS norm of x - mean)": ('''
        def ln(x):
            mu = x.mean(-1, keepdim=True)
            var = ((x - mu) ** 2).mean(-1, keepdim=True)
            return (x - mu) / torch.sqrt(var + 1e-5)
        ''', ["layer_norm"], "layer_norm(x, x.shape[-1:], eps=1e-05)", lambda: (randn(6, 32),)),
    "RMS norm": ('''
        def rms(x, weight):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight
        ''', ["rms_norm"], "rms_norm(x, x.shape[-1:], weight, 1e-06)", lambda: (randn(6, 32), randn(32))),
    "tanh GELU": ('''
        def gelu(x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        ''', ["gelu (tanh)"], "approximate='tanh'", lambda: (randn(64),)),
    "erf GELU": ('''
        def gelu(x):
            return x * 0.5 * (1 + torch.erf(x / math.sqrt(2)))
        ''', ["gelu"], "gelu(x)", lambda: (randn(64),)),
    "SiLU then Mish": ('''
        def act(x):
            y = x * torch.sigmoid(x)
            return y * torch.tanh(F.softplus(y))
        ''', ["silu", "mish"], "mish(y)", lambda: (randn(64),)),
    "SwiGLU's gate: SiLU within a longer product": ('''
        def gate(a, b):
            return a * torch.sigmoid(a) * b
        ''', ["silu"], "silu(a) * b", lambda: (randn(64), randn(64))),
    "SiLU as x / (1 + exp(-x))": ('''
        def act(x):
            return x / (1 + torch.exp(-x))
        ''', ["silu"], "silu(x)", lambda: (randn(64),)),
    "softmax with the max subtracted": ('''
        def sm(x):
            e = torch.exp(x - x.max(dim=1, keepdim=True)[0])
            return e / e.sum(dim=1, keepdim=True)
        ''', ["softmax"], "torch.softmax(x, 1)", lambda: (randn(4, 10),)),
    "log-softmax": ('''
        def lsm(x):
            return x - torch.logsumexp(x, dim=-1, keepdim=True)
        ''', ["log_softmax"], "torch.log_softmax(x, -1)", lambda: (randn(4, 10),)),
    "cross-entropy": ('''
        def loss(logits, targets):
            logp = torch.log_softmax(logits, dim=1)
            return -logp.gather(1, targets.unsqueeze(1)).squeeze(1).mean()
        ''', ["cross_entropy"], "cross_entropy(logits, targets)",
        lambda: (randn(8, 5), torch.arange(8) % 5)),
    "matmul plus bias": ('''
        def mlp(x, w1, b1):
            h = x @ w1.t() + b1
            return torch.relu(h)
        ''', ["linear"], "linear(x, w1, b1)", lambda: (randn(4, 16), randn(8, 16), randn(8))),
}


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_an_idiom_is_replaced_by_the_library_call_that_computes_the_same(name: str) -> None:
    source, idioms, words, inputs = POSITIVE[name]
    found = rewrites(textwrap.dedent(source))
    assert found, name
    rw = found[0]
    assert rw.idioms == idioms and words in rw.source, rw.source
    args = inputs()
    torch.testing.assert_close(run(rw.source, *args), run(source, *args))


NEGATIVE = {
    "softmax over the queries, not the keys": '''
        def f(q, k, v):
            return torch.softmax(q @ k.transpose(-2, -1), dim=-2) @ v
        ''',
    "a norm over the first dimension": '''
        def ln(x):
            return (x - x.mean(0, keepdim=True)) / torch.sqrt(x.var(0, keepdim=True, unbiased=False) + 1e-5)
        ''',
    "a norm with the unbiased variance": '''
        def ln(x):
            return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5)
        ''',
    "x * sigmoid(2x) (not SiLU)": '''
        def act(x):
            return x * torch.sigmoid(2 * x)
        ''',
    "a value read after its name was reassigned": '''
        def f(x):
            e = torch.exp(x)
            x = x + 1
            return e / torch.exp(x).sum(-1, keepdim=True)
        ''',
    "an in-place change between the definition and the use": '''
        def f(x):
            e = torch.exp(x)
            e.add_(1)
            return e / e.sum(-1, keepdim=True)
        ''',
}


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_a_look_alike_is_left_alone(name: str) -> None:
    assert rewrites(textwrap.dedent(NEGATIVE[name])) == []


def test_a_mask_not_known_to_be_causal_is_carried_over_with_is_causal_as_an_alternative() -> None:
    source = textwrap.dedent('''
        def attention(q, k, v, mask):
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(mask == 0, float('-inf'))
            return F.softmax(att, dim=-1) @ v
        ''')
    exact, causal = rewrites(source)
    assert "attn_mask=mask != 0)" in exact.source and "is_causal=True)" in causal.source
    assert "att =" not in exact.source and "scale=" not in exact.source  # 1/sqrt(last dim) is the default
    q, k, v = randn(2, 4, 16, 8), randn(2, 4, 16, 8), randn(2, 4, 16, 8)
    band = torch.triu(torch.ones(16, 16, dtype=torch.float64))  # not causal
    torch.testing.assert_close(run(exact.source, q, k, v, band), run(source, q, k, v, band))
    tril = torch.tril(torch.ones(16, 16, dtype=torch.float64))
    torch.testing.assert_close(run(causal.source, q, k, v, tril), run(source, q, k, v, tril))


def test_the_proposer_offers_each_rewrite_then_each_compiled(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(textwrap.dedent('''
        import math

        import torch
        import torch.nn.functional as F


        def attention(q, k, v, mask):
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(mask == 0, float('-inf'))
            return F.softmax(att, dim=-1) @ v


        def make_inputs(seed):
            return ()
        '''))
    target = load_target(f"{tmp_path / 'm.py'}::attention")
    props = IdiomProposer().propose(Context(target=target, round=1))
    assert [p.approach for p in props] == ["library idioms: scaled_dot_product_attention (masked)"] * 2 + \
        ["torch.compile(default), library idioms: scaled_dot_product_attention (masked)"] * 2
    assert "F.scaled_dot_product_attention(q, k, v, attn_mask=mask != 0)" in props[0].code  # the module's alias
    assert all(check_candidate(p.code, target) is None for p in props)
    assert IdiomProposer().propose(Context(target=target, round=2)) == []


ATTENTION = '''
import math

import torch


def attention(q, k, v):
    T = q.shape[-2]
    mask = torch.{tri}(torch.ones(T, T))
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(mask == 0, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def make_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(2, 8, 256, 64, generator=g) for _ in range(3))
'''


def test_causal_attention_is_verified_faster_through_the_cli(tmp_path: Path) -> None:
    (tmp_path / "attn.py").write_text(ATTENTION.format(tri="tril"))
    res = redline("optimise", f"{tmp_path / 'attn.py'}::attention", "--budget", "1", "--json",
                  str(tmp_path / "r.json"), cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads((tmp_path / "r.json").read_text())
    (cand,) = doc["candidates"]
    assert cand["origin"] == "builtin:idioms" and cand["status"] == "ok", cand["reason"]
    assert doc["winner"]["id"] == cand["id"] and "+    return torch.nn.functional.scaled_dot_product_attention(q, " \
        "k, v, is_causal=True)" in doc["winner"]["diff"]


def test_a_mask_that_is_not_causal_keeps_its_exact_rewrite_and_loses_the_causal_one(tmp_path: Path) -> None:
    (tmp_path / "attn.py").write_text(ATTENTION.format(tri="triu"))
    res = redline("optimise", f"{tmp_path / 'attn.py'}::attention", "--budget", "2", "--json",
                  str(tmp_path / "r.json"), cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    exact, causal = json.loads((tmp_path / "r.json").read_text())["candidates"]
    assert "attn_mask=mask != 0" in exact["code"] and exact["status"] in ("ok", "not_faster"), exact["reason"]
    assert "is_causal=True" in causal["code"] and causal["status"] == "incorrect", causal["reason"]
