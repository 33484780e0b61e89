"""The recorded H200 traces in tests/fixtures, read through each reader.

Expected figures are computed in the test straight from the files (json / sqlite / csv), not
copied from redline's own output.
"""

from __future__ import annotations

import csv
import json
import sqlite3

import pytest
from helpers import GPU, WORKLOAD, redline
from redline.profilers import Hotspot, read, report


def by_name(spots: list[Hotspot], function: str, kind: str = "gpu") -> Hotspot:
    return next(h for h in spots if h.function == function and h.kind == kind)


def test_torch_trace_gpu_time_lands_on_python_functions() -> None:
    events = json.loads((GPU / "torch_trace_kernels.json").read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    gelu_us = sum(e["dur"] for e in kernels if e["name"] == "gelu_bias_kernel")
    total_us = sum(e["dur"] for e in kernels)
    spots = report([GPU / "torch_trace_kernels.json"], WORKLOAD).hotspots
    kernel = by_name(spots, "gelu_bias_kernel")
    assert kernel.file == "model/kernels.py" and (kernel.line, kernel.end_line) == (14, 23)
    assert kernel.kernels[0].name == "gelu_bias_kernel" and kernel.kernels[0].count == 2
    assert kernel.kernels[0].time_s == pytest.approx(gelu_us * 1e-6)
    assert kernel.self_fraction == pytest.approx(gelu_us / total_us)
    launcher = by_name(spots, "gelu_bias_triton")
    assert launcher.kernels[0].name == "gelu_bias_kernel" and launcher.total_fraction == pytest.approx(gelu_us / total_us)
    # kernels whose launch call falls inside a gelu_bias python_function event
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("cat") == "python_function" and e["name"].endswith(": gelu_bias")]
    launches = {e["args"]["correlation"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and any(a <= e["ts"] <= b for a, b in spans)}
    eager = by_name(spots, "gelu_bias")
    assert sum(k.count for k in eager.kernels) == sum(1 for k in kernels if k["args"]["correlation"] in launches)
    assert len(spans) == 2 and len(eager.kernels) >= 5
    step = by_name(spots, "step")
    assert step.total_fraction == pytest.approx(1.0)
    cpu = by_name(spots, "gelu_bias", "cpu")
    assert cpu.file == "model/kernels.py" and cpu.total_fraction > cpu.self_fraction


def test_torch_trace_gz_reads_the_same_as_plain(tmp_path) -> None:
    import gzip
    import shutil

    gz = tmp_path / "t.json.gz"
    with (GPU / "torch_trace_kernels.json").open("rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    a = report([GPU / "torch_trace_kernels.json"], WORKLOAD).hotspots
    b = report([gz], WORKLOAD).hotspots
    assert [(h.function, h.self_weight) for h in a] == [(h.function, h.self_weight) for h in b]


def test_torch_ops_trace_large() -> None:
    spots = report([GPU / "torch_trace_ops.json.gz"], WORKLOAD).hotspots
    assert by_name(spots, "softmax_naive").file == "bench/ops.py"


@pytest.mark.parametrize("name", ["nsys_kernels.sqlite", "nsys_kernels_backtrace.sqlite"])
def test_nsight_systems_kernels_and_times(name: str) -> None:
    db = sqlite3.connect(GPU / name)
    rows = db.execute("select s.value, count(*), sum(k.end - k.start) from CUPTI_ACTIVITY_KIND_KERNEL k "
                      "join StringIds s on s.id = k.shortName group by 1").fetchall()
    expect = {n: (c, t * 1e-9) for n, c, t in rows}
    spots = report([GPU / name], WORKLOAD).hotspots
    gelu = by_name(spots, "gelu_bias_kernel")
    assert gelu.file == "model/kernels.py" and gelu.line == 14
    assert (gelu.kernels[0].count, gelu.kernels[0].time_s) == (expect["gelu_bias_kernel"][0],
                                                                pytest.approx(expect["gelu_bias_kernel"][1]))
    eager = by_name(spots, "vectorized_elementwise_kernel")
    assert eager.file == "" and eager.kernels[0].count == expect["vectorized_elementwise_kernel"][0]
    total = sum(t for _, t in expect.values())
    assert sum(h.self_weight for h in spots) == pytest.approx(total)


def test_nsight_systems_callchains_become_native_frames() -> None:
    profile = read(GPU / "nsys_kernels_backtrace.sqlite")
    assert sum(1 for f in profile.frames if f.kind == "native") > 10
    plain = read(GPU / "nsys_kernels.sqlite")
    assert not any(f.kind == "native" for f in plain.frames)


def test_nsight_compute_details_and_raw_agree() -> None:
    rows = list(csv.DictReader((GPU / "ncu_kernels_details.csv").open()))
    durations = [float(r["Metric Value"]) for r in rows if r["Metric Name"] == "Duration"
                 and r["Kernel Name"] == "gelu_bias_kernel"]
    for page in ("ncu_kernels_details.csv", "ncu_kernels_raw.csv"):
        spots = report([GPU / page], WORKLOAD).hotspots
        k = by_name(spots, "gelu_bias_kernel").kernels[0]
        assert k.count == len(durations) == 2
        assert k.time_s == pytest.approx(sum(durations) * 1e-6, rel=1e-2)
        assert 0 < k.metrics["Memory Throughput"] <= 100
    details = by_name(report([GPU / "ncu_kernels_details.csv"], WORKLOAD).hotspots, "rmsnorm_kernel").kernels[0]
    assert details.metrics["Achieved Occupancy"] == pytest.approx(
        sum(float(r["Metric Value"]) for r in rows if r["Metric Name"] == "Achieved Occupancy"
            and r["Kernel Name"] == "rmsnorm_kernel") / 2)


def test_nsight_compute_source_counters_per_line() -> None:
    spots = report([GPU / "ncu_kernels_details.csv", GPU / "ncu_kernels_source_cuda_sass.csv"], WORKLOAD).hotspots
    gelu = by_name(spots, "gelu_bias_kernel")
    assert gelu.kernels[0].time_s > 0  # the details page's time wins over stall samples
    lines = {lw.line: lw.metrics for lw in gelu.lines}
    assert all(14 <= ln <= 23 for ln in lines) and lines
    hottest = max(lines, key=lambda ln: lines[ln].get("Warp Stall Sampling (All Samples)", 0))
    assert hottest in (18, 19, 23)  # loads and the store: a memory-bound kernel stalls there
    listing_only = read(GPU / "ncu_kernels_source_cuda.csv")
    assert listing_only.line_metrics == {}


def test_ncu_ops_eager_kernels_have_no_source() -> None:
    spots = report([GPU / "ncu_ops_details.csv"], WORKLOAD).hotspots
    assert sum(h.kernels[0].count for h in spots if h.kernels and h.self_weight > 0) == 14


def test_nsys_rep_without_nsys_is_one_clear_error(tmp_path) -> None:
    fake = tmp_path / "run.nsys-rep"
    fake.write_bytes(b"\x00binary report")
    res = redline("hotspots", str(fake))
    if res.returncode == 0:
        pytest.skip("nsys is installed here")
    assert res.returncode == 2 and "nsys export --type sqlite" in res.stderr and "Traceback" not in res.stderr


def test_ncu_rep_without_ncu_is_one_clear_error() -> None:
    res = redline("hotspots", str(GPU / "ncu_kernels.ncu-rep"), "--root", str(WORKLOAD))
    if res.returncode == 0:
        pytest.skip("ncu is installed here")
    assert res.returncode == 2 and "ncu --import" in res.stderr and len(res.stderr.strip().splitlines()) == 1
