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


@dataclass
class Runs:
    offers: dict[str, Offer] = field(default_factory=dict)
    running: dict[str, threading.Event] = field(default_factory=dict)
