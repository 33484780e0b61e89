"""Optimise runs the server holds: those running (their cancel events) and winners awaiting review."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from redline.evaluator.models import Report
from redline.evaluator.target import Target


@dataclass
class Offer:
    """A verified winner waiting for the user's decision."""

    run_id: str
    uri: str
    target: Target
    report: Report
    new_source: str
    version: int | None


@dataclass(frozen=True)
class Accepted:
    """A winner the user accepted: what a re-profile's program-level change is put next to."""

    function: str
    file: str  # as a profile names it: relative to the workspace root, or absolute outside it
    speedup: float


@dataclass
class Runs:
    offers: dict[str, Offer] = field(default_factory=dict)
    running: dict[str, threading.Event] = field(default_factory=dict)
    # Functions an accepted winner changed since the loaded profile was recorded: uri -> qualname -> when.
    changed: dict[str, dict[str, float]] = field(default_factory=dict)
    accepted: dict[str, Accepted] = field(default_factory=dict)  # run id -> what its accepted winner was

    def changed_in(self, uri: str) -> set[str]:
        return set(self.changed.get(uri, {}))

    def profiled_since(self, recorded: float) -> None:
        """A profile recorded at `recorded` (epoch seconds) is loaded: what changed before it is measured."""
        for uri in list(self.changed):
            self.changed[uri] = {q: t for q, t in self.changed[uri].items() if t > recorded}
            if not self.changed[uri]:
                del self.changed[uri]
