"""py-spy recordings of real programs, read back through every reader path."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from helpers import TESTS, py_spy_record, redline
from redline.profilers import read, report
from redline.profilers.speedscope import read_speedscope


def _key(frame: str) -> str:
    """`name (dir/file.py:12)` -> `name@file.py`"""
    name, _, where = frame.partition(" (")
    return name + "@" + where.rstrip(")").split(":")[0].rsplit("/", 1)[-1]


def independent_shares(raw: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Self and total share per function name, counted straight from collapsed-stack lines."""
    self_c: Counter[str] = Counter()
    total_c: Counter[str] = Counter()
    n = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack.strip():
            continue
        c = int(count)
        names = [_key(f) for f in stack.split(";")]
        self_c[names[-1]] += c
        for name in set(names):
            total_c[name] += c
        n += c
    return {k: v / n for k, v in self_c.items()}, {k: v / n for k, v in total_c.items()}


def shares(path: Path, root: Path) -> dict[str, tuple[float, float, int, int]]:
    out = {}
    for h in report([path], root).hotspots:
        out[h.function + "@" + Path(h.file).name] = out[h.function] = (h.self_fraction, h.total_fraction, h.line, h.end_line)
    return out


def test_raw_hotspots_match_an_independent_count(cpu_recordings: dict[str, Path]) -> None:
    self_ref, total_ref = independent_shares(cpu_recordings["raw"])
    got = shares(cpu_recordings["raw"], TESTS)
    for name in ("Grid.relax@cpu_work.py", "checksum@cpu_work.py", "main@cpu_work.py"):
        assert abs(got[name][0] - self_ref.get(name, 0.0)) < 1e-9, name
        assert abs(got[name][1] - total_ref[name]) < 1e-9, name
    # Both hot functions found, in their order of work. The share itself is a sampled quantity: ~180
    # samples give a standard error near 0.03, and checksum's share ranges 0.13-0.24 between recordings
    # on the 2-core VM, so the floor sits well below that range rather than inside it.
    assert got["Grid.relax"][0] > 0.4 and got["Grid.relax"][0] > got["checksum"][0] > 0.05


def test_speedscope_agrees_with_raw_of_the_same_program(cpu_recordings: dict[str, Path]) -> None:
    self_ref, _ = independent_shares(cpu_recordings["raw"])
    got = shares(cpu_recordings["speedscope"], TESTS)
    n_raw = sum(int(line.rpartition(" ")[2]) for line in cpu_recordings["raw"].read_text().splitlines() if line.strip())
    n_ss = sum(len(p.get("samples", [])) for p in json.loads(cpu_recordings["speedscope"].read_text())["profiles"])
    # Two recordings of one program: the same split within sampling noise (five standard errors of
    # the difference of two binomial shares; ~150 samples each at 200 Hz).
    for name in ("Grid.relax@cpu_work.py", "checksum@cpu_work.py"):
        p_ = self_ref[name]
        tolerance = 5 * (p_ * (1 - p_) * (1 / n_raw + 1 / n_ss)) ** 0.5 + 0.02
        assert abs(got[name][0] - p_) < tolerance, (name, got[name], p_, n_raw, n_ss)
    assert got["main@cpu_work.py"][1] > 0.9


def test_spans_come_from_tree_sitter(cpu_recordings: dict[str, Path]) -> None:
    src = (TESTS / "workloads" / "cpu_work.py").read_text().splitlines()
    for path in cpu_recordings.values():
        got = shares(path, TESTS)
        line, end = got["Grid.relax"][2], got["Grid.relax"][3]
        assert src[line - 1].strip().startswith("def relax")
        assert src[end - 1].strip() == "return acc"
        assert src[got["checksum"][2] - 1].startswith("def checksum")


def test_nolineno_form_resolves_by_name(cpu_recordings: dict[str, Path]) -> None:
    got = shares(cpu_recordings["nolineno"], TESTS)
    assert got["Grid.relax"][0] > 0.4
    src = (TESTS / "workloads" / "cpu_work.py").read_text().splitlines()
    assert src[got["checksum"][2] - 1].startswith("def checksum")


def test_per_line_weights_point_at_the_loop(cpu_recordings: dict[str, Path]) -> None:
    spot = next(h for h in report([cpu_recordings["speedscope"]], TESTS).hotspots if h.function == "Grid.relax")
    src = (TESTS / "workloads" / "cpu_work.py").read_text().splitlines()
    hottest = max(spot.lines, key=lambda lw: lw.self_weight)
    assert "for i in range" in src[hottest.line - 1] or "acc +=" in src[hottest.line - 1]
    assert abs(sum(lw.self_weight for lw in spot.lines) - spot.self_weight) < 1e-9


