"""The real-code corpus: pure-Python libraries (pinned in the dev extra) chosen for the objects they
pass, each with a realistic workload (tests/corpus/work_*.py). A library's sources are copied into a
scratch workspace as a user's own code; there it is profiled and its hottest functions captured with
the defaults, and each captured target gets two candidates through the real CLI: an identical copy
(must be `not_faster`) and a planted wrong rewrite, the original with its result changed on about a
quarter of the distinct captured calls (must be `incorrect`). tests/perf/bench_corpus.py runs it all; tests/test_corpus.py
runs a fast subset in CI.
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Library:
    name: str  # the distribution, as pinned
    packages: tuple[str, ...]  # the import packages copied into the workspace
    scale: int  # the workload's argument: about two seconds of work here
    objects: str  # what its hot functions pass (why it is in the corpus)


LIBRARIES = [
    Library("sqlparse", ("sqlparse",), 600, "token trees whose nodes hold their parents"),
    Library("python-dateutil", ("dateutil",), 20000, "a parser result kept in __slots__, timezones"),
    Library("chardet", ("chardet",), 600, "byte buffers, probers holding loggers and enums"),
    Library("markdown", ("markdown",), 600, "compiled regexes, element trees, processor registries"),
    Library("mistune", ("mistune",), 1200, "regex-driven parser state objects"),
    Library("networkx", ("networkx",), 40, "dict-of-dicts graphs"),
    Library("tabulate", ("tabulate",), 800, "mixed rows, column type inference"),
    Library("pyparsing", ("pyparsing",), 1500, "parser elements holding parse actions, results objects"),
    Library("humanize", ("humanize",), 40000, "numbers, timedeltas, translations"),
    Library("marshmallow", ("marshmallow",), 6000, "schemas and field objects, validation errors"),
    Library("pycparser", ("pycparser",), 400, "AST nodes in __slots__, lexer tokens, coordinates"),
    Library("sortedcontainers", ("sortedcontainers",), 120, "methods that change their object's lists in place"),
    Library("pygments", ("pygments",), 400, "regex lexers yielding tokens from generators, token types"),
    Library("tomli", ("tomli",), 5000, "a parser passing positions through str, dates, nested tables"),
    Library("PyYAML", ("yaml",), 400, "scanner, parser and composer objects, marks, events"),
    Library("jinja2", ("jinja2",), 2500, "a compiled template's runtime: contexts, loop objects, Markup"),
]


def bench_arguments() -> argparse.ArgumentParser:
    """The options every corpus benchmark takes: --top N functions, --scale X of the workload, --only NAMES."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", default="", help="comma-separated library names (default: all)")
    return ap


def libraries(only: str) -> list[Library]:
    return [lib for lib in LIBRARIES if not only or lib.name in only.split(",")]


def workspace(lib: Library, root: Path) -> Path:
    """`root` as a user's project: the library's sources and its workload as work.py."""
    root.mkdir(parents=True, exist_ok=True)
    for package in lib.packages:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.origin is not None, f"{lib.name} is not installed (pip install -e '.[dev]')"
        src = Path(spec.origin).parent
        shutil.copytree(src, root / package, ignore=shutil.ignore_patterns("__pycache__", "tests", "*.so"))
    shutil.copy(HERE / f"work_{lib.packages[0] if lib.name != 'python-dateutil' else 'dateutil'}.py", root / "work.py")
    (root / "redline.toml").write_text("")
    return root


