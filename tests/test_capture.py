"""Captured real calls as inputs, through the real CLI, on real third-party code.

The project is tomli's pure-Python parser (pinned in the dev extra), copied into a scratch workspace
as a user's own code, driven by tests/workloads/toml_work.py: profile it, capture the hot functions'
calls, optimise one. And a small script (tests/captured/app.py) for what capture cannot keep, what
the reference does not reproduce, and a failing command.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TESTS, redline, toml_workspace

CAPTURED = TESTS / "captured"
PARSER = "tomli/_parser.py"


@pytest.fixture(scope="module")
def toml_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tomli workspace, profiled and captured: the default targets from the trace (the parser's entry
    point first: compiled with the functions it calls, it reaches most of the time), then a string parser."""
    work = toml_workspace(tmp_path_factory.mktemp("tomli"))
    prof = redline("profile", "--", sys.executable, "work.py", "20", cwd=work)
    assert prof.returncode == 0, prof.stderr
    cap = redline("capture", cwd=work)
    assert cap.returncode == 0, cap.stderr
    assert "capturing the 3 hottest functions of profile-" in cap.stderr
    assert ": tomli/_parser.py::loads, " in cap.stderr, cap.stderr[-2000:]
    cap = redline("capture", "--target", f"{PARSER}::parse_basic_str", cwd=work)
    assert cap.returncode == 0, cap.stderr
    return work


def manifest(work: Path, qual: str) -> dict:
    return json.loads((work / ".redline" / "inputs" / f"tomli._parser.{qual}" / "manifest.json").read_text())


def optimise(work: Path, target: str, candidates: Path, report: Path) -> dict:
    res = redline("optimise", target, "--candidates", str(candidates), "--no-builtin", "--json", str(report),
                  cwd=work)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(report.read_text())


def test_capture_keeps_calls_that_cover_the_signatures_seen(toml_project: Path) -> None:
    m = manifest(toml_project, "parse_basic_str")
    assert m["command"] == [sys.executable, "work.py", "20"]  # the last profiled command
    assert m["module"] == "tomli._parser" and m["calls_kept"] == 64 and m["calls_seen"] > 40_000
    sigs = {s["signature"]: s for s in m["signatures"]}
    # Single- and multi-line strings of several length classes: each kept, not only the commonest.
    assert any("multiline=True" in s for s in sigs) and any("multiline=False" in s for s in sigs)
    assert len(sigs) >= 4 and all(s["kept"] > 0 for s in sigs.values())
    assert sum(s["kept"] for s in sigs.values()) == m["calls_kept"] == len(m["calls"])


def test_optimise_on_captured_calls_verifies_honest_and_rejects_wrong_and_memoised(toml_project: Path,
                                                                                  tmp_path: Path) -> None:
    """Memoisation is told by timing (calls first seen against calls repeated), so the memoising copy and
    the honest rewrite run five times each: every copy gets its verdict."""
    cands = tmp_path / "cands"
    cands.mkdir()
    shutil.copy(CAPTURED / "candidates" / "wrong_on_multiline.py", cands)
    for name in ("memoised", "regex_scan"):
        for i in range(5):
            (cands / f"{name}_{i}.py").write_text((CAPTURED / "candidates" / f"{name}.py").read_text() + f"# copy {i}\n")
    report = optimise(toml_project, f"{PARSER}::parse_basic_str", cands, tmp_path / "r.json")
    by_file = {c["origin"].split(":", 1)[1]: c for c in report["candidates"]}
    for i in range(5):
        honest = by_file[f"regex_scan_{i}.py"]
        assert honest["status"] == "ok" and honest["speedup"] > 1.5, honest["reason"]
        assert honest["first_seen_speedup"] is not None and "first-seen" in honest["reason"]
        memo = by_file[f"memoised_{i}.py"]
        assert memo["status"] == "rejected_exploit" and "remembers results" in memo["reason"], memo["reason"]
    wrong = by_file["wrong_on_multiline.py"]
    assert wrong["status"] == "incorrect" and "captured call" in wrong["reason"], wrong["reason"]
    assert report["winner"]["id"] in {by_file[f"regex_scan_{i}.py"]["id"] for i in range(5)}
    inputs = report["inputs"]
    assert inputs["source"] == "captured" and inputs["calls"] == 64 and inputs["excluded"] == 0
    assert inputs["command"] == [sys.executable, "work.py", "20"] and inputs["captured_at"]


