"""A configuration-file parser as typed backend code writes one: annotated functions passing a position
through the text (as tomli does), module-level character sets, its own error type."""

from __future__ import annotations

import random

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

Value = int | float | str | bool | list

SPACE = frozenset(" \t")
KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
DIGITS = frozenset("0123456789-+.e")


class ConfigError(ValueError):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(f"{message} (at {pos})")
        self.pos = pos


def skip(src: str, pos: int, chars: Iterable[str]) -> int:
    try:
        while src[pos] in chars:
            pos += 1
    except IndexError:
        pass
    return pos


def parse_key(src: str, pos: int) -> tuple[int, str]:
    start = pos
    pos = skip(src, pos, KEY_CHARS)
    if pos == start:
        raise ConfigError("expected a key", pos)
    return pos, src[start:pos]


def parse_string(src: str, pos: int) -> tuple[int, str]:
    end = src.find('"', pos + 1)
    if end < 0:
        raise ConfigError("unterminated string", pos)
    return end + 1, src[pos + 1:end]


def parse_list(src: str, pos: int) -> tuple[int, list]:
    items: list = []
    pos += 1
    while True:
        pos = skip(src, pos, SPACE)
        if src.startswith("]", pos):
            return pos + 1, items
        pos, item = parse_value(src, pos)
        items.append(item)
        pos = skip(src, pos, SPACE)
        if src.startswith(",", pos):
            pos += 1


def parse_value(src: str, pos: int) -> tuple[int, Value]:
    char = src[pos] if pos < len(src) else ""
    if char == '"':
        return parse_string(src, pos)
    if char == "[":
        return parse_list(src, pos)
    if src.startswith("true", pos):
        return pos + 4, True
    if src.startswith("false", pos):
        return pos + 5, False
    start = pos
    pos = skip(src, pos, DIGITS)
    text = src[start:pos]
    if not text:
        raise ConfigError("expected a value", start)
    return pos, float(text) if "." in text or "e" in text else int(text)


def parse(text: str) -> dict[str, dict[str, Value]]:
    """Sections of `key = value` lines; a value is a number, a quoted string, true/false or a list."""
    out: dict[str, dict[str, Value]] = {}
    section = out.setdefault("", {})
    lines = (line.strip() for line in text.split("\n"))
    for line in lines:
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = out.setdefault(line[1:line.index("]")], {})
            continue
        pos, key = parse_key(line, 0)
        pos = skip(line, pos, SPACE)
        if not line.startswith("=", pos):
            raise ConfigError("expected '='", pos)
        pos, section[key] = parse_value(line, skip(line, pos + 1, SPACE))
    return out


def make_inputs(seed: int) -> tuple[str]:
    rnd = random.Random(seed)
    values = ["1", "-2.5e3", "true", "false", '"a string"', "[1, 2, 3]", '["x", "y"]', "12345"]
    lines = []
    for s in range(rnd.randint(20, 40)):
        lines.append(f"[section{s}]")
        lines += [f"key_{k}.{s} = {rnd.choice(values)}" for k in range(rnd.randint(3, 9))]
        lines.append("# a comment")
    return ("\n".join(lines),)