def redline(*args: str, cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "redline.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def alternate(lib: Library, plain: Path, changed: Path, scale: float = 1.0,
              env: dict[str, str] | None = None) -> tuple[str, bool, float]:
    """The workload run in `plain` and in `changed` (a copy of it with some modules changed), alternating
    five times after a first run of each (which writes the bytecode and builds what the changed copy
    compiles on first use): ("outputs identical, 1.55 s -> 1.46 s (1.06x)", whether the changed copy
    warned that something compiled runs as plain Python, the ratio of the median times)."""
    n = str(max(1, int(lib.scale * scale)))
    # Both sides with their bytecode cached, as an installed program runs (this machine's environment
    # sets PYTHONDONTWRITEBYTECODE, which would compile every module on every run).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | (env or {})

    def run(where: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
        t = time.perf_counter()
        done = subprocess.run([sys.executable, "work.py", n], cwd=where, env=env, capture_output=True, text=True)
        return time.perf_counter() - t, done

    run(plain)
    fell_back = "runs as plain Python" in run(changed)[1].stderr
    times: dict[Path, list[float]] = {plain: [], changed: []}
    outputs: dict[Path, str] = {}
    for _ in range(5):
        for where in (plain, changed):
            took, done = run(where)
            times[where].append(took)
            outputs[where] = done.stdout if done.returncode == 0 else f"exit {done.returncode}: {done.stderr[-300:]}"
    before, after = statistics.median(times[plain]), statistics.median(times[changed])
    same = "outputs identical" if outputs[plain] == outputs[changed] else "OUTPUTS DIFFER"
    return f"{same}, {before:.2f} s -> {after:.2f} s ({before / after:.2f}x)", fell_back, before / after


def source_of(file: Path, qualname: str) -> tuple[str, bool]:
    """The function's source as a candidate file takes it (a method as a top-level `def`, decorators
    kept), and whether it is a plain function or method (not a static or class method)."""
    tree = ast.parse(file.read_text())
    node: Any = tree
    for part in qualname.split("."):  # the last definition of a name is the one Python binds (not @overload stubs)
        node = [n for n in ast.iter_child_nodes(node)
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == part][-1]
    lines = file.read_text().splitlines(keepends=True)
    start = min([d.lineno for d in node.decorator_list] + [node.lineno])
    plain = not any(isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod", "property")
                    for d in node.decorator_list)
    return textwrap.dedent("".join(lines[start - 1:node.end_lineno])), plain


KEY = '''
def _planted_key(value, depth=0):
    """A key from the atoms a call's arguments hold (the same for the same call in any process)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, (str, bytes, bytearray)):
        return len(value) + (value[0] if isinstance(value, (bytes, bytearray)) and value else
                             ord(value[0]) if isinstance(value, str) and value else 0)
    if depth > 2:
        return 0
    if isinstance(value, dict):
        return sum(_planted_key(v, depth + 1) for v in list(value.values())[:20])
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(_planted_key(v, depth + 1) for v in list(value)[:20])
    return 0


def _planted_call_key(args, kwargs):
    return _planted_key([args[1:] if args and hasattr(args[0], "__dict__") else args, kwargs])
'''

CHANGE = '''

_PLANTED_KEYS = {keys!r}


def _planted_change(result, args):
    if isinstance(result, enum.Enum) and len(type(result)) > 1:
        members = list(type(result))
        return members[(members.index(result) + 1) % len(members)]
    if isinstance(result, bool):
        return not result
    if isinstance(result, int):
        return result + 1
    if isinstance(result, float):
        return result + 1.0 + abs(result) * 1e-3
    if isinstance(result, str):
        return result + "~"
    if isinstance(result, bytes):
        return result + b"~"
    if isinstance(result, list):
        return [*result, None]
    if isinstance(result, tuple):
        return (*result, None)
    if isinstance(result, dict):
        return {{**result, "__planted__": 1}}
    target = result if result is not None else (args[0] if args else None)
    if target is not None and isinstance(getattr(target, "__dict__", None), dict):
        target.__dict__["_planted"] = 1
        return result
    if isinstance(target, list):
        target.append(None)
        return result
    return 1 if result is None else None


import enum
import inspect
'''

WRAPPER = '''
def {name}(*args, **kwargs):
    chosen = _planted_call_key(args, kwargs) in _PLANTED_KEYS  # before the call, which may change them
    result = _planted_inner(*args, **kwargs)
    if chosen:
        if inspect.isgenerator(result):
            return iter([*result, None])
        return _planted_change(result, args)
    return result
'''


def planted(source: str, name: str, keys: set[int]) -> str:
    """The original with its result changed on the calls whose key (made from the atoms their arguments
    hold, so the same call is changed the same way in every process) is in `keys`. The original is
    nested inside the rewrite, so a method's private names and super() mean what they do in its class."""
    original = ast.parse(source).body[0]
    assert isinstance(original, ast.FunctionDef | ast.AsyncFunctionDef)
    wrapper = ast.parse(WRAPPER.format(name=name)).body[0]
    assert isinstance(wrapper, ast.FunctionDef)
    inner = copy.deepcopy(original)
    inner.name, inner.decorator_list = "_planted_inner", []
    wrapper.body.insert(0, inner)
    wrapper.decorator_list = original.decorator_list
    return KEY + CHANGE.format(keys=keys) + "\n\n" + ast.unparse(wrapper) + "\n"


KEYS_OF_STORE = '''
import io, json, pickle, sys
from pathlib import Path
sys.path.append(sys.argv[3])  # the recorder, whose names a snapshot may hold (a class with the state it was given)
ns = {}
exec(sys.argv[2], ns)
keys = []
for f in sorted(Path(sys.argv[1]).glob("calls/*.pkl")):
    record = pickle.loads(f.read_bytes())
    class Loader(pickle.Unpickler):
        def persistent_load(self, pid):
            return iter(pickle.loads(record["streams"][pid[1]]))
    args, kwargs = Loader(io.BytesIO(record["call"])).load()
    keys.append(ns["_planted_call_key"](args, kwargs))
print(json.dumps(keys))
'''


def planted_keys(work: Path, store: Path) -> tuple[set[int], int]:
    """The keys of about a quarter of the distinct captured calls (at least one), which the planted
    rewrite gets wrong, and how many captured calls have them. Read from the store in a process like the
    sandbox's (the workspace importable, the same hash seed)."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(work)}
    recorder = Path(__file__).resolve().parents[2] / "evaluator" / "inputs" / "recorder"
    out = subprocess.run([sys.executable, "-c", KEYS_OF_STORE, str(store), KEY, str(recorder)], cwd=work, capture_output=True,
                         text=True, env=env, timeout=300)
    if out.returncode != 0:  # a wrong rewrite planted on no call would be judged and counted as if it were one
        raise RuntimeError(f"the captured calls' keys could not be read: {out.stderr.strip()[-300:]}")
    keys = json.loads(out.stdout.strip().splitlines()[-1])
    chosen = set(sorted(set(keys))[::4])
    return chosen, sum(k in chosen for k in keys)


@dataclass
class Row:
    library: str
    target: str
    seen: int = 0
    kept: int = 0
    copy: str = ""
    copy_reason: str = ""
    wrong: str = ""
    wrong_reason: str = ""
    wrong_on: int = 0  # captured calls the planted rewrite changes
    optimise_s: float = 0.0


@dataclass
class Result:
    library: str
    plain_s: float = 0.0  # the workload's wall time (median of the runs)
    capture_s: float = 0.0  # `redline capture`'s wall time, the workload under capture (median)
    start_s: float = 0.0  # `redline capture`'s wall time with the same targets on an empty program (median)
    rows: list[Row] = field(default_factory=list)
    error: str = ""

    @property
    def overhead(self) -> float:
        """The whole command against the plain run: redline's own start included."""
        return self.capture_s / self.plain_s if self.plain_s else 0.0

    @property
    def run_overhead(self) -> float:
        """The program's run under capture against the plain run: the whole command less redline's
        own start (what a longer run converges to)."""
        return (self.capture_s - self.start_s) / self.plain_s if self.plain_s else 0.0


def captured(lib: Library, root: Path, top: int = 3, scale: float = 1.0,
             repeats: int = 1) -> tuple[Path, Result, list[Path]]:
    """The library's workspace, profiled and its `top` hottest functions captured with the defaults:
    (the workspace, a Result with the timings or the error, each captured target's manifest). With
    `repeats`, the plain run, the capture and the capture of an empty program (redline's own start:
    the profile read, the targets found, the recorder started, the stores written) alternate that
    many times and each figure is their median (none with `repeats=0`: captured once, untimed); the
    stores are the last capture's."""
    work = workspace(lib, root)
    n = str(max(1, int(lib.scale * scale)))
    out = Result(lib.name)
    prof = redline("profile", "--", sys.executable, "work.py", n, cwd=work)
    if prof.returncode != 0:
        out.error = f"profile: {prof.stderr.strip().splitlines()[-1:]}"
        return work, out, []
    plain, start, whole = [], [], []
    for _ in range(max(1, repeats)):
        if repeats:
            t = time.perf_counter()
            subprocess.run([sys.executable, "work.py", n], cwd=work, capture_output=True, check=True)
            plain.append(time.perf_counter() - t)
            t = time.perf_counter()
            redline("capture", "--top", str(top), "--", sys.executable, "-c", "pass", cwd=work)
            start.append(time.perf_counter() - t)
        t = time.perf_counter()
        cap = redline("capture", "--top", str(top), cwd=work)
        whole.append(time.perf_counter() - t)
        if cap.returncode != 0:
            out.error = f"capture: {cap.stderr.strip().splitlines()[-1:]}"
            return work, out, []
    if repeats:
        out.plain_s, out.start_s, out.capture_s = (statistics.median(x) for x in (plain, start, whole))
    return work, out, sorted((work / ".redline" / "inputs").glob("*/manifest.json"))


def run_library(lib: Library, root: Path, top: int = 3, scale: float = 1.0, extra: tuple[str, ...] = (),
                repeats: int = 1) -> Result:
    """Profile, capture with the defaults, and judge an identical copy and a planted wrong rewrite of
    each captured target through the CLI."""
    work, out, manifests = captured(lib, root, top, scale, repeats)
    for manifest_path in manifests:
        m = json.loads(manifest_path.read_text())
        row = Row(lib.name, m["target"], m["calls_seen"], m["calls_kept"])
        out.rows.append(row)
        file = Path(m["file"])
        name = m["qualname"].rpartition(".")[2]
        source, plain = source_of(file, m["qualname"])
        cands = root / "candidates" / m["qualname"]
        cands.mkdir(parents=True, exist_ok=True)
        (cands / "copy.py").write_text(source)
        if plain:
            try:
                keys, row.wrong_on = planted_keys(work, manifest_path.parent)
            except RuntimeError as exc:
                row.wrong, row.wrong_reason = "not planted", str(exc)
            else:
                (cands / "wrong.py").write_text(planted(source, name, keys))
        report = root / "reports" / f"{m['qualname']}.json"
        report.parent.mkdir(exist_ok=True)
        t = time.perf_counter()
        res = redline("optimise", m["target"], "--candidates", str(cands), "--no-builtin", "--json", str(report),
                      *extra, cwd=work)
        row.optimise_s = time.perf_counter() - t
        if not report.exists():
            row.copy = row.wrong = "no report"
            row.copy_reason = res.stderr.strip()[-300:]
            continue
        doc = json.loads(report.read_text())
        if doc.get("stopped"):
            row.copy = row.wrong = doc["stopped"]["status"]
            row.copy_reason = row.wrong_reason = doc["stopped"]["reason"]
            continue
        by_file = {c["origin"].split(":", 1)[1]: c for c in doc["candidates"]}
        row.copy, row.copy_reason = by_file["copy.py"]["status"], by_file["copy.py"]["reason"]
        if "wrong.py" in by_file:
            row.wrong, row.wrong_reason = by_file["wrong.py"]["status"], by_file["wrong.py"]["reason"]
        elif not plain:
            row.wrong = "n/a (static or class method)"
    return out
