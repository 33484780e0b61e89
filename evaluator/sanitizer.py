"""compute-sanitizer on a verified CUDA candidate: memory errors and races that no output comparison
shows (a kernel that writes past its buffer into memory nothing reads, a race that loses only
sometimes).

The candidate runs in its sandboxed worker under each tool in turn (memcheck: out-of-bounds and
misaligned accesses; initcheck: reads of device memory never written; racecheck, for code that
uses shared memory: hazards between threads of a block) on one fresh input; the tool's report goes
to a file in the worker's scratch directory and its summary line decides.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

LOG = "sanitizer.log"  # in the worker's scratch
_SUMMARY = re.compile(r"(ERROR SUMMARY: (?P<errors>\d+) errors?|RACECHECK SUMMARY: \d+ hazards? displayed "
                      r"\((?P<races>\d+) errors?)")
_FINDING = re.compile(r"^=+\s+(?P<what>(Invalid|Misaligned|Uninitialized|Error|Race|Program hit|Out-of-range|"
                      r"Malformed|Barrier|Leaked).*)$", re.M)
_SHARED = re.compile(r"__shared__|tl\.dot|tl\.reduce|tl\.sum|tl\.max|tl\.min|tl\.cumsum|shared_memory|load_inline")


def sanitizer_path() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    path = Path(home) / "bin" / "compute-sanitizer"
    return str(path) if path.is_file() else None


def tools_for(code: str) -> tuple[str, ...]:
    """memcheck and initcheck always; racecheck where the code can use shared memory (CUDA C++ with
    `__shared__`, Triton reductions and dots, inline extensions)."""
    return ("memcheck", "initcheck", "racecheck") if _SHARED.search(code) else ("memcheck", "initcheck")


def prefix(sanitizer: str, tool: str) -> tuple[str, ...]:
    return (sanitizer, "--tool", tool, "--target-processes", "all", "--print-limit", "8",
            "--log-file", f"{{scratch}}/{LOG}")


@dataclass
class Finding:
    tool: str
    errors: int
    first: str  # the first reported problem, in the tool's words


def read_log(scratch: Path, tool: str) -> Finding | None:
    """The tool's verdict from its log: a Finding (errors may be 0), or None without a summary line."""
    try:
        text = (scratch / LOG).read_text(errors="replace")
    except OSError:
        return None
    summaries = list(_SUMMARY.finditer(text))
    if not summaries:
        return None
    last = summaries[-1]
    errors = int(last.group("errors") or last.group("races") or 0)
    first = _FINDING.search(text)
    return Finding(tool, errors, first.group("what").strip() if first else "")