def test_a_method_is_checked_for_what_it_does_to_self(toml_project: Path, tmp_path: Path) -> None:
    target = f"{PARSER}::NestedDict.get_or_create_nest"
    # One call in about twenty creates a nest (the rest find it): 400 kept calls hold creating ones
    # (the chance that none of them does is below 1e-8), which is what the wrong candidate gets wrong.
    cap = redline("capture", "--target", target, "--calls", "400", "--", sys.executable, "work.py", "5",
                  cwd=toml_project)
    assert cap.returncode == 0, cap.stderr
    m = manifest(toml_project, "NestedDict.get_or_create_nest")
    assert m["calls_kept"] > 0 and all(s["signature"].startswith("tomli._parser.NestedDict") for s in m["signatures"])
    report = optimise(toml_project, target, CAPTURED / "methods", tmp_path / "r.json")
    by_file = {c["origin"].split(":", 1)[1]: c for c in report["candidates"]}
    assert by_file["honest_nest.py"]["status"] in ("ok", "not_faster"), by_file["honest_nest.py"]["reason"]
    forgets = by_file["forgets_to_insert.py"]
    assert forgets["status"] == "incorrect" and "mutates its inputs" in forgets["reason"], forgets["reason"]


def capture_and_judge(tmp_path: Path, folder: str, target: str, kept: str, script: str = "work.py",
                      **candidates: str) -> tuple[dict, dict]:
    """tests/captured/FOLDER as a workspace: capture TARGET running SCRIPT (its summary says KEPT), then
    judge CANDIDATES (file stem -> code) on the captured calls through the CLI. The report, and its
    candidates by file stem."""
    src = CAPTURED / folder
    if src.is_dir():
        shutil.copytree(src, tmp_path, dirs_exist_ok=True)
    else:
        shutil.copy(src, tmp_path / script)
    (tmp_path / "redline.toml").write_text("")
    cap = redline("capture", "--target", target, "--", sys.executable, script, cwd=tmp_path)
    assert cap.returncode == 0 and kept in cap.stdout, cap.stdout + cap.stderr
    cands = tmp_path / "cands"
    cands.mkdir()
    for stem, code in candidates.items():
        (cands / f"{stem}.py").write_text(code)
    report = optimise(tmp_path, target, cands, tmp_path / "r.json")
    return report, {c["origin"].removeprefix("file:").removesuffix(".py"): c for c in report["candidates"]}


@pytest.fixture()
def app(tmp_path: Path) -> Path:
    shutil.copy(CAPTURED / "app.py", tmp_path / "app.py")
    (tmp_path / "redline.toml").write_text("")
    return tmp_path


def test_unpicklable_arguments_are_named_and_their_calls_skipped(app: Path) -> None:
    res = redline("capture", "--target", "app.py::scale", "--", sys.executable, "app.py", cwd=app)
    assert res.returncode == 0, res.stderr
    m = json.loads((app / ".redline/inputs/app.scale/manifest.json").read_text())
    assert m["module"] == "__main__" and m["calls_seen"] == 30 and m["calls_kept"] == 20
    (why, n), = m["unrecordable"].items()
    assert n == 10 and "argument lock" in why and "_thread.lock" in why
    assert "10 calls not kept: argument lock" in res.stdout


def test_calls_the_reference_does_not_reproduce_are_excluded_and_counted(app: Path, tmp_path: Path) -> None:
    assert redline("capture", "--target", "app.py::weighted", "--", sys.executable, "app.py", cwd=app).returncode == 0
    cands = tmp_path / "cands"
    cands.mkdir()
    (cands / "same.py").write_text("def weighted(values):\n    total = 0.0\n    for i, v in enumerate(values):\n"
                                   "        total += v * (i + 1) if MODE == 'plain' else v\n    return total\n")
    report = optimise(app, "app.py::weighted", cands, tmp_path / "r.json")
    inputs = report["inputs"]
    assert inputs["calls"] == 20 and inputs["excluded"] == 20  # the 20 calls made after MODE changed
    assert list(inputs["excluded_reasons"]) == ["returns another result than the recorded call (hidden state, "
                                                "randomness or time)"]
    # Each excluded call names the first difference with both values: what it returns now, what it did then.
    assert len(inputs["excluded_calls"]) == 20
    assert all(re.fullmatch(r"result is [-\d.e]+, the reference [-\d.e]+ \(beyond .*\)", why)
               for why in inputs["excluded_calls"].values()), inputs["excluded_calls"]
    assert report["candidates"][0]["status"] in ("ok", "not_faster")


def test_a_failing_command_keeps_its_exit_code_and_what_it_called(app: Path) -> None:
    res = redline("capture", "--target", "app.py::scale", "--", sys.executable, "app.py", "3", cwd=app)
    assert res.returncode == 3, res.stderr
    assert "exited with 3" in res.stderr
    m = json.loads((app / ".redline/inputs/app.scale/manifest.json").read_text())
    assert m["exit_code"] == 3 and m["calls_kept"] == 20


def test_capture_bad_input_is_one_clear_error(app: Path) -> None:
    res = redline("capture", cwd=app)
    assert res.returncode == 2 and "redline capture: " in res.stderr and "Traceback" not in res.stderr
    assert "redline profile" in res.stderr  # nothing to take the command or the targets from
    res = redline("capture", "--target", "app.py::nope", "--", sys.executable, "app.py", cwd=app)
    assert res.returncode == 2 and "no function 'nope'" in res.stderr and "scale" in res.stderr
    res = redline("capture", "--target", "missing.py::f", "--", sys.executable, "app.py", cwd=app)
    assert res.returncode == 2 and "missing.py: no such file" in res.stderr
    res = redline("capture", "--target", "app.py::main", "--", sys.executable, "-c", "pass", cwd=app)
    assert res.returncode == 2 and "never called app.py::main" in res.stderr


