"""The harness <-> worker protocol: typed requests, and one JSON reply per request, read as the model of
its operation and validated before use."""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

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
    fingerprint: str | None = None  # its canonical pickle's digest (see ops.fingerprint)
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


class _Reply(_Msg):
    """What every reply carries: whether the operation ran, and what the audit hook and the harness's
    own checks saw while it did."""

    ok: bool = False
    error: ErrorInfo | None = None
    violations: list[str] = []
    tamper: list[str] = []
    worker_s: float = 0.0  # the worker's own clock from request to reply


class LoadReply(_Reply):
    """The first reply: whether the subject loaded; for the trusted probe, its inputs and hardware."""

    op: Literal["load"]
    inputs: list[str] = []
    hardware: str = ""
    gpu: dict[str, Any] | None = None  # CUDA: the device's state and measured copy bandwidth


class CheckReply(_Reply):
    op: Literal["check"]
    results: list[SeedResult] = []


class VariantsReply(_Reply):
    op: Literal["variants"]
    variants: list[VariantRun] = []


class TimeReply(_Reply):
    op: Literal["time"]
    times: list[float] = []
    batch_s: float = 0.0
    outputs: dict[str, Encoded] = {}
    batch_error: str | None = None  # the call that raised: its exception type and message
    batch_traceback: str = ""  # and its traceback
    reused_buffer: bool = False
    threads_left: int = 0
    gpu: dict[str, Any] | None = None  # CUDA: clocks, temperature, and where a call's time went
    energy_j: float | None = None
    bytes_moved: int = 0


class ReproduceReply(_Reply):
    op: Literal["reproduce"]
    reproduced: list[Reproduced] = []


class LocalsReply(_Reply):
    op: Literal["locals"]
    types: dict[str, list[str]] = {}  # each local variable's types, as `module.qualname`
    callees: dict[str, dict[str, list[str]]] = {}  # the same for the module's functions it calls, by `name@line`


class OracleReply(_Reply):
    op: Literal["oracle"]
    oracles: list[Encoded | None] = []


class ProfileReply(_Reply):
    op: Literal["profile"]
    batch_error: str | None = None  # the first call that raised: its exception type and message


class EnergyReply(_Reply):
    op: Literal["energy"]
    energy_j: float | None = None
    calls: int = 0  # calls made in the measured window


Reply = Annotated[LoadReply | CheckReply | VariantsReply | TimeReply | ReproduceReply | LocalsReply | OracleReply
                  | ProfileReply | EnergyReply, Field(discriminator="op")]
REPLY: TypeAdapter[Reply] = TypeAdapter(Reply)
R = TypeVar("R", bound=_Reply)


class Request(_Msg, Generic[R]):
    """A request to a worker; its type parameter is the model its answer is read as (by `op`)."""

    op: str
    seeds: list[int]
    sample_seed: int = 0  # where large outputs are sampled (codec.py): the same for both sides


class Check(Request[CheckReply]):
    """Calls on each input: the outcome, inputs after, threads and streams left; `repeat` calls each."""

    op: Literal["check"] = "check"
    repeat: int = 1
    oracle: bool = False  # also the reference in float32, for half-precision outputs
    inputs_after: bool = True


class Variants(Request[VariantsReply]):
    """Edge variants of the first `inputs` inputs: listed, or those in `only` called one at a time."""

    op: Literal["variants"] = "variants"
    inputs: int = 2
    only: list[int] | None = None


class Time(Request[TimeReply]):
    """One timed batch: a call on each input, outputs kept for `keep`, started on the `core`-th core."""

    op: Literal["time"] = "time"
    keep: list[int] = []
    core: int | None = None
    ahead_s: float | None = None  # CUDA: how far ahead of the timed call the inputs are made ready


class Reproduce(Request[ReproduceReply]):
    op: Literal["reproduce"] = "reproduce"


class Locals(Request[LocalsReply]):
    """The reference on these calls, traced: the types its local variables held (the trusted probe only)."""

    op: Literal["locals"] = "locals"


class Oracle(Request[OracleReply]):
    op: Literal["oracle"] = "oracle"


class ProfiledCalls(Request[ProfileReply]):
    op: Literal["profile"] = "profile"


class Energy(Request[EnergyReply]):
    op: Literal["energy"] = "energy"
    min_s: float = 0.3
