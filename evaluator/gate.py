"""The correctness gate: the candidate against the reference on the same inputs, before any timing,
and the comparisons the timing stage reuses on timed calls' outputs."""

from __future__ import annotations

from dataclasses import dataclass, field

from .compare import Mismatch, Unsupported, canonical, compare
from .inputs.plan import InputPlan, fresh_seeds
from .models import EvalSettings
from .protocol import Check, CheckReply, Encoded, ErrorInfo, Oracle, Reproduced, Run, Variants
from .verdict import Channel, Rejected, error_line


@dataclass
class Checked:
    shapes: list[str] = field(default_factory=list)  # the edge variants the candidate matched the reference at
    # The reference's CUDA context failed at a variant (a device-side assert): nothing more runs in either
    # worker, so the edge checks stopped there and the timing needs a fresh pair.
    device_fault: bool = False


def is_device_fault(err: ErrorInfo | None) -> bool:
    """An error after which a process's CUDA context is unusable: torch reports a device-side assert or an
    illegal address as 'CUDA error: ...' (torch.AcceleratorError), here and on every later CUDA call."""
    return err is not None and err.message.startswith("CUDA error")


CHECK_BATCH = 8  # inputs per check request: each request has the sandbox's deadline, and captured calls can be slow


def checked(ch: Channel, seeds: list[int], repeat: int, sample: int, oracle: bool = False) -> CheckReply:
    """The check of `seeds` on one side, asked CHECK_BATCH inputs at a time (64 captured calls of a slow
    target in one request outlived its deadline), as one reply."""
    results = []
    for i in range(0, len(seeds), CHECK_BATCH):
        reply = ch.ask(Check(seeds=seeds[i:i + CHECK_BATCH], repeat=repeat, sample_seed=sample, oracle=oracle))
        results += reply.results
    return CheckReply(op="check", results=results)


