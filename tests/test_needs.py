"""What a winner adds to the project (a package it imports) is offered in the same diff as a change to
pyproject.toml's dependencies, and written only with the winner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import REPO, redline
from redline.evaluator.needs import dependency_edit, needs
from redline.evaluator.proposers.compiled import candidate
from redline.evaluator.proposers.mypyc import candidate as mypyc_candidate
from redline.evaluator.target import Target, locate


@pytest.mark.parametrize("pyproject, expected", [
    ('[project]\nname = "x"\ndependencies = [\n    "numpy>=1.26",\n]\n',
     '[project]\nname = "x"\ndependencies = [\n    "numpy>=1.26",\n    "numba",\n]\n'),
    ('[project]\nname = "x"\ndependencies = ["numpy"]\n\n[tool.x]\ny = 1\n',
     '[project]\nname = "x"\ndependencies = ["numpy",\n    "numba",\n]\n\n[tool.x]\ny = 1\n'),
    ('[project]\nname = "x"\ndependencies = []\n', '[project]\nname = "x"\ndependencies = [\n    "numba",\n]\n'),
])
def test_a_requirement_is_added_to_the_dependencies_list(tmp_path: Path, pyproject: str, expected: str) -> None:
    (tmp_path / "pyproject.toml").write_text(pyproject)
    edit = dependency_edit(tmp_path, ["numba"])
    assert edit is not None and edit.text == expected


@pytest.mark.parametrize("pyproject", [
    None,  # no pyproject.toml
    '[project]\nname = "x"\n',  # no dependencies list to add to
    '[project]\nname = "x"\ndependencies = ["Numba>=0.60"]\n',  # already there, by its normalised name
    '[tool.poetry]\nname = "x"\n',  # not a [project] table
])
def test_nothing_is_edited_where_there_is_nothing_to_add_to(tmp_path: Path, pyproject: str | None) -> None:
    if pyproject is not None:
        (tmp_path / "pyproject.toml").write_text(pyproject)
    assert dependency_edit(tmp_path, ["numba"]) is None


def test_a_compiled_function_needs_its_compiler_where_it_runs(tmp_path: Path) -> None:
    """The compiling proposers' decorators import Cython or mypyc only when they first compile: the
    winner still declares the one it uses (mypyc's carries Cython's class, which it builds on, and needs
    mypy and the setuptools it builds with), and a module that already carries the decorator adds nothing."""
    file = tmp_path / "m.py"
    file.write_text("def total(xs):\n    return sum(xs)\n")
    loc = locate(f"{file}::total")
    target = Target(loc.file, loc.qualname, loc.fn, loc.source, tmp_path, None)  # type: ignore[arg-type]
    code = candidate(target, {"xs": "list"})
    assert needs(target, code) == ["cython"]
    carried = Target(loc.file, loc.qualname, loc.fn, code, tmp_path, None)  # type: ignore[arg-type]
    assert needs(carried, code) == []
    assert needs(target, mypyc_candidate(target, [])) == ["mypy", "setuptools"]


@pytest.mark.slow
def test_the_winner_and_its_dependency_are_one_diff_and_one_apply(tmp_path: Path) -> None:
    pytest.importorskip("numba")
    shutil.copy(REPO / "examples" / "demo" / "app.py", tmp_path / "app.py")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\ndependencies = [\n    "numpy>=1.26",\n]\n')
    report = tmp_path / "r.json"
    run = redline("optimise", "app.py::rolling_zscore", "--builtin", "numba", "--budget", "1", "--apply",
                  "--json", str(report), cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    winner = json.loads(report.read_text())["winner"]
    assert winner["needs"] == ["numba"]
    assert "+++ b/app.py" in winner["diff"] and "+++ b/pyproject.toml" in winner["diff"]
    assert '+    "numba",' in winner["diff"]
    assert "the winner needs numba where the program runs (added to pyproject.toml's dependencies" in run.stdout
    assert '"numba",' in (tmp_path / "pyproject.toml").read_text() and "numba.njit" in (tmp_path / "app.py").read_text()