def test_optimise_without_inputs_names_the_capture_command(app: Path) -> None:
    prof = redline("profile", "--", sys.executable, "app.py", "0", "0.5", cwd=app)
    assert prof.returncode == 0, prof.stderr
    res = redline("optimise", "app.py::scale", cwd=app)
    assert res.returncode == 2, res.stderr
    assert f"redline capture --target app.py::scale -- {sys.executable} app.py 0 0.5" in res.stderr
    assert "Traceback" not in res.stderr


def test_generators_and_coroutines_are_captured_by_what_they_yield_and_return(tmp_path: Path) -> None:
    shutil.copy(CAPTURED / "generators.py", tmp_path / "gen.py")
    (tmp_path / "redline.toml").write_text("")
    res = redline("capture", "--target", "gen.py::chunks", "--target", "gen.py::total", "--", sys.executable,
                  "gen.py", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    for name in ("chunks", "total"):
        m = json.loads((tmp_path / f".redline/inputs/gen.{name}/manifest.json").read_text())
        assert m["calls_kept"] == 3 and all(c["outcome"] == "return" for c in m["calls"])
    cands = tmp_path / "cands"
    cands.mkdir()
    # An iterator instead of a generator function is the same to a caller that iterates; a dropped
    # chunk is not.
    (cands / "expr.py").write_text("def chunks(items, size):\n    return (sum(items[i:i + size]) for i in "
                                   "range(0, len(items), size))\n")
    (cands / "short.py").write_text("def chunks(items, size):\n    return (sum(items[i:i + size]) for i in "
                                    "range(0, len(items) - size, size))\n")
    got = {c["origin"].removeprefix("file:"): c for c in optimise(tmp_path, "gen.py::chunks", cands,
                                                                   tmp_path / "r.json")["candidates"]}
    assert got["expr.py"]["status"] in ("ok", "not_faster"), got["expr.py"]["reason"]
    assert got["short.py"]["status"] == "incorrect", got["short.py"]["reason"]
    awaited = tmp_path / "awaited"
    awaited.mkdir()
    (awaited / "plain.py").write_text("async def total(items):\n    return sum(x * x for x in items)\n")
    (awaited / "off.py").write_text("async def total(items):\n    return sum(x * x for x in items) + 1\n")
    got = {c["origin"].removeprefix("file:"): c for c in optimise(tmp_path, "gen.py::total", awaited,
                                                                   tmp_path / "r2.json")["candidates"]}
    assert got["plain.py"]["status"] in ("ok", "not_faster"), got["plain.py"]["reason"]
    assert got["off.py"]["status"] == "incorrect", got["off.py"]["reason"]


def test_module_level_singletons_keep_their_identity(tmp_path: Path) -> None:
    """Arguments that are a package's module-level objects (token kinds tested with `is`) are captured by
    reference: in the sandbox they are the module's own objects, so the reference reproduces its calls."""
    report, got = capture_and_judge(
        tmp_path, "singletons", "lexkit/kinds.py::label", "kept 50 of 50 calls",
        copy='def label(kinds):\n    return ["w" if k is WORD else "n" if k is NUMBER else "?" for k in kinds]\n')
    assert report["inputs"]["excluded"] == 0 and report["inputs"]["calls"] == 50, report["inputs"]
    assert got["copy"]["status"] == "not_faster", got["copy"]["reason"]


def test_objects_holding_closures_lambdas_and_local_classes_are_captured_and_optimised(tmp_path: Path) -> None:
    """`self` holds a lambda closing over a local and an instance of a class defined inside a function:
    snapshotted by value (cloudpickle), every call kept, and the reference reproduces them."""
    body = "    key, w = self.key, self.options.weight\n    return round(sum((key(item) * w for item in items), 0.0), 6)\n"
    report, got = capture_and_judge(tmp_path, "closures", "rank/scorer.py::Scorer.score", "kept 40 of 40 calls",
                                    honest="def score(self, items):\n    self.calls += 1\n" + body,
                                    wrong="def score(self, items):\n" + body)
    assert report["inputs"]["calls"] == 40 and report["inputs"]["excluded"] == 0, report["inputs"]
    assert got["honest"]["status"] in ("ok", "not_faster"), got["honest"]["reason"]
    assert got["wrong"]["status"] == "incorrect" and ".calls is" in got["wrong"]["reason"], got["wrong"]["reason"]


def test_state_a_metaclass_puts_on_the_class_when_it_is_first_used_is_captured(tmp_path: Path) -> None:
    """The lexer's metaclass compiles its rules onto the class when the first lexer is made (pygments'
    lexers build `_tokens` so). pickle writes the class by name and the sandbox imports it fresh, so
    without that state every call raised AttributeError there and nothing could be judged: the
    snapshot now carries what the program set on the class after its definition ran."""
    report, got = capture_and_judge(
        tmp_path, "made_once", "lexing.py::Lexer.lex", "kept 30 of 30 calls",
        copy="def lex(self, text):\n    return [(next((k for k, rx in self._compiled if rx.fullmatch(p)), 'other'), p)"
             " for p in text.split()]\n",
        wrong="def lex(self, text):\n    return [(next((k for k, rx in self._compiled if rx.match(p)), 'other'), p)"
              " for p in text.split()]\n")
    assert report["inputs"]["calls"] == 30 and report["inputs"]["excluded"] == 0, report["inputs"]
    assert got["copy"]["status"] in ("ok", "not_faster"), got["copy"]["reason"]
    assert got["wrong"]["status"] == "incorrect", got["wrong"]["reason"]  # 'x1' matches as a word


def test_a_class_carries_its_data_newest_first_within_a_budget_and_again_when_it_changes() -> None:
    """What a class carries in a snapshot: its data attributes, pickled once; a value too large to carry
    is left out, and the names the program added after the class statement are taken first; a class
    that gains a name is pickled again."""
    import pickle

    from redline.evaluator.inputs.recorder import _redline_capture as rec

    class Lexer:
        table = tuple(range(50_000))  # pickles to more than 64 KiB
        name = "lexer"

        def lex(self) -> None: ...

    Lexer._compiled = [("word", re.compile("[a-z]+"))]  # type: ignore[attr-defined]
    first = rec._class_state(Lexer)
    assert first is not None and first is rec._class_state(Lexer)  # once, while the class is unchanged
    assert pickle.loads(first) == {"_compiled": [("word", re.compile("[a-z]+"))], "name": "lexer"}
    Lexer._count = 3  # type: ignore[attr-defined]
    assert pickle.loads(rec._class_state(Lexer) or b"")["_count"] == 3


def test_an_object_whose_class_new_wants_arguments_is_captured(tmp_path: Path) -> None:
    """`Template.__new__(cls, source)` (as jinja2's): pickle's default makes the object again with
    `cls.__new__(cls)`, which raised in the sandbox; the snapshot makes it as its built-in base does and
    restores its state."""
    report, got = capture_and_judge(
        tmp_path, "made_once", "lexing.py::Template.render", "kept 30 of 30 calls",
        copy="def render(self, **values):\n    return self.source.format(**values)\n",
        wrong="def render(self, **values):\n    return self.source.format_map(values).rstrip('s')\n")
    assert report["inputs"]["calls"] == 30 and report["inputs"]["excluded"] == 0, report["inputs"]
    assert got["copy"]["status"] == "not_faster", got["copy"]["reason"]
    assert got["wrong"]["status"] == "incorrect", got["wrong"]["reason"]


def test_a_function_fed_a_generator_is_replayed_on_the_items_it_took(tmp_path: Path) -> None:
    report, got = capture_and_judge(
        tmp_path, "generators.py", "gen.py::longest", "kept 5 of 5 calls", script="gen.py",
        maxed="def longest(words):\n    return max(words, key=len, default='')\n",
        last="def longest(words):\n    best = ''\n    for w in words:\n        if len(w) >= len(best):\n"
             "            best = w\n    return best\n")
    assert report["inputs"]["calls"] == 5 and report["inputs"]["excluded"] == 0, report["inputs"]
    assert got["maxed"]["status"] in ("ok", "not_faster"), got["maxed"]["reason"]
    assert got["last"]["status"] == "incorrect", got["last"]["reason"]  # ties go to the last word


WHOLE = {
    # Each yielded item is snapshotted as it is yielded (one stream, one memo: an item's reference to the
    # one before it stays a reference), not when the generator ends, after its caller changed them.
    "generator_whose_caller_changes_what_it_yields": (
        "regrouped.py", "app.py::split", 64, "kept 64 of 300 calls",
        "def split(text):\n    prev = None\n    for part in text.split(';'):\n        if part.strip():\n"
        "            prev = Stmt(part.split(){}, prev)\n            yield prev\n", "[:-1]"),
    # `_parse = _parse_no_cache` in the class body: the alias is the same function, and is wrapped too.
    "method_called_through_an_alias_in_its_class_body": (
        "aliased.py", "app.py::Parser._parse_no_cache", 30, "kept 30 of 30 calls",
        "def _parse_no_cache(self, text, loc):\n    word = text[loc:].split(' ', 1)[0]\n"
        "    return loc + len(word){}, word\n", " + 1"),
}


@pytest.mark.parametrize("case", sorted(WHOLE))
def test_every_call_is_kept_and_reproduced(tmp_path: Path, case: str) -> None:
    """Every call kept and reproduced; the identical copy judged on them, a changed one `incorrect`."""
    file, target, calls, kept, template, change = WHOLE[case]
    report, got = capture_and_judge(tmp_path, file, target, kept, script="app.py",
                                    copy=template.format(""), changed=template.format(change))
    assert report["inputs"]["calls"] == calls and report["inputs"]["excluded"] == 0, report["inputs"]
    assert got["copy"]["status"] in ("ok", "not_faster"), got["copy"]["reason"]
    assert got["changed"]["status"] == "incorrect", got["changed"]["reason"]


def test_a_private_method_handed_regex_matches_is_captured_and_optimised(tmp_path: Path) -> None:
    """`Inline.__apply` (stored as `_Inline__apply`) gets an re.Match: the match is snapshotted as its
    pattern matched again at its place in the same string, so its calls are kept and replayed."""
    report, got = capture_and_judge(
        tmp_path, "matches", "inline.py::Inline.__apply", "kept 64 of 90 calls",
        copy="def __apply(self, m):\n    self.seen += 1\n    strong, em = m.groups()\n"
             "    return f'<b>{strong}</b>' if strong else f'<i>{em}</i>'\n",
        wrong="def __apply(self, m):\n    self.seen += 1\n    return f'<b>{m.group(0)}</b>'\n")
    assert report["inputs"]["excluded"] == 0, report["inputs"]
    assert got["copy"]["status"] == "not_faster", got["copy"]["reason"]
    assert got["wrong"]["status"] == "incorrect", got["wrong"]["reason"]


def test_a_result_whose_own_pickle_drops_a_slot_is_reproduced(tmp_path: Path) -> None:
    """The recorded outcome went through the class's pickle, which leaves a cached slot out: the reference's
    result is compared after the same round trip, so the calls reproduce; candidates are still compared
    live, slot included."""
    report, got = capture_and_judge(
        tmp_path, "partial", "results.py::collect", "kept 30 of 30 calls",
        copy="def collect(words):\n    return Result([w.upper() for w in words if w])\n",
        stale="def collect(words):\n    r = Result([w.upper() for w in words if w])\n    r._size = len(words)\n"
              "    return r\n")
    assert report["inputs"]["excluded"] == 0 and report["inputs"]["calls"] == 30, report["inputs"]
    assert got["copy"]["status"] == "not_faster", got["copy"]["reason"]
    assert got["stale"]["status"] == "incorrect" and "._size is" in got["stale"]["reason"], got["stale"]["reason"]


def test_captured_calls_are_private_ignored_by_git_and_cleared_on_request(app: Path) -> None:
    """Captured calls are the program's real data: `.redline/` ignores itself, stores are the user's
    alone (folders 0700, files 0600), and `redline capture --clear` deletes them."""
    assert redline("capture", "--target", "app.py::weighted", "--", sys.executable, "app.py", cwd=app).returncode == 0
    base = app / ".redline"
    assert (base / ".gitignore").read_text().splitlines()[-1] == "*"
    store = base / "inputs" / "app.weighted"
    for path in (base, base / "inputs", store, store / "calls"):
        assert path.stat().st_mode & 0o777 == 0o700, path
    for path in [store / "manifest.json", *store.glob("calls/*.pkl")]:
        assert path.stat().st_mode & 0o777 == 0o600, path
    subprocess.run(["git", "init", "-q"], cwd=app, check=True)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=app, capture_output=True,
                            text=True, check=True).stdout
    assert ".redline" not in status and "app.py" in status
    cleared = redline("capture", "--clear", cwd=app)
    assert cleared.returncode == 0 and "deleted the captured calls of 1 function(s)" in cleared.stdout
    assert not store.exists()


