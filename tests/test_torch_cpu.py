"""The GPU paths' CPU twins: torch and Triton targets and candidates on CPU tensors, through the CLI.

The same evaluator code as on CUDA (tests/test_gpu.py on the device): Triton runs in its CPU
interpreter (TRITON_INTERPRET=1 set by the evaluator before triton is imported), torch.compile
uses Inductor's C++ backend, and the GPU test candidates that do not need streams keep their
statuses and reasons. CI installs the CPU build of torch and Triton (the `dev` extra).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import TESTS, WORKLOAD, redline
from redline.evaluator.archive import Archive
from redline.evaluator.models import CandidateResult
from redline.evaluator.selection import plain_compile_instead as _plain_compile_instead

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

# The CUDA candidates that mean the same on the CPU (the others are about streams and CUDA graphs).
EXPECT = {
    "triton_fused.py": ("not_faster", "does not clear"),  # correct; the interpreter is slow
    "exact_copy.py": ("not_faster", "does not clear"),
    "cached_output.py": ("rejected_exploit", "same buffer"),
    "low_precision.py": ("incorrect", "bfloat16 tolerance"),
}


def cpu_copy(src: Path, dst: Path) -> Path:
    """A device test's module on CPU tensors, at a shape that is not a multiple of the block."""
    text = src.read_text().replace('device="cuda"', 'device="cpu"').replace("2048, 4096", "96, 1000")
    dst.write_text(text.replace("(4096,", "(1000,"))
    return dst


