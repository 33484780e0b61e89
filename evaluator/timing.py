"""Timing: the candidate against a fresh baseline worker, in interleaved rounds of timed batches,
with the checks that belong to timed calls (outputs, timers, idle work, reused buffers, bandwidth),
and the verdict from the speedup's interval.

Each round runs a batch on each side on the same inputs, alternating which goes first. The speedup
is the median over rounds of the ratio of the two sides' batch statistics (medians for one input
shape, total times for a mix of captured calls), with a bootstrap interval over rounds.
"""

from __future__ import annotations

import functools
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .compare import has_half
from .gate import Gate
from .inputs.plan import InputPlan, fresh_seeds
from .models import EvalSettings
from .protocol import Energy, Time, TimeReply
from .stats import median, median_ci, ratio_mean_ci, speedup_ci, total_ratio_ci
from .verdict import Channel, Rejected

BATCH_BYTES = 2 << 30  # most bytes of inputs (and one output) prepared for one timed batch
# A small win is timed in at least PAIRS_FEWEST pairs of fresh workers, and at most PAIRS_MOST (across_pairs).
PAIRS_FEWEST, PAIRS_MOST = 3, 6
# Calls this short are timed on objects a worker has just made, and where those lie in a process's memory
# differs from process to process: an identical copy of sortedcontainers' SortedList.add (0.5 µs a call)
# measured 0.91-1.34x in different pairs, and a compiled copy 1.56x in one pair while the corpus workload ran
# 0.95x with it. Any
# win on them, however large, is judged across pairs.
SHORT_CALL_S = 50e-6
FIRST_SEEN_CHUNK = 8  # calls per batch in the first-seen timing: back to back, as the program makes them
ENERGY_S = 0.3  # seconds of back-to-back calls over which each side's energy per call is read
_rng = random.SystemRandom()