def test_an_iterator_class_of_the_program_is_not_replaced_under_capture(tmp_path: Path) -> None:
    """Only generators and built-in iterators are tapped: an object of the program's own iterator class (a
    tokenizer with state and methods, as dateutil's is) reaches the call as itself, and the program's
    output under capture is its output without."""
    (tmp_path / "lex.py").write_text(
        "import sys\n\n\nclass Lexer:\n    def __init__(self, text):\n        self.words = text.split()\n"
        "        self.stack = []\n\n    def __iter__(self):\n        return self\n\n    def __next__(self):\n"
        "        if not self.words:\n            raise StopIteration\n        return self.token()\n\n"
        "    def token(self):\n        if self.stack:\n            return self.stack.pop()\n"
        "        return self.words.pop(0).upper()\n\n\n"
        "for i in range(20):\n    print(list(Lexer('a b c ' * (i + 1))))\n")
    (tmp_path / "redline.toml").write_text("")
    plain = subprocess.run([sys.executable, "lex.py"], cwd=tmp_path, capture_output=True, text=True, check=True)
    cap = redline("capture", "--target", "lex.py::Lexer.token", "--", sys.executable, "lex.py", cwd=tmp_path)
    assert cap.returncode == 0, cap.stderr
    assert cap.stdout.startswith(plain.stdout) and "kept 64 of 630 calls" in cap.stdout, cap.stdout[-500:]


