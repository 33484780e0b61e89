"""Where a target's inputs come from: `--inputs`, `make_inputs` in its module, calls captured from a
real run (`redline capture`), or a KernelBench file's `get_inputs`. One `InputSource` per run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .store import Manifest

InputKind = Literal["make_inputs", "captured", "kernelbench"]


@dataclass(frozen=True)
class InputSource:
    kind: InputKind
    file: Path | None = None  # make_inputs: the file that defines the function
    func: str = ""  # make_inputs: its name
    store: Path | None = None  # captured: the store folder
    manifest: Manifest | None = None  # captured: what the capture kept

    def describe(self) -> str:
        if self.kind == "captured" and self.manifest is not None:
            m = self.manifest
            return (f"{m.calls_kept} calls captured from `{' '.join(m.command)}` on {m.captured_at} "
                    f"({m.calls_seen} seen)")
        if self.kind == "make_inputs":
            return f"{self.func}(seed) in {self.file}"
        return "get_inputs() of the KernelBench file"


__all__ = ["InputKind", "InputSource", "Manifest"]