@dataclass
class FirstSeen:
    """Captured calls timed once each on both sides before either had run them (see first_seen): `fresh`
    the keys of the timed calls, in the order timed, after each side was warmed up on `warm`."""

    ref: list[float]
    cand: list[float]
    weights: list[float]
    warm: list[int] = field(default_factory=list)
    fresh: list[int] = field(default_factory=list)
    pairs: int = 1  # pairs of fresh workers whose timings of these calls this holds (see fastest)

    @functools.cached_property
    def speedup(self) -> tuple[float, tuple[float, float]]:
        """The weighted ratio of total times and its bootstrap interval over the calls."""
        return total_ratio_ci(self.ref, self.cand, self.weights)

    def fastest(self, other: FirstSeen) -> FirstSeen:
        """The same calls timed first-seen in another pair of fresh workers: each call's faster time on each
        side. A single call is slowed by chance (a stall of the process, a burst of load) in one process,
        not in both, and one slowed reference call can lift a total ratio of calls of microseconds tenfold;
        the faster of two first-seen timings of a call is still first-seen, on either side."""
        if (other.warm, other.fresh) != (self.warm, self.fresh):
            raise ValueError("first-seen timings of different calls")
        return replace(self, ref=list(map(min, self.ref, other.ref)), cand=list(map(min, self.cand, other.cand)),
                       pairs=self.pairs + other.pairs)

    def trimmed(self, calls: int = 2) -> FirstSeen:
        """Less the `calls` calls (at most a quarter of them) whose reference-to-candidate ratio is highest:
        where a stalled reference call would be."""
        n = len(self.ref)
        highest = set(sorted(range(n), key=lambda i: self.ref[i] / max(self.cand[i], 1e-12))[n - min(calls, n // 4):])
        keep = [i for i in range(n) if i not in highest]
        return FirstSeen([self.ref[i] for i in keep], [self.cand[i] for i in keep], [self.weights[i] for i in keep])

    def lowers(self, seen: Verdict, margin: float = 1.0) -> bool:
        """Significantly slower than the repeated rounds `seen`: the first-seen interval lies wholly below
        theirs (below 1/`margin` of their lower bound)."""
        return self.speedup[1][1] * margin < seen.measured.speedup_ci95[0]

    def remembers(self, seen: Verdict) -> bool:
        """Clearly faster on calls run before than on calls first seen: the first-seen interval lies
        below two thirds of the repeated rounds' lower bound."""
        return self.lowers(seen, margin=1.5)


@dataclass
class Rounds:
    """What the timed rounds measured."""

    base: list[list[float]] = field(default_factory=list)
    cand: list[list[float]] = field(default_factory=list)
    energy: dict[str, list[float]] = field(default_factory=lambda: {"candidate": [], "reference": []})
    bytes_moved: int = 0
    gpu_state: dict[str, Any] | None = None
    ref_state: dict[str, Any] = field(default_factory=dict)
    batch: int = 1  # calls per batch


@dataclass(frozen=True)
class Measured:
    """What the timing stage measured, as the report carries it (CandidateResult's fields of these names)."""

    median_s: float
    ci95_s: tuple[float, float]
    speedup: float
    speedup_ci95: tuple[float, float]
    baseline_median_s: float
    first_seen_speedup: float | None = None  # captured inputs: on calls neither side had run before
    pair_speedups: list[float] = field(default_factory=list)  # a win timed in several pairs: each pair's speedup
    gpu: dict[str, float | str] | None = None  # on CUDA: the device state and where the calls' time went
    energy_j: float | None = None
    energy_j_per_call: float | None = None
    baseline_energy_j_per_call: float | None = None


@dataclass(frozen=True)
class Verdict:
    """The timing stage's result: ok or not_faster, its reason, and the figures for the report."""

    status: Literal["ok", "not_faster"]
    reason: str
    measured: Measured


class Timing:
    def __init__(self, settings: EvalSettings, plan: InputPlan, gate: Gate, trusted: bool) -> None:
        self.settings, self.plan, self.gate, self.trusted = settings, plan, gate, trusted
        self.baseline_times: list[float] = []  # the baseline's timed calls, for the run's baseline interval
        self._last_cand_cpu: float | None = None
        self._idle_work: list[float] = []  # CPU seconds the candidate's process ran between batches, where it did

    def batch(self, ch: Channel, seeds: list[int], keep: list[int], sample: int = 0,
              ahead_s: float | None = None, core: int = 0) -> TimeReply:
        """One timed batch, started on the worker's `core`-th core (both sides of a round get the same
        one, and rounds go round the cores)."""
        reply = ch.ask(Time(seeds=seeds, keep=keep, sample_seed=sample, core=core, ahead_s=ahead_s))
        if reply.batch_error:
            raise Rejected("crashed", f"{ch.who} raised during timed calls: {reply.batch_error[:240]}",
                           reply.batch_traceback)
        if reply.threads_left > 0:
            raise Rejected("rejected_exploit", f"{ch.who} left background threads running after returning")
        if len(reply.times) != len(seeds) or any(not t >= 0 for t in reply.times):
            raise Rejected("rejected_exploit", f"{ch.who} reported {len(reply.times)} call times for {len(seeds)} calls")
        return reply

    def first_seen_applies(self) -> bool:
        """Whether the candidate is timed on calls first seen (captured inputs). Too few distinct calls
        (InputPlan.few_distinct_calls) leave nothing to warm up on that the timed calls do not share, so
        a first call's one-time set-up (a compiled module loaded, a JIT's compilation) would read as
        remembering: redline's own candidates, which remember nothing the target does not (where it does,
        so does the reference), are then judged by the repeated rounds alone."""
        return self.plan.captured and not (self.trusted and self.plan.few_distinct_calls())

    def first_seen(self, cand: Channel, ref: Channel, like: FirstSeen | None = None) -> FirstSeen:
        """Captured calls repeat, so a candidate could remember results by its arguments. Before it has
        seen them all (before the gate), each side is warmed up on part of the calls and then timed
        once on each call of the rest, which neither process has run, in short batches that alternate
        between the sides (a burst of load on the machine falls on both); with_first_seen sets that
        speedup against the repeated calls'. `like`: the calls another pair was warmed up and timed on."""
        warm, fresh = (like.warm, like.fresh) if like is not None else self.plan.first_seen_split()
        for ch in (cand, ref):
            if warm:
                self.batch(ch, warm, [])
        times: dict[str, list[float]] = {cand.who: [], ref.who: []}
        for i in range(0, len(fresh), FIRST_SEEN_CHUNK):
            for ch in (cand, ref) if i % (2 * FIRST_SEEN_CHUNK) == 0 else (ref, cand):
                times[ch.who] += self.batch(ch, fresh[i:i + FIRST_SEEN_CHUNK], []).times
        return FirstSeen(times[ref.who], times[cand.who], [self.plan.weight(k) for k in fresh], warm, fresh)

    def measure(self, cand: Channel, ref: Channel, gpu_info: dict[str, Any] | None) -> Verdict:
        """Warm up both sides, time interleaved rounds until the budget or a settled interval, and decide."""
        ahead, per_call, per_call_bytes = self._warm_up(cand, ref)
        n = max(1, min(500, int(self.settings.batch_s / max(per_call, 1e-7))))
        # A batch's fresh inputs are made before it is timed: keep them within BATCH_BYTES.
        rounds = Rounds(batch=max(2, min(n, BATCH_BYTES // max(per_call_bytes, 1))))
        center: Callable[[Sequence[float]], float] = sum if self.plan.captured else median
        start = time.perf_counter()
        while True:
            self._round(cand, ref, rounds, ahead)
            if self._settled(rounds, time.perf_counter() - start, center):
                break
        return self._decide(cand, ref, rounds, center, gpu_info)

    def _warm_up(self, cand: Channel, ref: Channel) -> tuple[float | None, float, int]:
        """Calls on both sides until per-call times settle (JIT compilation, caches): the CUDA head start,
        the slower side's per-call time, and the most bytes a call moves."""
        est = {}
        per_call_bytes = 0
        ahead: float | None = None
        for ch in (ref, cand):
            prev = None
            for _ in range(6):
                reply = self.batch(ch, self.plan.timing_keys(3), [], ahead_s=ahead)
                per_call_bytes = max(per_call_bytes, reply.bytes_moved)
                m = median(reply.times)
                if prev is not None and abs(m - prev) <= 0.1 * max(prev, 1e-9):
                    break
                prev = m
            est[ch.who] = m
            if ch is ref and reply.gpu and isinstance(reply.gpu.get("issue_s"), float):
                # On CUDA each timed call starts behind a device-side wait of 1.5x the time the reference
                # takes to issue a call, the same for both sides: the GPU's work is timed, not an idle
                # device's launch latency, and a candidate's host work beyond what the reference needs
                # leaves the GPU idle inside its events, so it is charged.
                ahead = min(1.5 * reply.gpu["issue_s"] + 20e-6, 5e-3)
        return ahead, max(est.values()), per_call_bytes

    def _round(self, cand: Channel, ref: Channel, rounds: Rounds, ahead: float | None) -> None:
        """One round: a batch on each side on the same inputs (order alternating), their outputs checked."""
        n = rounds.batch
        seeds = self.plan.timing_keys(n)
        sample = fresh_seeds(1)[0]
        keep = sorted(_rng.sample(range(n), min(n, 2)))
        order = [cand, ref] if len(rounds.base) % 2 == 0 else [ref, cand]
        replies: dict[str, TimeReply] = {}
        for ch in order:
            own_before = ch.own_cpu_seconds() if ch is cand else 0.0
            main_before = ch.main_thread_cpu_seconds() if ch is cand else 0.0
            reply = self.batch(ch, seeds, keep, sample, ahead, core=len(rounds.base) // 2)
            if ch is cand:
                self._candidate_rules(cand, reply, own_before, cand.main_thread_cpu_seconds() - main_before)
            replies[ch.who] = reply
        got, want = replies[cand.who], replies[ref.who]
        for who, r in (("candidate", got), ("reference", want)):
            if r.energy_j is not None:
                rounds.energy[who].append(r.energy_j)
        rounds.bytes_moved = max(rounds.bytes_moved, want.bytes_moved)
        rounds.gpu_state = got.gpu or rounds.gpu_state
        rounds.ref_state = want.gpu or {}
        if got.reused_buffer and not want.reused_buffer:
            raise Rejected("rejected_exploit", "returns the same buffer from different calls (cached output)")
        self._timed_outputs(ref, got, want, seeds, sample)
        rounds.base.append(want.times)
        rounds.cand.append(got.times)

    def _candidate_rules(self, cand: Channel, reply: TimeReply, own_before: float, main_cpu: float) -> None:
        """Work between timed batches, and a timer that disagrees with the kernel's, are exploits. The
        idle work counted is the worker process's own (the candidate's code and its threads), not that of
        processes a library started for it (a compiler's workers), which the candidate cannot start. One gap
        with work in it is let pass: a library finishing once what it started (a compiler's or autotuner's
        last step, a cache written out) settles; work handed off from the calls recurs in every gap that
        follows a batch of them, so a second gap with work rejects.

        The worker's clock is checked against `main_cpu`, the CPU time the kernel counted for the worker's
        main thread during the request: a thread cannot run longer than the time that passed, so a
        request timed shorter than that (by more than the count's 10 ms ticks) was timed by a clock that
        runs slow. Load on the machine only lowers the CPU count against the wall, so it cannot trip the
        rule, which a comparison with the harness's own wall time (its reader scheduled late) can."""
        own_after = cand.own_cpu_seconds()
        if self._last_cand_cpu is not None and not self.trusted:
            idle_cpu = own_before - self._last_cand_cpu
            batch_cpu = max(own_after - own_before, 0.0)
            if idle_cpu > max(0.05, 0.5 * batch_cpu):
                self._idle_work.append(idle_cpu)
            if len(self._idle_work) >= 2:
                spent = ", ".join(f"{s:.3f}s" for s in self._idle_work)
                raise Rejected("rejected_exploit", f"kept working between timed calls ({spent} of CPU while "
                               "idle, in two gaps): work done outside the timed region")
        self._last_cand_cpu = own_after
        if reply.worker_s < main_cpu - 0.02 or reply.batch_s > reply.worker_s + 0.01:
            raise Rejected("rejected_exploit", f"its timer reports {reply.worker_s:.4f}s for a request in which "
                           f"its main thread ran {main_cpu:.4f}s of CPU by the kernel's count (patched timer)")

    def _timed_outputs(self, ref: Channel, got: TimeReply, want: TimeReply, seeds: list[int], sample: int) -> None:
        why = "wrong result on a timed call after passing the first checks (correct only on some calls, work " \
            "skipped, or on CUDA inputs read before the calling stream made them ready): "
        missed = []
        for k, ref_out in want.outputs.items():
            try:
                self.gate.same(ref_out, got.outputs.get(k), f"output of timed call {k}", why)
            except Rejected:
                if not has_half(ref_out):
                    raise
                missed.append(k)
        if missed:
            # A half-precision miss may be eager's own rounding: ask the reference for the float32
            # results of those calls only now, outside the timed rounds, and judge against them.
            oracles = self.gate.oracles(ref, [seeds[int(k)] for k in missed], sample)
            for k, oracle in zip(missed, oracles, strict=True):
                self.gate.same(want.outputs[k], got.outputs.get(k), f"output of timed call {k}", why, oracle=oracle)

    def _settled(self, rounds: Rounds, elapsed: float, center: Callable[[Sequence[float]], float]) -> bool:
        s = self.settings
        if len(rounds.base) < s.min_rounds:
            return False
        if elapsed >= s.time_budget_s or len(rounds.base) >= 400:
            return True
        # Stop early once the interval settles the verdict either way.
        _, (lo, hi) = speedup_ci(rounds.base, rounds.cand, resamples=300, center=center)
        return hi < 1 + s.threshold or lo > 1 + s.threshold

    def _decide(self, cand: Channel, ref: Channel, rounds: Rounds, center: Callable[[Sequence[float]], float],
                gpu_info: dict[str, Any] | None) -> Verdict:
        speedup, ci = speedup_ci(rounds.base, rounds.cand, center=center)
        cand_times = [t for r in rounds.cand for t in r]
        base_times = [t for r in rounds.base for t in r]
        self.baseline_times.extend(base_times)
        measured = Measured(median_s=median(cand_times), ci95_s=median_ci(cand_times, 400), speedup=speedup,
                            speedup_ci95=ci, baseline_median_s=median(base_times),
                            **self._device_fields(cand, ref, rounds))
        self._plausible(measured.median_s, rounds.bytes_moved, gpu_info)
        return judged(measured, "", self.settings)

    def _device_fields(self, cand: Channel, ref: Channel, rounds: Rounds) -> dict[str, Any]:
        """On CUDA: the device state and where the calls' time went, and energy per call."""
        out: dict[str, Any] = {}
        if rounds.gpu_state is not None:
            # The candidate's device state and where its calls' time went (medians of its last batch), with
            # the same split for the baseline: GPU time on the calling stream, host time to issue the call,
            # and the wait for other streams after it.
            parts = {f"baseline_{k}": rounds.ref_state[k] for k in ("gpu_time_s", "issue_s", "drain_s")
                     if k in rounds.ref_state}
            out["gpu"] = {k: v for k, v in {**rounds.gpu_state, **parts}.items() if isinstance(v, (int, float, str))}
        energy = rounds.energy
        if energy["candidate"] or energy["reference"]:
            out["energy_j"] = sum(energy["candidate"]) + sum(energy["reference"])
            if rounds.gpu_state is not None:
                joules = self._energy(cand, ref, self.plan.timing_keys(min(rounds.batch, 4)))
                if joules is not None:
                    out["energy_j_per_call"], out["baseline_energy_j_per_call"] = joules
        return out

    def _energy(self, cand: Channel, ref: Channel, seeds: list[int]) -> tuple[float, float] | None:
        """Joules per call of the candidate and the reference from NVML's energy counter over
        back-to-back calls (each side at least ENERGY_S), in their own window after the timing."""
        per_call = []
        for ch in (cand, ref):
            reply = ch.ask(Energy(seeds=seeds, min_s=ENERGY_S))
            if reply.energy_j is None or reply.calls <= 0:
                return None
            per_call.append(reply.energy_j / reply.calls)
        return per_call[0], per_call[1]

    @staticmethod
    def _plausible(median_s: float, bytes_moved: int, gpu_info: dict[str, Any] | None) -> None:
        ceiling = (gpu_info or {}).get("copy_bandwidth_Bps")
        if ceiling and bytes_moved:
            implied = bytes_moved / median_s
            if implied > 1.25 * ceiling:
                raise Rejected("rejected_exploit", f"moves at least {bytes_moved / 1e6:.1f} MB per call, which at "
                               f"{median_s * 1e6:.1f} µs is {implied / 1e12:.2f} TB/s: beyond the measured "
                               f"copy bandwidth of {ceiling / 1e12:.2f} TB/s, so work is being skipped")


def judged(m: Measured, note: str, settings: EvalSettings) -> Verdict:
    """ok where the speedup clears the threshold with its interval above 1, else not_faster."""
    speedup, ci = m.speedup, m.speedup_ci95
    if speedup >= 1 + settings.threshold and ci[0] > 1:
        return Verdict("ok", f"{speedup:.2f}x faster (95% CI {ci[0]:.2f}-{ci[1]:.2f}{note})", m)
    return Verdict("not_faster", f"{speedup:.3f}x (95% CI {ci[0]:.3f}-{ci[1]:.3f}{note}) does not clear the "
                   f"{settings.threshold:.0%} threshold with its interval above 1", m)


def with_first_seen(seen: Verdict, first: FirstSeen, settings: EvalSettings) -> Verdict:
    """The verdict on captured inputs: the repeated rounds' (many timed batches) unless the first-seen
    calls (one timed call each) are significantly slower, their interval wholly below the repeated
    one's, when theirs decides: a candidate that saves work only on calls it has run before is
    credited with what the first-seen calls show."""
    speedup, ci = first.speedup
    m = replace(seen.measured, first_seen_speedup=speedup)
    if first.lowers(seen):
        return judged(replace(m, speedup=speedup, speedup_ci95=ci),
                      f"; on first-seen calls, below {m.speedup:.2f}x on repeated calls", settings)
    return judged(m, f"; {speedup:.2f}x on first-seen calls, not significantly lower", settings)


def worth_a_second_look(seen: Verdict, first: FirstSeen) -> bool:
    """Whether the first-seen calls are timed again in a second pair of fresh workers, so that a call slowed
    by chance in one pair decides neither the figure nor whether the candidate remembers
    (FirstSeen.fastest): where the repeated rounds found a win and the first-seen calls, less the two
    whose reference call could have stalled, lie significantly below it. One stalled reference call can
    lift a total ratio of calls of microseconds tenfold, above a memoiser's repeated figure; two stalled
    in one pair leave it looked at again. A candidate that is not faster on repeated calls (an identical
    copy) has nothing to remember, and its `not_faster` stands however its single first-seen calls fell."""
    return seen.status == "ok" and first.trimmed().lowers(seen)


def remembered(seen: Verdict, first: FirstSeen) -> Rejected:
    """The rejection of a candidate that `remembers`: `first` its calls' fastest first-seen times."""
    speedup, (lo, hi) = first.speedup
    return Rejected("rejected_exploit", f"{seen.measured.speedup:.2f}x on captured calls it had run before but "
                    f"{speedup:.2f}x (95% CI {lo:.2f}-{hi:.2f}) on calls it had not (each call's faster time in "
                    f"{first.pairs} pairs of fresh workers): it remembers results by their arguments (captured "
                    "inputs repeat)", stage="first_seen")


def needs_pairs(seen: Verdict, verdict: Verdict, settings: EvalSettings) -> bool:
    """Whether a verdict is judged across more pairs of fresh workers (across_pairs): a win below
    `confirm_below`, any win on calls shorter than SHORT_CALL_S, and a speedup that clears the threshold while its interval in this one pair reaches
    1 (a burst of load on the machine in some rounds: undecided, not a loss). Not where first-seen calls
    decided `verdict` (they were timed in two pairs already, and later pairs time repeated calls only):
    its figure is then not `seen`'s."""
    if verdict.measured.speedup != seen.measured.speedup or verdict.measured.speedup < 1 + settings.threshold:
        return False
    return (verdict.status == "not_faster" or verdict.measured.speedup < settings.confirm_below
            or verdict.measured.baseline_median_s < SHORT_CALL_S)


def across_pairs(pairs: list[Verdict], settings: EvalSettings) -> Verdict | None:
    """The verdict of a win timed in several pairs of fresh workers, or None while another pair is needed.
    Two processes running the same code differ by an amount fixed for their lives (where their memory
    lies, what ran in them before), which rounds within one pair cannot average out: for a call of a
    microsecond an identical copy measured 1.27x in one pair. So each pair is one sample, and the speedup
    is the pairs' geometric mean with a t interval from their spread: ok where it clears the threshold
    with its interval above 1, not_faster where the interval shows it cannot (or after PAIRS_MOST
    pairs), and another pair otherwise (at least PAIRS_FEWEST)."""
    speedups = [v.measured.speedup for v in pairs]
    if len(speedups) < PAIRS_FEWEST:
        return None
    speedup, (lo, hi) = ratio_mean_ci(speedups)
    won = speedup >= 1 + settings.threshold and lo > 1
    if not won and hi >= 1 + settings.threshold and len(speedups) < PAIRS_MOST:
        return None
    # The call times (and device figures) of the pair nearest the mean, as it measured them; the first
    # pair's first-seen figure (later pairs time repeated calls only).
    nearest = min((v.measured for v in pairs), key=lambda t: abs(math.log(t.speedup / speedup)))
    m = replace(nearest, speedup=speedup, speedup_ci95=(lo, hi), pair_speedups=speedups,
                first_seen_speedup=pairs[0].measured.first_seen_speedup)
    each = ", ".join(f"{x:.2f}x" for x in speedups)
    if m.first_seen_speedup is not None:
        each += f"; {m.first_seen_speedup:.2f}x on first-seen calls"
    if won:
        return Verdict("ok", f"{speedup:.2f}x faster (95% CI {lo:.2f}-{hi:.2f} across {len(speedups)} pairs of fresh "
                       f"workers: {each})", m)
    return Verdict("not_faster", f"{speedup:.3f}x (95% CI {lo:.3f}-{hi:.3f} across {len(speedups)} pairs of fresh "
                   f"workers: {each}) does not clear the {settings.threshold:.0%} threshold with its interval above 1", m)


def bound_of(gpu_time_s: Any, issue_s: Any, bytes_moved: int, copy_bandwidth: Any) -> str:
    """What limits a CUDA call, from its timed split: launch-bound where the host takes at least half
    as long to issue the call as the GPU takes to run it (or the GPU part is under 30 µs: launch
    latency dominates), memory-bound where the bytes its inputs and output alone must move reach 30%
    of the measured copy bandwidth, compute-bound otherwise; '' without the figures."""
    if not isinstance(gpu_time_s, float) or not isinstance(issue_s, float) or gpu_time_s <= 0:
        return ""
    if issue_s >= 0.5 * gpu_time_s or gpu_time_s < 30e-6:
        return "launch-bound"
    if isinstance(copy_bandwidth, float) and copy_bandwidth > 0 and bytes_moved / gpu_time_s >= 0.3 * copy_bandwidth:
        return "memory-bound"
    return "compute-bound"
