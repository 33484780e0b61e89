"""Benchmark: the compiler cache trusted workers share within a run (needs torch).

Run: .venv/bin/python tests/perf/bench_compile_cache.py
The same built-in torch.compile candidate of a CPU gelu_bias (96x1000) evaluated twice by one
evaluator, the second finding what the first compiled, side by side with a fresh evaluator that
compiles cold. Printed: the three evaluations' wall times and the ratio cold / warm. On CUDA the
warm case is what a variant's Nsight Compute run and the head-to-head baseline now get.

Then a candidate's build (Workers.build): an LLM-style candidate that builds an inline C++
extension at import (the adversarial suite's affine loop in C++), evaluated with a second timing
pair forced (confirm_below), once on its build
and once with every worker building for itself. Printed: both wall times and their ratio. On CUDA
the same build also serves its compute-sanitizer and Nsight Compute workers.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from redline.evaluator.evaluate import Evaluator
from redline.evaluator.models import EvalSettings
from redline.evaluator.proposers.builtin import torch_compile_code
from redline.evaluator.target import load_target

TESTS = Path(__file__).resolve().parent.parent
OPS = '''
import torch


def gelu_bias(x, b):
    y = x + b
    return 0.5 * y * (1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


def make_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(96, 1000, generator=g), torch.randn(1000, generator=g)
'''


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    (work / "pyproject.toml").write_text("[project]\nname = 'bench'\nversion = '0'\n")
    (work / "ops.py").write_text(OPS)
    target = load_target(f"{work / 'ops.py'}::gelu_bias")
    code = torch_compile_code(target, "default", None)
    assert code is not None

    def timed(ev: Evaluator, cid: str) -> float:
        t0 = time.perf_counter()
        result = ev.evaluate(cid, code, "builtin:torch.compile", trusted=True)
        assert result.status in ("ok", "not_faster"), result.reason
        return time.perf_counter() - t0

    shared = Evaluator(target, EvalSettings(device="cpu"))
    first, second = timed(shared, "c1"), timed(shared, "c2")
    shared.close()
    fresh = Evaluator(target, EvalSettings(device="cpu"))
    cold = timed(fresh, "c3")
    fresh.close()
    print(f"one evaluator: first {first:.1f} s, second (shared cache) {second:.1f} s; fresh evaluator {cold:.1f} s")
    print(f"cold / warm: {cold / second:.2f}x")
    candidate_build()
    return 0


def candidate_build() -> None:
    sys.path.insert(0, str(TESTS))
    from test_evaluator_targets import INLINE_CPP  # the affine loop in C++, built at import

    target = load_target(f"{TESTS / 'adversarial' / 'target.py'}::affine")
    walls = {}
    for case in ("one build", "a build per worker"):
        ev = Evaluator(target, EvalSettings(device="cpu", confirm_below=1e9))
        if case != "one build":
            ev.workers.build = lambda code: None  # type: ignore[method-assign]
        t0 = time.perf_counter()
        result = ev.evaluate("c", INLINE_CPP, "file:inline.py")
        walls[case] = time.perf_counter() - t0
        ev.close()
        assert result.status == "ok" and "two pairs" in result.reason, (result.status, result.reason)
    print(f"inline C++ candidate, two timing pairs: one build {walls['one build']:.1f} s, a build per worker "
          f"{walls['a build per worker']:.1f} s: {walls['a build per worker'] / walls['one build']:.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
