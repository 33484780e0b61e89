"""Verdicts on the objects real code passes, through the real CLI: for each kind, an identical copy of
the target is `not_faster`, a rewrite that is wrong on a few inputs is `incorrect` with the place it
differs named, and an honest faster rewrite is `ok`.

The targets (tests/realobjects/objects_app.py) return results kept in `__slots__`, enum members,
Decimals, classes and trees whose nodes hold their parents; change a bytearray or a 10,000-node linked list in place; or are a
method of an object holding a compiled regex and a logger, whose state after the call is compared too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from corpus.corpus import source_of
from helpers import TESTS, redline

HERE = TESTS / "realobjects"

# target, its inputs function, and a word of the reason the wrong rewrite must give (where it differs)
CASES = [
    ("parse_times", "parse_times_inputs", ".hour is 24, the reference's 12"),
    ("levels", "levels_inputs", "is 'LOW', the reference's 'MID'"),
    ("invoice_total", "invoice_total_inputs", "output (args)[0]"),
    ("Lexer.tokens", "lexer_inputs", ".count is 0"),
    ("mask", "mask_inputs", "mutates its inputs"),
    ("handlers_for", "handlers_for_inputs", "objects_app.JsonHandler', the reference's 'objects_app.CsvHandler'"),
    ("nest", "nest_inputs", ".parent"),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("objects")
    shutil.copy(HERE / "objects_app.py", root / "objects_app.py")
    (root / "redline.toml").write_text("")
    return root


def with_copy(target: str, tmp_path: Path) -> Path:
    """The target's candidates (tests/realobjects/candidates/NAME) and an identical copy of the target,
    taken from objects_app.py itself."""
    folder = tmp_path / "candidates"
    shutil.copytree(HERE / "candidates" / target.rpartition(".")[2], folder)
    (folder / "copy.py").write_text(source_of(HERE / "objects_app.py", target)[0])
    return folder


@pytest.mark.parametrize(("target", "inputs", "where"), CASES, ids=[c[0] for c in CASES])
def test_copy_is_not_faster_wrong_is_incorrect_honest_is_ok(workspace: Path, tmp_path: Path, target: str,
                                                            inputs: str, where: str) -> None:
    candidates = with_copy(target, tmp_path)
    report_path = tmp_path / "report.json"
    res = redline("optimise", f"objects_app.py::{target}", "--inputs", f"objects_app.py::{inputs}",
                  "--candidates", str(candidates), "--no-builtin", "--json", str(report_path), cwd=workspace)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(report_path.read_text())
    by_file = {c["origin"].split(":", 1)[1]: c for c in report["candidates"]}
    copy, wrong, honest = by_file["copy.py"], by_file["wrong.py"], by_file["honest.py"]
    assert copy["status"] == "not_faster", copy["reason"]
    assert wrong["status"] == "incorrect" and where in wrong["reason"], wrong["reason"]
    assert honest["status"] == "ok", honest["reason"]
    assert report["winner"]["id"] == honest["id"]
    assert (workspace / "objects_app.py").read_text() == (HERE / "objects_app.py").read_text()


def test_a_linked_list_of_ten_thousand_nodes_is_compared_without_recursion(workspace: Path, tmp_path: Path) -> None:
    """A 10,000-node list reversed in place: the state after the call is compared link by link (no
    recursion limit), and a rewrite that leaves a cycle at the far end is named there."""
    report_path = tmp_path / "report.json"
    res = redline("optimise", "objects_app.py::relink", "--inputs", "objects_app.py::relink_inputs",
                  "--candidates", str(with_copy("relink", tmp_path)), "--no-builtin", "--json", str(report_path),
                  cwd=workspace)
    assert res.returncode == 0, res.stderr[-3000:]
    by_file = {c["origin"].split(":", 1)[1]: c for c in json.loads(report_path.read_text())["candidates"]}
    assert by_file["copy.py"]["status"] == "not_faster", by_file["copy.py"]["reason"]
    wrong = by_file["wrong.py"]
    assert wrong["status"] == "incorrect" and "steps)…" in wrong["reason"], wrong["reason"]


def test_a_module_named_like_the_standard_library_inside_a_package_loads(tmp_path: Path) -> None:
    """pkg/html.py imports the standard library's html and its own package relatively: the worker must
    not put pkg/ itself on sys.path, where `import html` would find pkg/html.py."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "util.py").write_text("def tag(s):\n    return '<p>' + s + '</p>'\n")
    code = ("from html import escape\n\nfrom .util import tag\n\n\ndef render(text):\n    return tag(escape(text))\n")
    (pkg / "html.py").write_text(code + "\n\ndef render_inputs(seed):\n    return ('<a & b>' * (seed % 50 + 1),)\n")
    (tmp_path / "redline.toml").write_text("")
    (tmp_path / "cands").mkdir()
    (tmp_path / "cands" / "copy.py").write_text("def render(text):\n    return tag(escape(text))\n")
    report_path = tmp_path / "report.json"
    res = redline("optimise", "pkg/html.py::render", "--inputs", "pkg/html.py::render_inputs", "--candidates",
                  str(tmp_path / "cands"), "--no-builtin", "--json", str(report_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(report_path.read_text())["candidates"][0]["status"] == "not_faster"


def test_a_method_using_super_and_private_names_is_judged_as_written(tmp_path: Path) -> None:
    """A candidate method is compiled as if in its class's body: a zero-argument super() works and
    `self.__scale` means the class's private attribute, so an identical copy is `not_faster`."""
    (tmp_path / "shapes.py").write_text(
        "class Base:\n    def total(self, xs):\n        return sum(xs)\n\n\n"
        "class Scaled(Base):\n    def __init__(self, k):\n        self.__scale = k\n\n"
        "    def total(self, xs):\n        return super().total(xs) * self.__scale\n\n\n"
        "def make_inputs(seed):\n    return Scaled(seed % 7 + 1), list(range(seed % 100 + 50))\n")
    (tmp_path / "redline.toml").write_text("")
    cands = tmp_path / "cands"
    cands.mkdir()
    (cands / "copy.py").write_text("def total(self, xs):\n    return super().total(xs) * self.__scale\n")
    (cands / "wrong.py").write_text("def total(self, xs):\n    return super().total(xs) * (self.__scale + 1)\n")
    report_path = tmp_path / "report.json"
    res = redline("optimise", "shapes.py::Scaled.total", "--candidates", str(cands), "--no-builtin", "--json",
                  str(report_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    by_file = {c["origin"].split(":", 1)[1]: c for c in json.loads(report_path.read_text())["candidates"]}
    assert by_file["copy.py"]["status"] == "not_faster", by_file["copy.py"]["reason"]
    assert by_file["wrong.py"]["status"] == "incorrect", by_file["wrong.py"]["reason"]


def test_an_overloaded_method_is_its_implementation_not_a_stub(tmp_path: Path) -> None:
    """After `@overload` stubs the last definition is the one Python binds: it is the target."""
    (tmp_path / "reg.py").write_text(
        "from typing import overload\n\n\nclass Registry:\n    def __init__(self):\n        self.items = list(range(50))\n\n"
        "    @overload\n    def get(self, key: int) -> int: ...\n\n    @overload\n    def get(self, key: str) -> int: ...\n\n"
        "    def get(self, key):\n        return self.items[int(key)]\n\n\n"
        "def make_inputs(seed):\n    return Registry(), str(seed % 50)\n")
    (tmp_path / "redline.toml").write_text("")
    (tmp_path / "cands").mkdir()
    (tmp_path / "cands" / "copy.py").write_text("def get(self, key):\n    return self.items[int(key)]\n")
    report_path = tmp_path / "report.json"
    res = redline("optimise", "reg.py::Registry.get", "--candidates", str(tmp_path / "cands"), "--no-builtin",
                  "--json", str(report_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(report_path.read_text())
    assert doc["target"]["line"] == 14 and doc["candidates"][0]["status"] == "not_faster", doc["candidates"][0]