def own_environment(tmp_path: Path) -> tuple[Path, str]:
    """tests/captured/own_env as a workspace, and a second venv's interpreter: the only one with `onlyhere`."""
    work = tmp_path / "work"
    shutil.copytree(CAPTURED / "own_env", work)
    (work / "redline.toml").write_text("")
    env_dir = tmp_path / "program-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    site = next(env_dir.glob("lib/python3*/site-packages"))
    (work / "onlyhere.py").rename(site / "onlyhere.py")  # installed there, and nowhere else
    return work, str(env_dir / "bin" / "python")


def test_the_target_runs_with_the_programs_own_interpreter(tmp_path: Path) -> None:
    """A package installed only in the program's venv: captured there, and optimise (run from redline's
    own environment) loads the target with the program's interpreter, which has it."""
    work, program_python = own_environment(tmp_path)
    cap = redline("capture", "--target", "work.py::price", "--", program_python, "work.py", cwd=work)
    assert cap.returncode == 0 and "kept 20 of 20 calls" in cap.stdout, cap.stdout + cap.stderr
    m = json.loads((work / ".redline/inputs/work.price/manifest.json").read_text())
    assert m["interpreter"] == program_python
    with pytest.raises(ModuleNotFoundError):
        __import__("onlyhere")
    cands = tmp_path / "cands"
    cands.mkdir()
    (cands / "copy.py").write_text("def price(items):\n    return [onlyhere.with_tax(amount) for amount in items]\n")
    (cands / "wrong.py").write_text("def price(items):\n    return [round(amount * 1.25, 2) for amount in items]\n")
    report = optimise(work, "work.py::price", cands, tmp_path / "r.json")
    assert report["stopped"] is None and report["inputs"]["calls"] == 20
    status = {c["origin"]: c["status"] for c in report["candidates"]}
    assert status == {"file:copy.py": "not_faster", "file:wrong.py": "incorrect"}, report["candidates"]