class Gate:
    def __init__(self, settings: EvalSettings, plan: InputPlan) -> None:
        self.settings, self.plan = settings, plan

    def check(self, cand: Channel, ref: Channel) -> Checked:
        """Raise the candidate's verdict unless it matches the reference on every checked input: the
        same outcome (or exception type), the same on a second call, no threads or unordered streams
        left behind, no aliasing the reference does not do, and inputs left as the reference leaves them;
        then the same on edge variants of the inputs. Returns the variants' shapes it covered."""
        seeds = self.plan.check_keys(self.settings.check_seeds)
        # The candidate runs first: nothing the reference computes exists yet when it runs.
        sample = fresh_seeds(1)[0]  # where large outputs are sampled: the same for both, unknown before
        got = checked(cand, seeds, repeat=2, sample=sample)
        want = checked(ref, seeds, repeat=1, sample=sample, oracle=True)
        if len(want.results) != len(seeds) or len(got.results) != len(seeds) or \
                any(len(g.runs) != 2 for g in got.results) or [g.seed for g in got.results] != seeds:
            raise Rejected("crashed", "the candidate's check reply does not match the request")
        what = "a captured call" if self.plan.captured else "a fresh input"
        for r, g in zip(want.results, got.results, strict=True):
            self._one(r.runs[0], g.runs[0], g.runs[1], r.seed, r.oracle, what)
        try:
            return self._variants(cand, ref, [r.seed for r in want.results if r.runs[0].error is None])
        except Rejected as rej:
            if rej.status == "incorrect":  # right on every input as given, wrong at another shape or layout
                rej.correct_at = sorted({r.key for r in want.results if r.key})
            raise

    def _variants(self, cand: Channel, ref: Channel, seeds: list[int]) -> Checked:
        """The candidate on edge variants of the first inputs (other shapes and layouts, derived in the
        worker), one at a time so that a crash names its shapes: it must match the reference on every
        one the reference itself accepts, up to one at which the reference's CUDA context fails."""
        checked = Checked()
        if not seeds:
            return checked
        listing = ref.ask(Variants(seeds=seeds, inputs=2)).variants
        sample = fresh_seeds(1)[0]
        for v in listing:
            one = Variants(seeds=[v.seed], inputs=1, only=[v.index], sample_seed=sample)
            try:
                got = cand.ask(one).variants  # the candidate first, as in every check
            except Rejected as rej:  # it crashed or hung there: is that shape in the function's domain?
                want = ref.ask(one).variants
                if want and want[0].error is None and not want[0].layout_dependent:
                    raise Rejected("incorrect", f"correct at {v.base}; at {v.label} the reference returns, "
                                   f"{rej.reason}", rej.tail)
                raise Rejected(rej.status, f"correct at {v.base}; at {v.label} (outside the function's domain): "
                               f"{rej.reason}", rej.tail)
            want = ref.ask(one).variants
            if want and is_device_fault(want[0].error):
                checked.device_fault = True
                return checked
            if not want or want[0].error is not None or want[0].layout_dependent:
                continue  # outside the function's domain: the reference rejects it, or assumes a layout
            w, g = want[0], got[0] if got else None
            if g is None or g.error is not None:
                raise Rejected("incorrect", f"correct at {w.base}; at {w.label} the reference returns, the "
                               f"candidate {'raises ' + error_line(g.error) if g and g.error else 'does not run'}",
                               g.error.tb if g and g.error else "")
            self.same(w.output, g.output, "output", f"correct at {w.base}; wrong at {w.label}: ", oracle=w.oracle)
            if w.label not in checked.shapes:
                checked.shapes.append(w.label)
        return checked

    def _one(self, rr: Run, g1: Run, g2: Run, seed: int, oracle: Encoded | None, what: str) -> None:
        for run in (g1, g2):
            if run.threads_left > 0:
                raise Rejected("rejected_exploit", "left background threads running after returning "
                               "(work finishing outside the call)")
            if run.unordered:
                raise Rejected("rejected_exploit", "returned while its output was still being written on "
                               "another CUDA stream that the calling stream never waits for (a caller "
                               "reading it in stream order sees unfinished values)")
        if rr.error is not None:
            if g1.error is None or g1.error.type != rr.error.type:
                raise Rejected("incorrect", f"the reference raises {error_line(rr.error)} for "
                               f"{'captured call' if self.plan.captured else 'seed'} {seed}, the candidate "
                               f"{'returns' if g1.error is None else 'raises ' + g1.error.type}", rr.error.tb)
            return
        if g1.error is not None:
            raise Rejected("crashed", f"raised {error_line(g1.error)}", g1.error.tb)
        self.same(rr.output, g1.output, "output", f"wrong result for {what}: ", oracle=oracle)
        if g2.error is not None:
            raise Rejected("incorrect", f"nondeterministic: a second call on the same input raised "
                           f"{error_line(g2.error)}")
        self.same(g1.output, g2.output, "output", "nondeterministic: two calls on the same input differ: ")
        if g1.aliases_input and not rr.aliases_input:
            raise Rejected("incorrect", "the output aliases an input (the reference returns new memory)")
        self.same(rr.inputs_after, g1.inputs_after, "input", "mutates its inputs unlike the reference: ", exact=True)

    def agree(self, a: Run, b: Run) -> None:
        """Raise unless two runs of one code on one input agree: the same outcome (or exception type),
        the same inputs after the call (the reference's self-check, before any candidate)."""
        if a.error is not None or b.error is not None:
            if a.error is None or b.error is None or a.error.type != b.error.type:
                raise Rejected("incorrect", f"one run {'raises ' + error_line(a.error) if a.error else 'returns'}, "
                               f"the other {'raises ' + error_line(b.error) if b.error else 'returns'}")
            return
        self.same(a.output, b.output, "output", "")
        self.same(a.inputs_after, b.inputs_after, "input", "inputs after the call differ: ", exact=True)

    def same(self, ref: Encoded | None, got: Encoded | None, where: str, prefix: str, exact: bool = False,
             oracle: Encoded | None = None) -> None:
        """Raise `incorrect` with `prefix` and the mismatch unless `got` matches `ref` (or, for a
        half-precision output, the float32 `oracle` at least as closely as `ref` does)."""
        s = self.settings
        try:
            if ref is None or got is None:
                raise Mismatch(f"{where} is missing")
            compare(ref, got, where, 0.0 if exact else s.rtol, 0.0 if exact else s.atol, oracle=oracle)
        except Mismatch as exc:
            raise Rejected("incorrect", f"{prefix}{exc}")
        except Unsupported as exc:  # redline's limit, not the candidate's failure
            raise Rejected("unsupported", f"redline cannot compare what the target returns or changes: {exc}")
        except (KeyError, TypeError, ValueError) as exc:
            raise Rejected("incorrect", f"{prefix}{where} is not a well-formed value ({exc.__class__.__name__})")

    def oracles(self, ref: Channel, seeds: list[int], sample: int) -> list[Encoded | None]:
        """The reference's outputs for `seeds` computed in float32 (None for one without half-precision
        output or that does not run in float32), sampled like the timed outputs."""
        reply = ref.ask(Oracle(seeds=seeds, sample_seed=sample))
        return reply.oracles if len(reply.oracles) == len(seeds) else [None] * len(seeds)

    def not_reproduced(self, entry: Reproduced) -> tuple[str, str]:
        """Why the reference's outcome on a captured call differs from the recorded one, and the first
        difference (('', '') if it does not). Raises `unsupported` where the two cannot be compared."""
        if entry.raises:
            if entry.error is None:
                why = f"returns where the recorded call raised {entry.raises}"
                return why, why
            why = f"raises {entry.error.type} where the recorded call raised {entry.raises}"
            return ("", "") if entry.error.type == entry.raises else (why, error_line(entry.error))
        if entry.error is not None:
            return f"raises {entry.error.type} where the recorded call returned", error_line(entry.error)
        if entry.recorded is None:
            why = f"returns {entry.actual_type} where the recorded call returned {entry.recorded_type}"
            return ("", "") if entry.recorded_type in ("", entry.actual_type) else (why, why)
        try:
            self.same(entry.recorded, entry.actual, "result", "")
        except Rejected as rej:
            if rej.status == "unsupported":
                raise
            return "returns another result than the recorded call (hidden state, randomness or time)", rej.reason
        return "", ""


def indistinct(entries: list[Reproduced]) -> str:
    """Why the comparison is lossy for these captured calls ('' where it is not): two recorded outcomes
    that differ (by their canonical pickles, made without the encoder) but encode alike. Verifying on
    them would accept a rewrite that returns either."""
    by_encoding: dict[str, tuple[int, str]] = {}
    for entry in entries:
        if entry.recorded is None or entry.fingerprint is None:
            continue
        first = by_encoding.setdefault(canonical(entry.recorded), (entry.index, entry.fingerprint))
        if first[1] != entry.fingerprint:
            t = entry.recorded["nodes"][0].get("t", "?") if entry.recorded.get("nodes") else "?"
            return (f"captured calls {first[0]} and {entry.index} returned different values (of type {t}) that "
                    "redline's comparison cannot tell apart: it would verify a rewrite that returns either, so "
                    "nothing is verified on them")
    return ""
