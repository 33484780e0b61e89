"""The harness <-> worker protocol: one JSON reply per request, validated here before use."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# An encoded value (sandbox/redline_worker/codec.py): {"t": type name, ...}; compare.py reads its fields.
Encoded = dict[str, Any]


class _Msg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorInfo(_Msg):
    type: str = "Error"
    message: str = ""
    tb: str = ""


class Run(_Msg):
    """One call in a check request."""

    error: ErrorInfo | None
    output: Encoded | None = None
    aliases_input: bool = False
    inputs_after: Encoded | None = None
    threads_left: int = 0
    unordered: bool = False  # CUDA: the output changed after the call returned (work on an unjoined stream)


class SeedResult(_Msg):
    seed: int
    runs: list[Run] = Field(min_length=1)
    key: str = ""  # what identifies the input (sandbox/redline_worker/keys.py), for guarded specialisations
    oracle: Encoded | None = None  # the reference computed in float32 (half-precision outputs only)


class Reproduced(_Msg):
    """The reference on one captured call, next to what the capture recorded."""

    index: int
    error: ErrorInfo | None = None
    raises: str | None = None  # the exception type the recorded call raised
    recorded: Encoded | None = None  # the recorded return value, where it could be pickled
    recorded_type: str = ""  # its type, where it could not
    actual: Encoded | None = None
    actual_type: str = ""


class VariantRun(_Msg):
    """One edge variant of an input (another shape or layout), called once."""

    seed: int
    index: int
    base: str  # the shapes of the input as given
    label: str  # the variant's shapes (or what changed)
    error: ErrorInfo | None = None
    output: Encoded | None = None
    oracle: Encoded | None = None  # the reference's, in float32 (half-precision outputs only)
    layout_dependent: bool = False  # a layout variant whose result differs from the contiguous input's


class Reply(_Msg):
    """A worker's reply to `load`, `check` or `time`."""

    op: str
    ok: bool = False
    error: ErrorInfo | None = None
    violations: list[str] = []
    tamper: list[str] = []
    worker_s: float = 0.0  # the worker's own clock from request to reply
    # load, when the spec asks to describe (the trusted probe)
    inputs: list[str] = []
    hardware: str = ""
    # check
    results: list[SeedResult] = []
    # time
    times: list[float] = []
    batch_s: float = 0.0
    outputs: dict[str, Encoded] = {}
    batch_error: str | None = None
    reused_buffer: bool = False
    threads_left: int = 0
    # variants
    variants: list[VariantRun] = []
    # reproduce (captured calls)
    reproduced: list[Reproduced] = []
    # oracle
    oracles: list[Encoded | None] = []
    # CUDA only
    gpu: dict[str, Any] | None = None
    energy_j: float | None = None
    bytes_moved: int = 0
    # energy (CUDA with NVML): calls made in the measured window
    calls: int = 0
