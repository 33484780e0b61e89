"""Bad traces: one clear line on stderr, exit 2, never a traceback; fuzzing shows only ParseError escapes."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
from helpers import GPU, redline
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from redline.profilers import ParseError, read

SPEEDSCOPE = {"$schema": "https://www.speedscope.app/file-format-schema.json",
              "shared": {"frames": [{"name": "a", "file": "a.py", "line": 1}]},
              "profiles": [{"type": "sampled", "name": "t", "unit": "seconds", "startValue": 0, "endValue": 1,
                            "samples": [[0], [0]], "weights": [0.5, 0.5]}]}


def variant(**change: object) -> bytes:
    doc = json.loads(json.dumps(SPEEDSCOPE))
    doc["profiles"][0].update(change)
    return json.dumps(doc).encode()


BAD = {
    "truncated.speedscope.json": json.dumps(SPEEDSCOPE).encode()[:90],
    "index.speedscope.json": variant(samples=[[0], [5]]),
    "lengths.speedscope.json": variant(weights=[1.0]),
    "negative.speedscope.json": variant(weights=[-1.0, 1.0]),
    "unit.speedscope.json": variant(unit="parsecs"),
    "wrongtype.speedscope.json": variant(samples="lots"),
    "absurd.txt": b"main (a.py:1) 99999999999999999999999999\n",
    "empty.txt": b"",
    "nocount.txt": b"main (a.py:1);f (a.py:2)\n",
    "random.bin": bytes(random.Random(1).randrange(256) for _ in range(2000)),
    "torch_truncated.json": (GPU / "torch_trace_kernels.json").read_bytes()[:5000] if GPU.exists() else b"{",
    "torch_badts.json": json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1}]}).encode(),
    "torch.json.gz": gzip.compress(b'{"traceEvents": [')[:-4],
    "ncu.csv": b'"ID","Process ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n"0","1","k","S","Duration","parsecs","3"\n',
    "empty.sqlite": b"SQLite format 3\x00" + b"\x00" * 100,
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_trace_is_one_line_and_exit_2(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(BAD[name])
    res = redline("hotspots", str(path))
    assert res.returncode == 2, res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert str(path) in lines[0]


def test_directory_and_missing_file(tmp_path: Path) -> None:
    for target, words in ((tmp_path, "directory"), (tmp_path / "nope.json", "not found")):
        res = redline("hotspots", str(target))
        assert res.returncode == 2 and words in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_errors_name_the_place(tmp_path: Path) -> None:
    path = tmp_path / "index.speedscope.json"
    path.write_bytes(BAD["index.speedscope.json"])
    with pytest.raises(ParseError) as info:
        read(path)
    assert "profiles[0].samples" in info.value.place and "below 1" in info.value.expected
    path.write_bytes(BAD["lengths.speedscope.json"])
    with pytest.raises(ParseError, match="as many weights as samples"):
        read(path)


SEEDS = [p for p in sorted(GPU.glob("*")) if p.is_file() and p.suffix in (".json", ".csv", ".sqlite")] if GPU.exists() else []
SEEDS_BYTES = {p.name: p.read_bytes() for p in SEEDS if p.stat().st_size < 2_000_000}
SEEDS_BYTES["seed.speedscope.json"] = json.dumps(SPEEDSCOPE).encode()
SEEDS_BYTES["seed.txt"] = b"main (a.py:1);f (a.py:2) 3\nmain (a.py:1) 1\n"


# The examples are the same on every run (tests/conftest.py's default profile); `pytest
# --hypothesis-profile fuzz tests/test_profilers_invalid.py` searches further, at random. What a search
# found is pinned below.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.sampled_from(sorted(SEEDS_BYTES)), cuts=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255),
       st.sampled_from(["flip", "cut", "insert", "delete"])), min_size=1, max_size=4))
@example(seed="nsys_kernels.sqlite", cuts=[(0.140625, 128, "flip")])  # a table name that is not UTF-8
def test_fuzzed_traces_raise_only_parse_error(tmp_path: Path, seed: str, cuts: list[tuple[float, int, str]]) -> None:
    data = bytearray(SEEDS_BYTES[seed])
    for where, byte, op in cuts:
        i = int(where * (len(data) - 1)) if data else 0
        if op == "flip" and data:
            data[i] = byte
        elif op == "cut":
            del data[i:]
        elif op == "insert":
            data[i:i] = bytes([byte]) * 3
        elif data:
            del data[i:i + 64]
    path = tmp_path / seed
    path.write_bytes(bytes(data))
    try:
        read(path)
    except ParseError:
        pass
