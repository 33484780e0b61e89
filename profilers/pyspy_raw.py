"""py-spy `--format raw`: collapsed stacks, one `frame;frame;... COUNT` line per unique stack.

A frame is `name (file:line)`, `name (file)` with `--nolineno`, or a bare native symbol.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import ParseError
from .model import Frame, Profile
from .speedscope import frame_kind

_FRAME = re.compile(r"^(?P<name>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def parse_frame(text: str) -> Frame:
    m = _FRAME.match(text)
    if m is None:
        return Frame(text, None, None, "native")
    file = m.group("file")
    line = int(m.group("line")) if m.group("line") else None
    return Frame(m.group("name"), file, line, frame_kind(m.group("name"), file))


def read_raw(path: str | Path, data: bytes | None = None) -> Profile:
    """Read collapsed stacks; weights are sample counts."""
    path = Path(path)
    if data is None:
        data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(path, f"byte {exc.start}", "UTF-8 text")
    profile = Profile(unit="samples", sources=[str(path)])
    cache: dict[str, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        stack_text, sep, count_text = line.rstrip().rpartition(" ")
        if not sep or not count_text.isdigit():
            raise ParseError(path, f"line {lineno}", "'frame;frame;... COUNT' with a whole-number count")
        if not stack_text.strip():
            continue  # py-spy writes samples that caught no Python frame with an empty stack
        stack = []
        for part in stack_text.split(";"):
            idx = cache.get(part)
            if idx is None:
                idx = cache[part] = profile.frame_id(parse_frame(part))
            stack.append(idx)
        count = int(count_text)
        if count > 1 << 53:
            raise ParseError(path, f"line {lineno}", f"a plausible sample count (got {count_text})")
        profile.add("cpu", tuple(stack), float(count), count)
    if not profile.weights:
        raise ParseError(path, "line 1", "at least one 'frame;frame;... COUNT' line")
    return profile
