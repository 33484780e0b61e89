"""speedscope JSON (py-spy's `--format speedscope`, and any exporter's `sampled`/`evented` files).

Mirrors speedscope's `src/lib/file-format-spec.ts`. The bulk of a sampled file is its `samples`
and `weights` arrays; those are read straight from the bytes (they hold only numbers and
brackets, so their extent is found without a tokenizer) and collapsed into unique stacks,
which keeps a million-sample file within a small multiple of its size in memory. Everything
else goes through `json` and the pydantic models below.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ParseError
from .model import Frame, FrameKind, Profile, Stack

_TIME_UNITS = {"nanoseconds": 1e-9, "microseconds": 1e-6, "milliseconds": 1e-3, "seconds": 1.0}


class _Spec(BaseModel):
    model_config = ConfigDict(extra="allow")


class SFrame(_Spec):
    name: str
    file: str | None = None
    line: int | None = None
    col: int | None = None


class Shared(_Spec):
    frames: list[SFrame]


ValueUnit = Literal["none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"]


class SampledProfile(_Spec):
    type: Literal["sampled"]
    name: str = ""
    unit: ValueUnit
    startValue: float
    endValue: float
    samples: list[list[Annotated[int, Field(ge=0)]]]
    weights: list[float]


class FrameEvent(_Spec):
    type: Literal["O", "C"]
    frame: Annotated[int, Field(ge=0)]
    at: float


class EventedProfile(_Spec):
    type: Literal["evented"]
    name: str = ""
    unit: ValueUnit
    startValue: float
    endValue: float
    events: list[FrameEvent]


class SpeedscopeFile(_Spec):
    shared: Shared
    profiles: list[Annotated[SampledProfile | EventedProfile, Field(discriminator="type")]]
    name: str | None = None
    exporter: str | None = None
    activeProfileIndex: int | None = None


def frame_kind(name: str, file: str | None) -> FrameKind:
    """Python frames name a source file (or a `<frozen ...>` module); the rest are native."""
    if file and (file.endswith((".py", ".pyx", ".pyi")) or file.startswith("<")):
        return "python"
    return "idle" if name.strip("<>").lower() == "idle" else "native"


def _place(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "top level"


# A key is structural (not inside a string) when the character before its opening quote is
# one of these: inside a JSON string every quote is preceded by a backslash.
_BIG_ARRAY = re.compile(rb'(?<=[{,\s])"(samples|weights)"\s*:\s*(?=\[)')
_INTS = b"0123456789,[] \t\r\n"
_NUMS = b"0123456789.eE+-,[] \t\r\n"
_INNER = re.compile(rb"\[([^\[\]]*)\]")
_NUMBER = re.compile(rb"[^,\s\[\]]+")
_CHUNK = 8 << 20


def _line_col(data: bytes, pos: int) -> str:
    line = data.count(b"\n", 0, pos) + 1
    col = pos - (data.rfind(b"\n", 0, pos) + 1) + 1
    return f"line {line} column {col}"


def _array_end(data: bytes, start: int) -> int:
    """End (exclusive) of the number-only array starting at `start`: it stops before the next
    quote or brace, then back over whitespace and a separating comma."""
    stops = [i for i in (data.find(b'"', start), data.find(b"}", start)) if i >= 0]
    end = min(stops) if stops else len(data)
    while end > start and data[end - 1] in b" \t\r\n,":
        end -= 1
    return end


def _count_stacks(data: bytes, start: int, end: int) -> Counter[bytes]:
    counts: Counter[bytes] = Counter()
    pos = start + 1  # past the outer '['
    stop = end - 1  # the outer ']'
    while pos < stop:
        cut = min(stop, pos + _CHUNK)
        if cut < stop:
            cut = data.rfind(b"]", pos, cut) + 1 or stop
        counts.update(_INNER.findall(data, pos, cut))
        pos = cut
    return counts


def _weights(data: bytes, start: int, end: int) -> list[bytes]:
    return _NUMBER.findall(data, start, end)


def read_speedscope(path: str | Path, data: bytes | None = None) -> Profile:
    """Read a speedscope file (all profiles: every thread and process) into a Profile."""
    path = Path(path)
    if data is None:
        data = path.read_bytes()
    big: list[tuple[str, int, int]] = []
    for m in _BIG_ARRAY.finditer(data):
        start = m.end()
        end = _array_end(data, start)
        allowed = _INTS if m.group(1) == b"samples" else _NUMS
        if end <= start or data[end - 1] != ord("]") or data[start:end].translate(None, allowed):
            raise ParseError(path, f"{m.group(1).decode()} array at {_line_col(data, start)}",
                             "an array of " + ("frame-index arrays" if m.group(1) == b"samples" else "numbers"))
        big.append((m.group(1).decode(), start, end))
    pieces, prev = [], 0
    for _, start, end in big:
        pieces += [data[prev:start], b"[]"]
        prev = end
    pieces.append(data[prev:])
    rest = b"".join(pieces)
    try:
        doc = json.loads(rest)
    except (UnicodeDecodeError, RecursionError) as exc:
        raise ParseError(path, "top level", f"UTF-8 JSON ({exc.__class__.__name__})")
    except json.JSONDecodeError as exc:
        shift = 0
        for _, start, end in big:  # map the position back onto the original file
            if start + shift < exc.pos:
                shift += (end - start) - 2
        raise ParseError(path, _line_col(data, exc.pos + shift), f"valid JSON ({exc.msg})")
    if not isinstance(doc, dict):
        raise ParseError(path, "top level", "a JSON object with 'shared' and 'profiles'")
    try:
        spec = SpeedscopeFile.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ParseError(path, _place(tuple(err["loc"])), err["msg"])
    return _to_profile(path, data, spec, big)


def _to_profile(path: Path, data: bytes, spec: SpeedscopeFile, big: list[tuple[str, int, int]]) -> Profile:
    frames = spec.shared.frames
    profile = Profile(sources=[str(path)])
    ids = [profile.frame_id(Frame(f.name, f.file or None, f.line if f.line else None, frame_kind(f.name, f.file)))
           for f in frames]
    sampled = [p for p in spec.profiles if isinstance(p, SampledProfile)]
    pairs = [{big[i][0], big[i + 1][0]} for i in range(0, len(big) - 1, 2)]
    if len(big) != 2 * len(sampled) or any(pair != {"samples", "weights"} for pair in pairs):
        raise ParseError(path, "profiles", "one 'samples' and one 'weights' array per sampled profile")
    arrays = iter(big)
    units = {p.unit for p in spec.profiles}
    if len(units) > 1 and not units <= set(_TIME_UNITS):
        raise ParseError(path, "profiles", f"one kind of unit across profiles (found {sorted(units)})")
    unit = next(iter(units)) if units else "none"
    profile.unit = "seconds" if unit in _TIME_UNITS else ("samples" if unit == "none" else unit)
    pi = -1
    for p in spec.profiles:
        pi += 1
        scale = _TIME_UNITS.get(p.unit, 1.0)
        if isinstance(p, SampledProfile):
            first, second = next(arrays), next(arrays)
            s_arr, w_arr = (first, second) if first[0] == "samples" else (second, first)
            _add_sampled(path, pi, profile, data, s_arr, w_arr, ids, scale)
        else:
            _add_evented(path, pi, profile, p, ids, scale)
    return profile


def _add_sampled(path: Path, pi: int, profile: Profile, data: bytes, s_arr: tuple[str, int, int],
                 w_arr: tuple[str, int, int], ids: list[int], scale: float) -> None:
    counts = _count_stacks(data, s_arr[1], s_arr[2])
    n_samples = sum(counts.values())
    weights = _weights(data, w_arr[1], w_arr[2])
    if len(weights) != n_samples:
        raise ParseError(path, f"profiles[{pi}]", f"as many weights as samples ({len(weights)} weights, {n_samples} samples)")
    nframes = len(ids)
    distinct = set(weights)
    stacks: dict[bytes, Stack] = {}
    for key in counts:
        try:
            stack = tuple(ids[int(x)] for x in key.split(b",")) if key.strip() else ()
        except (ValueError, IndexError):
            bad = [x for x in key.split(b",") if not x.strip().isdigit() or int(x) >= nframes]
            raise ParseError(path, f"profiles[{pi}].samples",
                             f"frame indices below {nframes} (found {bad[0].strip().decode()!r})")
        stacks[key] = stack
    try:
        values = {w: float(w) * scale for w in distinct}
    except ValueError:
        raise ParseError(path, f"profiles[{pi}].weights", "numbers")
    if any(v < 0 or v != v or v == float("inf") for v in values.values()):
        raise ParseError(path, f"profiles[{pi}].weights", "finite, non-negative weights")
    if len(distinct) == 1:
        w = values[next(iter(distinct))]
        for key, n in counts.items():
            if stacks[key]:
                profile.add("cpu", stacks[key], w * n, n)
        return
    # Weights differ: pair them with samples in order (the general, slower path).
    pos, stop = s_arr[1] + 1, s_arr[2] - 1
    for i, m in enumerate(_INNER.finditer(data, pos, stop)):
        stack = stacks[m.group(1)]
        if stack:
            profile.add("cpu", stack, values[weights[i]], 1)


def _add_evented(path: Path, pi: int, profile: Profile, p: EventedProfile, ids: list[int], scale: float) -> None:
    open_stack: list[int] = []
    last = p.startValue
    for ei, ev in enumerate(p.events):
        place = f"profiles[{pi}].events[{ei}]"
        if ev.frame >= len(ids):
            raise ParseError(path, place, f"a frame index below {len(ids)}")
        if ev.at < last:
            raise ParseError(path, place, f"'at' not before the previous event ({ev.at} < {last})")
        if open_stack and ev.at > last:
            profile.add("cpu", tuple(ids[i] for i in open_stack), (ev.at - last) * scale, 1)
        last = ev.at
        if ev.type == "O":
            open_stack.append(ev.frame)
        elif not open_stack or open_stack[-1] != ev.frame:
            raise ParseError(path, place, "a close event for the innermost open frame")
        else:
            open_stack.pop()
    if open_stack:
        raise ParseError(path, f"profiles[{pi}].events", "every opened frame closed")