def test_standard_library_time_is_attributed(tmp_path: Path) -> None:
    trace = py_spy_record(TESTS / "workloads" / "stdlib_work.py", tmp_path / "std.json", "speedscope")
    spots = report([trace], TESTS).hotspots
    top = spots[0]
    assert "json" in top.file and Path(top.file).is_absolute(), top
    roundtrip = next(h for h in spots if h.function == "roundtrip")
    assert roundtrip.file == "workloads/stdlib_work.py" and roundtrip.total_fraction > 0.9
    assert any("json" in c.file for c in roundtrip.callees)


def test_subprocesses_give_one_profile_per_process(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        "import subprocess, sys\n"
        f"subprocess.run([sys.executable, {str(TESTS / 'workloads' / 'cpu_work.py')!r}], check=True)\n"
        f"subprocess.run([sys.executable, {str(TESTS / 'workloads' / 'cpu_work.py')!r}], check=True)\n")
    trace = py_spy_record(script, tmp_path / "sub.json", "speedscope", extra=("--subprocesses",))
    doc = json.loads(trace.read_text())
    assert len({p["name"].split(" Thread")[0] for p in doc["profiles"]}) >= 2
    got = shares(trace, TESTS)
    assert got["Grid.relax"][0] > 0.35


def test_native_frames_without_files_are_kept(tmp_path: Path) -> None:
    trace = py_spy_record(TESTS / "workloads" / "stdlib_work.py", tmp_path / "native.json", "speedscope",
                          extra=("--native",))
    profile = read_speedscope(trace)
    assert any(f.kind == "native" for f in profile.frames)
    assert report([trace], TESTS).hotspots


def test_evented_speedscope(tmp_path: Path) -> None:
    doc = {"$schema": "https://www.speedscope.app/file-format-schema.json",
           "shared": {"frames": [{"name": "main", "file": "app.py", "line": 1}, {"name": "work", "file": "app.py", "line": 4}]},
           "profiles": [{"type": "evented", "name": "t", "unit": "milliseconds", "startValue": 0, "endValue": 10,
                         "events": [{"type": "O", "frame": 0, "at": 0}, {"type": "O", "frame": 1, "at": 2},
                                    {"type": "C", "frame": 1, "at": 8}, {"type": "C", "frame": 0, "at": 10}]}]}
    (tmp_path / "app.py").write_text("def main():\n    work()\n\ndef work():\n    pass\n")
    path = tmp_path / "ev.speedscope.json"
    path.write_text(json.dumps(doc))
    got = {h.function: h for h in report([path], tmp_path).hotspots}
    assert abs(got["work"].self_weight - 0.006) < 1e-12 and abs(got["main"].self_weight - 0.004) < 1e-12
    assert got["work"].self_fraction == 0.6 and got["main"].total_fraction == 1.0


def test_several_traces_merge(cpu_recordings: dict[str, Path]) -> None:
    one = read(cpu_recordings["speedscope"])
    both = report([cpu_recordings["speedscope"], cpu_recordings["speedscope"]], TESTS)
    assert abs(both.total_weight - 2 * one.total("cpu")) < 1e-9


def test_recursion_counts_once_per_sample(tmp_path: Path) -> None:
    raw = tmp_path / "rec.txt"
    raw.write_text("main (app.py:1);f (app.py:3);f (app.py:3);f (app.py:3) 10\nmain (app.py:1) 10\n")
    (tmp_path / "app.py").write_text("def main():\n    f()\ndef f():\n    f()\n")
    got = {h.function: h for h in report([raw], tmp_path).hotspots}
    assert got["f"].total_fraction == 0.5 and got["f"].self_fraction == 0.5


# A module whose parser calls one helper by name, one through a tuple and one through `re.sub`; a class whose
# method calls another of its methods on self. Line numbers matter: the recording below names them.
SPREAD_LIB = """import re


def parse(text):
    out = [pair(t) for t in text]
    for step in STEPS:
        step(text)
    return re.sub("a", fix, text), out


def pair(t):
    return t


def count(text):
    return len(text)


def fix(m):
    return m.group(0)


STEPS = (count,)


class Reader:
    def read(self):
        return self.step()

    def step(self):
        return 1
"""


def test_module_share_follows_the_calls_a_compiler_compiles_with_the_function(tmp_path: Path) -> None:
    """`module_fraction` adds what a function's compiled callees take: a module function it calls by name,
    a method of its class it calls on self; not one it reaches through a variable or a library's callback
    (Cython and mypyc compile neither with it)."""
    (tmp_path / "lib.py").write_text(SPREAD_LIB)
    raw = tmp_path / "spread.txt"
    raw.write_text("parse (lib.py:5) 10\n"
                   "parse (lib.py:5);pair (lib.py:12) 20\n"
                   "parse (lib.py:7);count (lib.py:16) 10\n"
                   "parse (lib.py:8);sub (/usr/lib/python3.11/re/__init__.py:185);fix (lib.py:20) 5\n"
                   "Reader.read (lib.py:28);Reader.step (lib.py:31) 10\n")
    got = {h.function: h for h in report([raw], tmp_path).hotspots}
    assert got["parse"].inclusive_fraction == pytest.approx(15 / 55)  # its own lines and re.sub's
    assert got["parse"].module_fraction == pytest.approx(30 / 55)  # its own lines and pair's
    assert got["Reader.read"].inclusive_fraction == 0 and got["Reader.read"].module_fraction == pytest.approx(10 / 55)
    assert got["count"].module_fraction == got["count"].inclusive_fraction == pytest.approx(10 / 55)