def test_redline_toml_names_the_interpreter_the_target_runs_with(tmp_path: Path) -> None:
    """With no captured calls to name the program's interpreter, `python =` in redline.toml does: the target
    (which imports a package only that interpreter has) loads and is judged; a wrong path is one clear error."""
    work, program_python = own_environment(tmp_path)
    (work / "ops.py").write_text(
        "import onlyhere\n\n\ndef price(items):\n    return [onlyhere.with_tax(a) for a in items]\n\n\n"
        "def make_inputs(seed):\n    return ([float(seed % 97 + j) for j in range(50)],)\n")
    cands = tmp_path / "cands"
    cands.mkdir()
    (cands / "wrong.py").write_text("def price(items):\n    return [round(a * 1.25, 2) for a in items]\n")
    without = redline("optimise", "ops.py::price", "--candidates", str(cands), "--no-builtin", cwd=work)
    assert without.returncode == 2 and "onlyhere" in without.stderr, without.stderr[-1000:]
    (work / "redline.toml").write_text(f'python = "{os.path.relpath(program_python, work)}"\n')  # ../program-venv/…
    report = optimise(work, "ops.py::price", cands, tmp_path / "r.json")
    assert {c["origin"]: c["status"] for c in report["candidates"]} == {"file:wrong.py": "incorrect"}
    (work / "redline.toml").write_text('python = "no/such/python"\n')
    bad = redline("optimise", "ops.py::price", "--candidates", str(cands), "--no-builtin", cwd=work)
    assert bad.returncode == 2 and "redline.toml: python: no/such/python is not an executable interpreter" \
        in bad.stderr, bad.stderr[-1000:]



SECRETS = '''class Session:
    def __init__(self, user, token):
        self.user, self.token, self.tokens = user, token, [1, 2, 3]


def login(session, password, headers):
    return {"user": session.user, "strong": len(password) > 8, "bearer": len(headers.get("Authorization", ""))}


def score(items, tokens):
    return sum(items) + len(tokens)


def classify(token, source):
    return token["raw"].isidentifier() and token["raw"] in source


for i in range(12):
    login(Session(f"u{i}", f"tok-SECRET-{i}"), f"pw-SECRET-{i}", {"Authorization": f"Bearer SECRET{i}", "Accept": "json"})
    score([i, i + 1], ["a", "b"])
    classify({"type": "text", "raw": f"word{i}"}, f"some word{i} here")
'''


