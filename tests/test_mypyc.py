"""The mypyc proposer: the target compiled with mypyc, alone and with the module's functions it calls,
verified on its calls through the real CLI, and the edit it offers compiling it where the program
runs. mypyc (from the dev extra's mypy) and the C compiler are real."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import REPO
from redline.evaluator.proposers import Context
from redline.evaluator.proposers.mypyc import MypycProposer, _built, _helper, callees
from redline.evaluator.target import Target, apply_candidate, locate
from test_plain_python import optimise

WORKLOADS = REPO / "tests" / "workloads"


def target_in(file: Path, qualname: str) -> Target:
    loc = locate(f"{file}::{qualname}")
    return Target(loc.file, loc.qualname, loc.fn, loc.source, file.parent, None)  # type: ignore[arg-type]


PACKAGED = '''
from __future__ import annotations

import re
from ._types import Pos

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from ._types import Key

__all__ = ["parse"]
WORD = re.compile(r"\\w+")
try:
    from ._speedups import fast
except ImportError:
    fast = None


class Error(ValueError):
    pass


def helper(src: str, pos: Pos) -> Pos:
    return pos + 1


def parse(src: str) -> list[Key]:
    seen = [w for w in WORD.findall(src)]
    return [(s,) for s in seen]
'''


def test_mypyc_type_checks_against_the_modules_names_which_it_is_given_when_it_loads() -> None:
    """The module mypyc compiles imports the names of the module the functions come from (bound at its
    top level in any branch) and that module's TYPE_CHECKING imports, relative ones made absolute, all
    for the type check alone; not the functions it compiles, the dunders or TYPE_CHECKING itself."""
    text = _helper().typed_module(textwrap.dedent(PACKAGED), "pkg.mod", False,
                                  "def parse(src: str) -> list[Key]:\n    return []\n",
                                  ["def helper(src: str, pos: Pos) -> Pos:\n    return pos + 1\n"])
    head, _, defs = text.partition("\n\n\n")
    assert head.splitlines() == [
        "from __future__ import annotations", "from typing import TYPE_CHECKING", "if TYPE_CHECKING:",
        "    from pkg.mod import Error, Pos, WORD, fast, re",
        "    from collections.abc import Iterable", "    from pkg._types import Key"]
    assert defs.index("def helper(") < defs.index("def parse(")
    package = _helper().typed_module(textwrap.dedent(PACKAGED), "pkg", True, "def parse(src):\n    return []\n", [])
    assert "    from pkg._types import Key" in package.splitlines()


def test_a_generator_expression_mypyc_would_make_a_list_stays_lazy() -> None:
    """mypyc evaluates a generator expression at once where it is not a call's only argument: the
    compiled copy has it as a generator function, which reads its variables as it is consumed."""
    source = ("def late(xs):\n    n = 1\n    gen = (x * n for x in xs if x)\n    n = 10\n"
              "    return list(gen), sum(x for x in xs)\n")
    lazy = _helper().lazy(source)
    assert "def _redline_generator_0(_redline_items):" in lazy and "sum(" in lazy
    assert lazy.count("_redline_generator_") == 2  # the sum's argument is left to mypyc
    spaces: dict[str, dict] = {"original": {}, "lazy": {}}
    exec(source, spaces["original"])
    exec(lazy, spaces["lazy"])
    assert spaces["lazy"]["late"]([0, 1, 2]) == spaces["original"]["late"]([0, 1, 2]) == ([10, 20], 3)


def test_a_method_is_not_proposed_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("class A:\n    def f(self, x: int) -> int:\n        return x + 1\n")
    ctx = Context(target=target_in(tmp_path / "m.py", "A.f"), round=1)
    assert MypycProposer().skip(ctx) == "a method (a function mypyc compiles does not bind to an instance)"


@pytest.mark.slow
def test_a_callee_mypy_rejects_is_left_to_python_and_the_rest_compile(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "def wrong(x: int) -> str:\n    return x\n\n\ndef right(x: int) -> int:\n    return x * 2\n\n\n"
        "def worse(x: int) -> str:\n    return x + 1\n\n\n"
        "def total(xs: list[int]) -> int:\n    return sum(right(x) for x in xs) + len(wrong(1) or worse(2) or '')\n")
    t = target_in(tmp_path / "m.py", "total")
    assert [name for name, _ in callees(t)] == ["right", "wrong", "worse"]
    error, kept = _built(t, callees(t))
    assert error is None and [name for name, _ in kept] == ["right"]
    alone = target_in(tmp_path / "m.py", "wrong")
    error, _ = _built(alone, [])
    assert error is not None and 'Incompatible return value type (got "int", expected "str")' in error


@pytest.mark.slow
def test_a_typed_parser_compiled_with_mypyc_is_verified_and_the_edit_compiles_it_where_it_runs(tmp_path: Path) -> None:
    doc, _ = optimise(tmp_path, "plain_config.py", "parse", "--builtin", "mypyc", "--budget", "2")
    cands = [c for c in doc["candidates"] if c["origin"] == "builtin:mypyc"]
    assert [c["approach"].split(";")[0] for c in cands] == [
        "compiled with mypyc",
        "compiled with mypyc, with compiled copies of the functions it calls (parse_key, skip, parse_value, "
        "parse_string, parse_list) for its own calls"]
    assert all(c["status"] in ("ok", "not_faster") for c in cands), [(c["status"], c["reason"]) for c in cands]
    if doc["winner"] is not None:
        assert doc["winner"]["needs"] == ["mypy", "setuptools"]
    # The edit written into a copy of the module, run in a fresh interpreter with its own build cache:
    # compiled on first use, the same results and the module's own error type from the compiled code.
    target = target_in(tmp_path / "work" / "plain_config.py", "parse")
    work = tmp_path / "applied"
    work.mkdir()
    (work / "plain_config.py").write_text(apply_candidate(target, cands[1]["code"]))
    spec = importlib.util.spec_from_file_location("original", WORKLOADS / "plain_config.py")
    assert spec and spec.loader
    original = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(original)
    expected = [repr(original.parse(*original.make_inputs(seed))) for seed in (5, 6)]
    env = {**os.environ, "REDLINE_CYTHON_CACHE": str(tmp_path / "cache")}
    call = ("import plain_config as m\nfor seed in (5, 6):\n    print(repr(m.parse(*m.make_inputs(seed))))\n"
            "print(type(m.parse.compiled).__name__)\n"
            "try:\n    m.parse('[s]\\nkey = ')\nexcept m.ConfigError as exc:\n    print('raised', exc)\n")
    done = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", call], cwd=work, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [*expected, "builtin_function_or_method", "raised expected a value (at 5)"]