def test_module_and_class_code_at_a_def_line_is_in_no_function(tmp_path: Path) -> None:
    # Importing a module or running a class body executes its def statements: a sample there is the
    # module's or the class's, not the function's (which may never be called).
    (tmp_path / "app.py").write_text("import re\n\ndef unused(x):\n    return x\n\nclass Table:\n"
                                     "    def row(self):\n        return 1\n\ndef main():\n    Table().row()\n")
    raw = tmp_path / "imp.txt"
    raw.write_text("<module> (app.py:3) 5\n<module> (app.py:6);Table (app.py:7) 5\n"
                   "<module> (app.py:11);main (app.py:11);Table.row (app.py:8) 10\n")
    got = {h.function: h for h in report([raw], tmp_path).hotspots}
    assert "unused" not in got and got["Table.row"].total_fraction == 0.5, sorted(got)
    # The class body's sample at row's def line is the class body's: row keeps only its own samples.
    assert got["Table"].self_fraction == 0.25 and got["Table.row"].self_fraction == 0.5 and not got["Table"].callees


def test_only_the_workspaces_own_files_are_its_code(tmp_path: Path) -> None:
    """A real recording of a package that spends its time in `re` (whose file is also `__init__.py`)
    and in a library under the workspace's `.venv`: neither is the workspace's code, so no function of
    the package that was never called shows up hot (`re/__init__.py:166` once read as the package's
    `__init__.py:166`, and `redline capture --top` chose that never-called function)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    filler = "".join(f"def never_called_{i}(x):\n" + "    x += 1\n" * 20 + "    return x\n\n\n" for i in range(20))
    (pkg / "__init__.py").write_text(
        "import re\nimport slowlib\n\n\n" + filler
        + "def work():\n    n = 0\n    for i in range(60000):\n        n += bool(re.match('[a-z]+[0-9]', f'ab{i}'))\n"
        "        n += slowlib.spin(i)\n    return n\n")
    site = tmp_path / ".venv" / "lib" / "site-packages"
    site.mkdir(parents=True)
    (site / "slowlib.py").write_text("def spin(i):\n    return sum(range(i % 50))\n")
    script = tmp_path / "main.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(site)!r})\nimport pkg\nprint(pkg.work())\n")
    trace = py_spy_record(script, tmp_path / "t.json", "speedscope")
    spots = report([trace], tmp_path).hotspots
    own = {h.function for h in spots if not Path(h.file).is_absolute() and not h.file.startswith("<")}
    assert own <= {"work", "<module>"} and "work" in own, sorted(own)
    match = next(h for h in spots if h.function == "match")
    assert match.file.endswith("re/__init__.py") and Path(match.file).is_absolute(), match
    spin = next(h for h in spots if h.function == "spin")
    assert spin.file == str(site / "slowlib.py"), spin


def test_profile_command_writes_trace_and_passes_exit_code(tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text("import sys\ns = 0\nfor i in range(2_000_000):\n    s += i\nsys.exit(7)\n")
    res = redline("profile", "--", "python3", str(script), cwd=tmp_path)
    assert res.returncode == 7, res.stderr
    traces = list((tmp_path / ".redline").glob("profile-*.speedscope.json"))
    assert len(traces) == 1 and "fails.py" in res.stdout
    res = redline("profile", "--format", "raw", "-o", "t.txt", "--", "python3", str(script), cwd=tmp_path)
    assert res.returncode == 7 and (tmp_path / "t.txt").read_text().strip()


def test_hotspots_json_contract(cpu_recordings: dict[str, Path]) -> None:
    res = redline("hotspots", str(cpu_recordings["speedscope"]), "--root", str(TESTS), "--json", "--top", "3")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert set(doc) >= {"traces", "total_weight", "unit", "hotspots"} and doc["unit"] == "seconds"
    spots = doc["hotspots"]
    assert len(spots) == 3
    assert [s["self_fraction"] for s in spots] == sorted((s["self_fraction"] for s in spots), reverse=True)
    first = spots[0]
    assert first["file"] == "workloads/cpu_work.py" and first["function"] == "Grid.relax"
    assert {"line", "end_line", "total_fraction", "self_weight", "kind", "callers", "callees", "kernels"} <= set(first)
    assert first["callers"][0]["function"] == "main"