def test_secrets_are_redacted_before_they_are_stored(tmp_path: Path) -> None:
    """Captured calls are the program's data: what arguments, dict keys and attributes named like secrets
    hold (redline.toml's `redact`, by default password, token, secret, authorization, …) never reaches the
    store; a call whose result depended on one is excluded as not reproduced, and names that only contain
    such a word (`tokens`) are kept."""
    (tmp_path / "app.py").write_text(SECRETS)
    (tmp_path / "redline.toml").write_text("")
    cap = redline("capture", "--target", "app.py::login", "--target", "app.py::score", "--target", "app.py::classify",
                  "--", sys.executable, "app.py", cwd=tmp_path)
    assert cap.returncode == 0, cap.stderr
    stored = [p for p in (tmp_path / ".redline" / "inputs").rglob("*") if p.is_file()]
    assert len(stored) > 20 and not any(b"SECRET" in p.read_bytes() for p in stored)
    assert any(b"<redacted by redline>" in p.read_bytes() for p in stored)
    cands = tmp_path / "cands"
    cands.mkdir()
    (cands / "copy.py").write_text("def score(items, tokens):\n    return sum(items) + len(tokens)\n")
    report = optimise(tmp_path, "app.py::score", cands, tmp_path / "score.json")
    assert report["inputs"]["calls"] == 12 and report["inputs"]["excluded"] == 0  # `tokens` is not a secret
    # A lexer's `token` (a dict, not a string) is looked into, not replaced: its calls reproduce.
    (cands / "copy.py").write_text("def classify(token, source):\n    return token['raw'].isidentifier() and "
                                   "token['raw'] in source\n")
    report = optimise(tmp_path, "app.py::classify", cands, tmp_path / "classify.json")
    assert report["inputs"]["calls"] == 12 and report["inputs"]["excluded"] == 0, report["inputs"]
    (cands / "copy.py").write_text("def login(session, password, headers):\n    return {}\n")
    res = redline("optimise", "app.py::login", "--candidates", str(cands), "--no-builtin", cwd=tmp_path)
    # Its result depends on the Authorization header's length, which redaction changed: no call reproduces.
    assert res.returncode == 2 and "reproduces none of its 12 captured calls" in res.stderr, res.stderr[-800:]
    assert "12 of the captured calls hold values redacted under secret names" in res.stderr, res.stderr[-800:]
    (tmp_path / "redline.toml").write_text("redact = []\n")  # turned off: stored as they were
    assert redline("capture", "--target", "app.py::login", "--", sys.executable, "app.py", cwd=tmp_path).returncode == 0
    assert any(b"SECRET" in p.read_bytes() for p in (tmp_path / ".redline" / "inputs").rglob("*.pkl"))


def test_the_scan_for_secret_names_misses_none() -> None:
    """Snapshots are taken apart for redaction only where their pickled bytes may hold a secret name;
    the scan must find every name that redaction counts as secret (else a secret is stored), and lets
    the common names that only contain such a word (`tokens`, `get_tokens`) through."""
    import pickle

    from redline.evaluator.config import ProjectConfig
    from redline.evaluator.inputs.recorder import _redline_capture as rec

    rec.redact(ProjectConfig().redact)  # the defaults
    try:
        secret = ["token", "authToken", "X-Auth-Token", "TOKEN", "tokenType", "token_id", "access_token", "tokenS",
                  "api_key", "apiKey", "API_KEY", "myApiKey", "Password", "PASSWD", "client_secret", "Set-Cookie",
                  "Authorization", "x1Token"]
        plain = ["tokens", "get_tokens", "token2", "keys", "passwords", "cookies", "authorizations", "secretary"]
        assert all(rec._secret(n) for n in secret) and not any(rec._secret(n) for n in plain)
        for name in secret:
            assert rec._may_hold_secret(pickle.dumps({name: 1})), name
        assert not rec._may_hold_secret(pickle.dumps({n: n for n in plain}))
    finally:
        rec.redact([])


def test_calls_the_snapshot_budget_cut_are_reported_only_where_the_store_did_not_fill() -> None:
    """A store that filled later has nothing missing to explain; one that did not says why."""
    from redline.evaluator.inputs.recorder import _redline_capture as capture

    rec = capture.Recorder("f.py::f", "f", 4, 1 << 20)
    rec.cut = 3
    (why, n), = rec.dump()["dropped"].items()
    assert n == 3 and why.startswith("its snapshots had cost its share of the program's time")
    rec.filled = 4
    assert rec.dump()["dropped"] == {}


HOT_CLASSMETHOD = '''
import time


class Tokens:
    @classmethod
    def split(cls, n):
        total = 0
        for i in range(n):
            total += i % 7
        return total


def scan(n):
    total = 0
    for i in range(n):
        total += i % 5
    return total


if __name__ == "__main__":
    end = time.perf_counter() + 1.5
    while time.perf_counter() < end:
        Tokens.split(90_000)
        scan(10_000)
'''


# The hottest function memoised (pygments' HtmlFormatter._translate_parts): its calls mostly never reach
# its code, and the recorder does not wrap it.
HOT_MEMOISED = HOT_CLASSMETHOD.replace("import time\n", "import functools\nimport time\n").replace(
    "    @classmethod\n    def split(cls, n):", "    @staticmethod\n    @functools.lru_cache(maxsize=None)\n"
    "    def split(n):").replace("    while time.perf_counter() < end:\n        Tokens.split(90_000)",
                            "    k = 0\n    while time.perf_counter() < end:\n        k += 1\n        Tokens.split(90_000 + k)")


