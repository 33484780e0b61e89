"""The one error type every trace reader raises."""

from __future__ import annotations

from pathlib import Path


class ParseError(Exception):
    """A trace could not be read: names the file, the place in it, and what was expected."""

    def __init__(self, file: str | Path, place: str, expected: str) -> None:
        self.file = str(file)
        self.place = place
        self.expected = expected
        super().__init__(f"{self.file}: {place}: {expected}")