def run(tmp_path: Path, spec: str, *args: str) -> dict:
    out = tmp_path / "report.json"
    res = redline("optimise", spec, "--device", "cpu", "--json", str(out), *args, cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(out.read_text())


def test_gpu_candidates_keep_their_verdicts_on_cpu_tensors(tmp_path: Path) -> None:
    ops = cpu_copy(TESTS / "gpu" / "ops.py", tmp_path / "ops.py")
    cands = tmp_path / "candidates"
    cands.mkdir()
    for name in EXPECT:
        shutil.copy(TESTS / "gpu" / "candidates" / name, cands / name)
    doc = run(tmp_path, f"{ops}::gelu_bias", "--candidates", str(cands), "--no-builtin", "--budget", "8")
    got = {c["origin"].removeprefix("file:"): c for c in doc["candidates"]}
    for name, (status, words) in EXPECT.items():
        assert got[name]["status"] == status and words in got[name]["reason"], (name, got[name]["reason"])
    # The Triton kernel ran (in the interpreter) and matched the reference on fresh inputs.
    assert got["triton_fused.py"]["speedup"] is not None
    assert doc["winner"] is None and "cuda" not in json.dumps(doc["hardware"]).lower()


# A candidate that tries to poison the compiler cache the trusted workers share (so that the
# torch.compile baseline it is timed against head-to-head runs slow code): under bubblewrap it cannot
# see the cache (a private /tmp); without, its write is caught. Were it to find the cache and go on,
# it would return a wrong result and fail the test.
POISON = """import glob, os
import torch

_found = glob.glob("/tmp/redline-compile-*")
for d in _found:
    with open(os.path.join(d, "inductor", "poison"), "w") as fh:
        fh.write("x")


def gelu_bias(x, b):
    y = x + b
    out = 0.5 * y * (1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))
    return out + 1 if _found else out
"""


def test_torch_compile_winner_is_timed_head_to_head_on_cpu(tmp_path: Path) -> None:
    ops = cpu_copy(TESTS / "gpu" / "ops.py", tmp_path / "ops.py")
    (tmp_path / "candidates").mkdir()
    (tmp_path / "candidates" / "poison.py").write_text(POISON)
    caches_before = set(Path("/tmp").glob("redline-compile-*"))
    doc = run(tmp_path, f"{ops}::gelu_bias", "--budget", "3", "--candidates", str(tmp_path / "candidates"))
    poison = next(c for c in doc["candidates"] if c["origin"] == "file:poison.py")
    assert poison["status"] in ("ok", "not_faster") or (
        poison["status"] == "rejected_exploit" and "outside the scratch" in poison["reason"]), poison["reason"]
    assert set(Path("/tmp").glob("redline-compile-*")) <= caches_before  # the shared cache is removed after the run
    approaches = {c["approach"] for c in doc["candidates"] if c["origin"] == "builtin:torch.compile"}
    assert approaches == {"torch.compile(default)", "torch.compile(max-autotune-no-cudagraphs)"}
    winner = doc["winner"]
    assert winner is not None and winner["speedup"] > 1.1 and "torch.compile(" in winner["diff"]
    assert winner["vs_compile_speedup"] is not None and winner["stronger_baseline"] in ("torch.compile", "eager")
    lo, hi = winner["vs_compile_ci95"]
    assert lo <= winner["vs_compile_speedup"] <= hi
    # Offered only if it is not surely slower than plain torch.compile (else that is offered).
    assert hi >= 1.0 or winner["vs_compile_speedup"] == 1.0
    assert winner["speedup_vs_stronger"] == min(winner["speedup"], winner["vs_compile_speedup"])


def test_triton_configuration_search_in_the_interpreter(tmp_path: Path) -> None:
    kernels = tmp_path / "kernels.py"
    shutil.copy(WORKLOAD / "model" / "kernels.py", kernels)
    inputs = cpu_copy(TESTS / "gpu" / "triton_inputs.py", tmp_path / "inputs.py")
    doc = run(tmp_path, f"{kernels}::gelu_bias_triton", "--inputs", f"{inputs}::make_inputs", "--budget", "6")
    configs = [c for c in doc["candidates"] if c["origin"] == "builtin:triton-config"]
    assert len(configs) == 6
    # Every launch configuration computes the same result: none is incorrect or fails to run.
    assert {c["status"] for c in configs} <= {"ok", "not_faster"}, [(c["approach"], c["reason"]) for c in configs]
    assert any("torch.compile: it cannot trace Triton kernels" in n for n in doc["notes"])


def result(cid: str, code: str, speedup: float) -> CandidateResult:
    return CandidateResult(id=cid, origin="builtin:torch.compile", status="ok", code=code, speedup=speedup,
                           speedup_ci95=(speedup * 0.97, speedup * 1.03))


def test_plain_torch_compile_is_offered_when_it_beats_the_winner_head_to_head() -> None:
    """The decision after the head-to-head run (its timing is what the tests above measure)."""
    archive = Archive()
    archive.add(result("c1", "PLAIN", 1.6))
    archive.add(result("c2", "VARIANT", 1.7))
    notes: list[str] = []
    assert _plain_compile_instead("c2", (0.9, 0.98), archive, "PLAIN", notes).id == "c1"  # type: ignore[union-attr]
    assert "offered instead" in notes[-1]
    assert _plain_compile_instead("c2", (0.95, 1.02), archive, "PLAIN", notes) is None  # not surely slower
    assert _plain_compile_instead("c2", (0.9, 0.98), Archive(), "PLAIN", notes) is None
    assert "not verified in this run" in notes[-1]


SWISH = '''
import torch


def swish_residual(x, r):
    return x * torch.sigmoid(x) * 1.5 + r


def make_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(1000, 999, dtype=torch.bfloat16, generator=g),
            torch.randn(1000, 999, dtype=torch.bfloat16, generator=g))
'''

SWISH_CANDIDATES = {
    # One rounding at the end instead of one per eager kernel: off eager by eager's own rounding.
    "fused.py": "xf = x.float()\n    return (xf * torch.sigmoid(xf) * 1.5 + r.float()).to(torch.bfloat16)",
    "reordered.py": "return (x * 1.5) * torch.sigmoid(x) + r",  # bf16 too, rounded in another order
    "fp8.py": "y = (x * torch.sigmoid(x)).to(torch.float8_e4m3fn).to(torch.bfloat16)\n    return y * 1.5 + r",
    "wrong_scale.py": "return x * torch.sigmoid(x) * 1.56 + r",
}


def test_half_precision_chains_are_judged_against_a_float32_oracle(tmp_path: Path) -> None:
    """Eager bf16 rounds each intermediate, so a fused rewrite misses it by up to eager's own error
    near zero (the kb_swish_residual failure on the H200); the harness accepts a candidate as close
    to the float32 result as eager is, and still rejects one that loses precision or is wrong."""
    (tmp_path / "ops.py").write_text(SWISH)
    cands = tmp_path / "candidates"
    cands.mkdir()
    for name, body in SWISH_CANDIDATES.items():
        (cands / name).write_text(f"def swish_residual(x, r):\n    {body}\n")
    doc = run(tmp_path, "ops.py::swish_residual", "--candidates", str(cands), "--no-builtin", "--budget", "4")
    got = {c["origin"].removeprefix("file:"): c for c in doc["candidates"]}
    for name in ("fused.py", "reordered.py"):
        assert got[name]["status"] in ("ok", "not_faster"), got[name]["reason"]
    for name in ("fp8.py", "wrong_scale.py"):
        assert got[name]["status"] == "incorrect", got[name]["reason"]
        assert "further off than eager bfloat16 itself" in got[name]["reason"]


def test_an_oracle_that_is_not_the_same_computation_is_ignored() -> None:
    from redline.evaluator.compare import Mismatch, compare
    from redline.evaluator.sandbox.redline_worker.codec import encode

    g = torch.Generator().manual_seed(0)
    x = torch.randn(4000, generator=g)
    xb = x.bfloat16()
    eager = xb * 9 - xb * 8  # each product rounded to bf16: cancellation leaves ~3% errors
    exact = x * 9 - x * 8
    fused = exact.bfloat16()
    with pytest.raises(Mismatch, match="beyond bfloat16 tolerance"):
        compare(encode(eager), encode(fused))
    # A float32 result of the same computation accepts the once-rounded output ...
    compare(encode(eager), encode(fused), oracle=encode(exact))
    # ... but not one that is 0.3 off in every seventh element.
    off = fused.clone()
    off[::7] += 0.3
    with pytest.raises(Mismatch, match="further off than eager"):
        compare(encode(eager), encode(off), oracle=encode(exact))
    # A float32 run that computes something else (the function branches on dtype) is no oracle:
    # the plain comparison's verdict stands.
    with pytest.raises(Mismatch) as exc:
        compare(encode(eager), encode(fused), oracle=encode(exact + 1))
    assert "float32 result" not in str(exc.value)
    # Outputs nested in a tuple or a dict are each judged against their own float32 result.
    compare(encode((1, {"y": eager})), encode((1, {"y": fused})), oracle=encode((1, {"y": exact})))
    with pytest.raises(Mismatch, match=r"output\[1\]\['y'\].*further off than eager"):
        compare(encode((1, {"y": eager})), encode((1, {"y": off})), oracle=encode((1, {"y": exact})))


def test_inputs_held_back_until_the_call_are_restored_bit_for_bit() -> None:
    """What the CUDA timer does to a call's inputs until the calling stream reaches the call (their bits
    inverted, then inverted back), run here on CPU tensors: views and arguments that share a storage are
    flipped once, every dtype comes back bit for bit, and while held back the values are unusable."""
    torch = pytest.importorskip("torch")
    from redline.evaluator.sandbox.redline_worker.memory import flip_bits, tensor_storages

    base = torch.randn(64, 33, dtype=torch.bfloat16)
    args = (base, base[:, 3:9], base.t(), torch.randn(100, dtype=torch.float64),
            torch.tensor([True, False, True]), torch.arange(7, dtype=torch.int32), 2.5, torch.empty(0))
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    storages = tensor_storages(list(args))
    assert len(storages) == 4  # base and its two views share one; the empty tensor has none
    assert all(flip_bits(st) for st in storages)
    assert not torch.equal(args[0], before[0]) and bool((args[3] != before[3]).all())
    assert args[4].all()  # a held-back False reads True
    for st in storages:
        flip_bits(st)
    for got, want in zip(args, before, strict=True):
        if isinstance(got, torch.Tensor):
            assert got.dtype == want.dtype and torch.equal(got.contiguous().view(torch.uint8),
                                                           want.contiguous().view(torch.uint8))
        else:
            assert got == want


def test_on_a_busy_machine_thread_pools_get_the_free_cores_and_the_verdict_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spinning busy loops on all cores but one: torch's OpenMP pool at its default size then waits for
    parked partner threads (a 0.3 ms call measured at up to 75 ms, torch.compile 'not faster').
    The workers get the one free core, the note says so, and torch.compile's win is verified."""
    import subprocess
    import sys
    import time

    from redline.evaluator.contention import busy_cores

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # a value already set is kept, and nothing is noted
    ops = cpu_copy(TESTS / "gpu" / "ops.py", tmp_path / "ops.py")
    cores = len(os.sched_getaffinity(0))
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(1, cores - 1))]
    try:
        deadline = time.monotonic() + 60
        while (busy_cores(0.2) or 0.0) < len(loops) - 0.3:  # the loops are spinning (a condition, not a delay)
            assert time.monotonic() < deadline, "the busy loops did not start"
        doc = run(tmp_path, f"{ops}::gelu_bias", "--budget", "1")
    finally:
        for p in loops:
            p.kill()
            p.wait()
    note = next(n for n in doc["notes"] if "OMP_NUM_THREADS=" in n)
    assert "OMP_NUM_THREADS=1 " in note, note
    assert doc["winner"] is not None and doc["winner"]["speedup"] > 1.1, [c["reason"] for c in doc["candidates"]]


def test_thread_pools_keep_their_size_where_the_machine_is_free_or_the_user_chose(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from redline.evaluator.contention import pool_threads, thread_cap

    assert thread_cap(8, 0.2) is None and thread_cap(8, None) is None  # idle, or no counters: the default
    assert thread_cap(8, 0.7) == 7 and thread_cap(2, 1.1) == 1 and thread_cap(2, 3.0) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert pool_threads() == (None, "")