@pytest.mark.parametrize("program", [HOT_CLASSMETHOD, HOT_MEMOISED], ids=["classmethod", "lru_cache"])
def test_the_hottest_functions_chosen_to_capture_are_ones_whose_calls_can_be_kept(tmp_path: Path, program: str) -> None:
    """A class method (or a memoised function) is the hottest function, but the recorder does not wrap it
    (a capture of it keeps no calls): `redline capture --top 1` takes the next hottest instead."""
    from redline.evaluator.inputs.capture import hot_targets
    from redline.profilers import report

    (tmp_path / "prog.py").write_text(program)
    prof = redline("profile", "--", sys.executable, "prog.py", cwd=tmp_path)
    assert prof.returncode == 0, prof.stderr[-2000:]
    trace, targets = hot_targets(tmp_path, 1)
    shares = {h.function: h.inclusive_fraction for h in report([trace], tmp_path).hotspots if h.file == "prog.py"}
    assert shares["Tokens.split"] > shares["scan"] > 0, shares
    assert [t.qualname for t in targets] == ["scan"]


def test_capture_takes_the_function_whose_compiled_call_tree_reaches_most(tmp_path: Path) -> None:
    """A parser's time is spread over the functions of its module it calls: each of them, and the script's
    own steps, is hotter than the parser's own lines, but the parser compiled with them (Cython and mypyc
    compile a function's module callees with it) reaches more than any, so `redline capture --top 1`
    takes it. The script's `main` runs all of it and ranks by its own time: it runs the program once."""
    from redline.evaluator.inputs.capture import hot_targets
    from redline.profilers import report

    shutil.copytree(TESTS / "workloads" / "spread", tmp_path, dirs_exist_ok=True)
    prof = redline("profile", "--", sys.executable, "prog.py", cwd=tmp_path)
    assert prof.returncode == 0, prof.stderr[-2000:]
    trace, targets = hot_targets(tmp_path, 1)
    spots = {h.function: h for h in report([trace], tmp_path).hotspots if h.file in ("prog.py", "parser_mod.py")}
    others = [h for name, h in spots.items() if name not in ("parse", "main", "<module>")]
    assert spots["parse"].inclusive_fraction < max(h.inclusive_fraction for h in others), spots
    assert spots["parse"].module_fraction > max(h.module_fraction for h in others), spots
    assert spots["parse"].module_fraction < spots["main"].total_fraction, spots
    assert spots["main"].module_fraction == spots["main"].inclusive_fraction  # the script's: its own
    assert [t.qualname for t in targets] == ["parse"]


class Prober:
    def __init__(self, n: int) -> None:
        self.n = n
        self.seen = [n]


class Levelled:
    """A property named like an entry of its instances' `__dict__`: restoring must not call its setter."""

    def __init__(self) -> None:
        self.__dict__["level"] = 3
        self.sets = 0

    @property
    def level(self) -> int:
        return self.__dict__["level"]

    @level.setter
    def level(self, value: int) -> None:
        self.sets += 1


class Frozen:
    def __init__(self) -> None:
        object.__setattr__(self, "x", 1)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("frozen")


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self) -> None:
        self.a, self.b = 1, [2]


class Own:
    def __init__(self) -> None:
        self.x = 1

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state, restored_by="Own")


def test_captured_objects_hold_their_attributes_as_the_programs_own_objects_do() -> None:
    """pickle restores an object by writing into its `__dict__`, which makes CPython keep the attributes
    in a dictionary of their own, where its specialised attribute reads do not apply: Python code ran up
    to 2x slower on such objects than on the program's, and a compiled method that is slower in the
    program measured faster on its captured calls. The worker restores them as the program's code sets
    attributes (no dictionary apart: gc sees the attributes' values themselves), with pickle's result."""
    import gc
    import pickle

    from redline.evaluator.sandbox.redline_worker.subject import _Unpickler

    class Subject:
        module = captured_module = None

    def dicts(obj: object) -> int:
        return sum(type(r) is dict for r in gc.get_referents(obj))

    prober = Prober(7)
    assert dicts(pickle.loads(pickle.dumps(prober))) == 1  # pickle's own: a dictionary apart
    restored = _Unpickler(Subject()).loads(pickle.dumps(prober))
    assert dicts(restored) == 0 and vars(restored) == {"n": 7, "seen": [7]}  # (vars() makes the dictionary)
    levelled = _Unpickler(Subject()).loads(pickle.dumps(Levelled()))
    assert (levelled.level, levelled.sets) == (3, 0)
    assert vars(_Unpickler(Subject()).loads(pickle.dumps(Frozen()))) == {"x": 1}
    slotted = _Unpickler(Subject()).loads(pickle.dumps(Slotted()))
    assert (slotted.a, slotted.b) == (1, [2])
    assert vars(_Unpickler(Subject()).loads(pickle.dumps(Own()))) == {"x": 1, "restored_by": "Own"}
