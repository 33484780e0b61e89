"""Which inputs each stage runs on: fresh seeds for `make_inputs`, captured calls by index.

A request to the worker names its inputs as integers ("seeds"): a seed for `make_inputs(seed)`, or
the index of a captured call. Captured calls are fixed and known, so they are checked for what the
reference reproduces first, timed as a mix weighted like the recorded run, and a share of them is
held back from the candidate until it is timed on them (see first_seen_split).
"""

from __future__ import annotations

import contextlib
import hashlib
import random
from typing import Any

from pydantic import BaseModel, ConfigDict

from . import InputSource

_rng = random.SystemRandom()

# The fewest distinct captured calls the first-seen timing splits into a warm-up half and a timed half.
FIRST_SEEN_FEWEST = 3


def fresh_seeds(n: int) -> list[int]:
    """Seeds the candidate cannot predict."""
    return [_rng.randrange(1, 2**31 - 1) for _ in range(n)]


class InputsInfo(BaseModel):
    """The report's account of where the inputs came from (docs/cli.md, `redline optimise`)."""

    model_config = ConfigDict(extra="forbid")
    source: str
    detail: str = ""
    calls: int | None = None  # captured: calls used (those the reference reproduces)
    excluded: int = 0  # captured: calls left out because the reference does not reproduce them
    excluded_reasons: dict[str, int] = {}
    # captured: each excluded call (its index in the store) and its first difference, both values named
    excluded_calls: dict[int, str] = {}
    command: list[str] = []
    captured_at: str = ""


class InputPlan:
    def __init__(self, source: InputSource) -> None:
        self.source = source
        self.captured = source.kind == "captured"
        manifest = source.manifest
        self._all = list(range(manifest.calls_kept)) if manifest is not None else []
        self._weights = manifest.weights() if manifest is not None else []
        self.keys = list(self._all)  # captured calls in use: narrowed to those the reference reproduces
        self.excluded: dict[str, int] = {}
        self.excluded_calls: dict[int, str] = {}  # each excluded call's first difference (for the report)
        # Calls recorded raising are checked (the candidate must raise the same) but not timed.
        self._raising = {i for i, c in enumerate(manifest.calls) if c.outcome == "raise"} if manifest else set()
        self._digests: dict[int, str] = {}

    @property
    def timed_keys(self) -> list[int]:
        return [k for k in self.keys if k not in self._raising]

    def worker_spec(self) -> dict[str, Any]:
        s = self.source
        if s.kind == "make_inputs":
            return {"kind": "make_inputs", "file": str(s.file), "func": s.func}
        if s.kind == "captured" and s.manifest is not None:
            return {"kind": "captured", "store": str(s.store), "module": s.manifest.module,
                    "calls": [c.file for c in s.manifest.calls]}
        return {"kind": s.kind}

    def reproduced(self, kept: list[int], excluded: dict[str, int]) -> None:
        self.keys = kept
        self.excluded = excluded
        if not self.timed_keys:
            raise ValueError(f"all {len(kept)} captured calls that the target reproduces raise: none can be timed")

    def check_keys(self, seeds: int) -> list[int]:
        """What the correctness gate runs: every captured call in use, or `seeds` fresh seeds."""
        return list(self.keys) if self.captured else fresh_seeds(seeds)

    def timing_keys(self, n: int) -> list[int]:
        """`n` inputs for a timed batch: captured calls drawn by their weight in the recorded run."""
        if not self.captured:
            return fresh_seeds(n)
        keys = self.timed_keys
        return _rng.choices(keys, weights=[self._weights[k] for k in keys], k=n)

    def weight(self, key: int) -> float:
        return self._weights[key] if self.captured else 1.0

    def few_distinct_calls(self) -> bool:
        """Whether the timed captured calls differ too little to warm up on some and time others
        (fewer than FIRST_SEEN_FEWEST distinct; identical calls, as stored, count once)."""
        return len({self._content(k) for k in self.timed_keys}) < FIRST_SEEN_FEWEST

    def first_seen_split(self) -> tuple[list[int], list[int]]:
        """Captured calls in two random halves: the warm-up's, and those first seen by the candidate
        in the first-seen timing. A program repeats calls (the same document parsed each round), so the
        store may hold one call twice: identical calls go to the same half, and the first-seen half
        times one of each, so that no call it times has been run before, by either side. Fewer than
        FIRST_SEEN_FEWEST distinct calls: no warm-up, each first seen."""
        groups: dict[str, list[int]] = {}
        for k in self.timed_keys:
            groups.setdefault(self._content(k), []).append(k)
        order = list(groups.values())
        _rng.shuffle(order)
        if len(order) < FIRST_SEEN_FEWEST:
            return [], [g[0] for g in order]
        half = len(order) // 2
        return [k for g in order[:half] for k in g], [g[0] for g in order[half:]]

    def _content(self, key: int) -> str:
        """A digest of captured call `key` as stored (its arguments and outcome): equal for identical calls."""
        if key not in self._digests:
            s, data = self.source, str(key).encode()
            if s.store is not None and s.manifest is not None:
                with contextlib.suppress(OSError):
                    data = (s.store / s.manifest.calls[key].file).read_bytes()
            self._digests[key] = hashlib.sha256(data).hexdigest()
        return self._digests[key]

    def info(self) -> InputsInfo:
        m = self.source.manifest
        if not self.captured or m is None:
            return InputsInfo(source=self.source.kind, detail=self.source.describe())
        return InputsInfo(source="captured", detail=self.source.describe(), calls=len(self.keys),
                          excluded=sum(self.excluded.values()), excluded_reasons=self.excluded,
                          excluded_calls=self.excluded_calls,
                          command=m.command, captured_at=m.captured_at)
