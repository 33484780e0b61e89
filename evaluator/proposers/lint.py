"""ruff's fixes of the performance-relevant rule families, applied to the target alone.

ruff marks many of these fixes unsafe because they can change behaviour in general (a comprehension
where a loop appended, `min` where `sorted(...)[0]` was); each candidate here is verified by the gate
on the target's own calls, so an unsafe fix that is right for this code is offered as verified on
its inputs, and one that is not is rejected like any other candidate. Preview fixes are included.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from . import Context, Proposal, Proposer

# Rule families whose fixes can make code faster, as ruff selects them, with what they rewrite.
FAMILIES: dict[str, tuple[str, str]] = {
    "PERF": ("PERF", "perflint: comprehensions for append loops, dict iteration"),
    "FURB": ("FURB", "refurb: min/max for sorted()[0], extend, itemgetter, membership"),
    "C4": ("C4", "flake8-comprehensions: no needless list()/dict() calls"),
    "SIM": ("SIM", "flake8-simplify: any/all for loops, dict.get, key in dict"),
    "PL": ("PLR1714,PLR6201,PLR1733,PLR1736", "pylint: set literals for membership, no repeated index lookups"),
    "RUF": ("RUF015,RUF017", "ruff: next(iter()) for list()[0], no quadratic list sums"),
    "UP": ("UP", "pyupgrade: f-strings, builtin types"),
    "PIE": ("PIE", "flake8-pie: startswith with a tuple, no needless range start"),
}
TIMEOUT_S = 30.0


def ruff_binary() -> str | None:
    try:
        from ruff import find_ruff_bin  # the wheel's own binary, whatever is on PATH

        return str(find_ruff_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("ruff")


def target_version(file: Path) -> str:
    """ruff's --target-version for the project: its requires-python lower bound, else this interpreter's."""
    for parent in file.parents:
        pyproject = parent / "pyproject.toml"
        if pyproject.is_file():
            found = re.search(r"^requires-python\s*=\s*[\"']\s*(?:>=|~=|==)\s*3\.(\d+)", pyproject.read_text(
                errors="replace"), re.M)
            if found:
                return f"py3{found.group(1)}"
            break
    return f"py3{sys.version_info.minor}"


@dataclass(frozen=True)
class Fixed:
    source: str
    rules: tuple[str, ...]  # the codes ruff fixed
    rows: tuple[int, ...]  # where their violations were, lines of the function source (1-based)


class Ruff:
    """One target's function source, checked and fixed by ruff with one rule selection at a time."""

    def __init__(self, binary: str, source: str, version: str) -> None:
        self.binary, self.source, self.version = binary, source, version

    def _run(self, select: str, fix: bool, source: str) -> str:
        args = [self.binary, "check", "--isolated", "--preview", "--select", select, "--target-version",
                self.version, "--exit-zero", "--stdin-filename", "target.py", "--no-cache"]
        args += ["--fix", "--unsafe-fixes", "-q"] if fix else ["--output-format", "json"]
        done = subprocess.run(args, input=source, capture_output=True, text=True, timeout=TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"ruff {select}: {done.stderr.strip()[-300:]}")
        return done.stdout

    def fix(self, select: str) -> Fixed | None:
        """The source with the selection's fixes applied, None where ruff has none that change it."""
        found = [v for v in json.loads(self._run(select, False, self.source) or "[]") if v.get("fix")]
        if not found:
            return None
        fixed = self._run(select, True, self.source)
        if fixed.strip() == self.source.strip():
            return None
        return Fixed(fixed, tuple(dict.fromkeys(v["code"] for v in found)),
                     tuple(v["location"]["row"] for v in found))


class RuffFixProposer(Proposer):
    """One candidate per rule family whose fixes change the target, and one with all of them; the
    families whose fixes touch the profile's hottest lines first."""

    name = "ruff-fixes"

    def skip(self, ctx: Context) -> str | None:
        if ruff_binary() is None:
            return "ruff is not installed (pip install ruff)"
        return None

    def propose(self, ctx: Context) -> list[Proposal]:
        binary = ruff_binary()
        if ctx.round != 1 or binary is None:
            return []
        source = textwrap.dedent(ctx.target.function_source)
        ruff = Ruff(binary, source, target_version(ctx.target.file))
        ranked: list[tuple[float, Proposal]] = []
        seen = {source.strip()}
        changed = []
        for family, (select, what) in FAMILIES.items():
            fixed = ruff.fix(select)
            if fixed is None or fixed.source.strip() in seen:
                continue
            seen.add(fixed.source.strip())
            changed.append(select)
            ranked.append((heat(ctx, fixed.rows), _proposal(fixed, f"ruff {family} fixes ({what})")))
        ranked.sort(key=lambda pair: -pair[0])
        out = [proposal for _, proposal in ranked]
        if len(changed) > 1:
            fixed = ruff.fix(",".join(changed))
            if fixed is not None and fixed.source.strip() not in seen:
                out.insert(0, _proposal(fixed, "ruff fixes of every family above"))
        return out


def heat(ctx: Context, rows: tuple[int, ...]) -> float:
    """The profile's share of the target's lines at `rows` (lines of its function source)."""
    first = ctx.target.fn.line
    return sum(ctx.hot_lines.get(first + row - 1, 0.0) for row in set(rows))


def _proposal(fixed: Fixed, approach: str) -> Proposal:
    return Proposal(code=fixed.source, origin="builtin:ruff-fixes", approach=f"{approach}: {', '.join(fixed.rules)}",
                    trusted=True)
