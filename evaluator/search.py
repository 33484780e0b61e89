"""The optimise loop: propose, evaluate, keep an archive, stop on budget, plateau or cancel, then pick
the winner (after the project's own tests, and against torch.compile for torch code)."""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..profilers import Hotspot
from ..profilers.record import redline_dir
from .archive import Archive
from .backends import EvaluationPool, Job, LocalPool, PoolFactory
from .config import ConfigError, ProjectConfig, load_config
from .models import CandidateResult, Cost, EvalSettings, ProposerUse, Regression, Report, TargetInfo, Winner
from .progress import (
    CandidateDone,
    CandidateStarted,
    ProgressFn,
    ProposerFailed,
    silent,
)
from .proposers import Context, NotApplicable, Proposal, Proposer, hot_lines, hotspot_note
from .report import RunLog, id_order, interval
from .selection import Selection
from .specialise import guarded
from .stages import decided
from .target import Target, TargetError

WIND_UP_S = 10.0  # how long evaluations stopped by the time limit get to return what they have


@dataclass
class Budget:
    candidates: int = 12
    rounds: int = 3
    wall_s: float = 600.0
    tokens: int = 200_000
    plateau_rounds: int = 2


def optimise(target: Target, proposers: list[Proposer], settings: EvalSettings | None = None,
             budget: Budget | None = None, progress: ProgressFn | None = None,
             cancel: threading.Event | None = None, runs_dir: Path | None = None,
             make_pool: PoolFactory | None = None, resume: str | None = None, hotspot: Hotspot | None = None) -> Report:
    """Run the search on one target and return the report (nothing is written to the target).

    Proposals wait in a queue; the pool evaluates as many at once as it has room for (one on this
    machine, one per free slot on a Ray cluster). A new round is proposed whenever the queue is
    empty and the pool has room, from everything measured so far, so a slow candidate never holds
    the next round back. `make_pool` builds the pool (default: this machine). With `resume`, an
    earlier run's candidates (from its log under `.redline/runs/`) are taken back into the archive,
    not evaluated again.
    """
    run_id = resume or time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    log = RunLog((runs_dir or redline_dir(target.project_root) / "runs") / run_id)
    earlier = log.begin(target, resume is not None)
    search = Search(target, proposers, settings or EvalSettings(), budget or Budget(), progress or silent,
                    cancel or threading.Event(), log, hotspot)
    return search.run(make_pool or LocalPool, earlier, run_id)


class Search:
    """One run's state between proposing, evaluating and picking the winner."""

    def __init__(self, target: Target, proposers: list[Proposer], settings: EvalSettings, budget: Budget,
                 say: ProgressFn, cancel: threading.Event, log: RunLog, hotspot: Hotspot | None) -> None:
        self.target, self.proposers, self.budget, self.say, self.cancel = target, proposers, budget, say, cancel
        self.log, self.hotspot_note, self.hot_lines = log, hotspot_note(hotspot) if hotspot else "", hot_lines(hotspot)
        self.uses: dict[str, ProposerUse] = {}  # each proposer asked or skipped, in that order
        self.config = _config(target)
        if settings.rtol is None and settings.atol is None:
            rtol, atol = self.config.tolerance(target.spec)
            settings = settings.model_copy(update={"rtol": rtol, "atol": atol})
        # Nsight Compute during the search, and the trace of the original's variables, only where a
        # proposer reads them.
        self.settings = settings.model_copy(update={"profile_leaders": any(p.reads_kernel_profiles for p in proposers),
                                                    "trace_locals": any(p.reads_local_types for p in proposers)})
        self.archive = Archive()
        self.notes: list[str] = []
        self.tokens = 0
        self.started = time.monotonic()
        self.queue: deque[tuple[int, Proposal]] = deque()
        self.in_flight: dict[str, tuple[Proposal, Job]] = {}
        self.seen_code: set[str] = set()
        self.numbered = 0
        self.next_round = self.last_round = 1
        self.best_at_last_round: float | None = None
        self.stale = 0
        self.proposing = self.submitting = True
        self.timed_out = False  # the time limit stopped the search

    def run(self, make_pool: PoolFactory, earlier: list[CandidateResult], run_id: str) -> Report:
        pool = make_pool(self.target, self.settings)
        for r in earlier:
            self.archive.add(r)
        self.seen_code = {r.code.strip() for r in earlier}
        self.numbered = len(earlier)
        self.next_round = max((r.round for r in earlier), default=0) + 1
        self.last_round = self.next_round + self.budget.rounds - 1
        if earlier:
            self.notes.append(f"resumed with {len(earlier)} earlier candidates")
        finished = threading.Event()
        threading.Thread(target=self._watch_cancel, args=(pool, finished), name="redline-cancel", daemon=True).start()
        winner, regression = None, None
        try:
            try:
                self._search(pool)
            except KeyboardInterrupt:
                self._stop(pool)
            if self.cancel.is_set():
                self._wind_up(pool, "the cancel")
            # Cancelled or not, the best verified so far is offered (after the project's tests).
            winner, regression = Selection(self.target, self.settings, self.config, self.archive, self.notes, self.say,
                                           self.cancel, lambda: self.timed_out).winner(pool)
        except KeyboardInterrupt:  # a second Ctrl-C: at once
            self._stop(pool)
        finally:
            finished.set()
            pool.close()
        report = self._report(pool, winner, regression, run_id)
        self.log.finish(report)
        return report

    def _watch_cancel(self, pool: EvaluationPool, finished: threading.Event) -> None:
        while not finished.is_set():
            if self.cancel.wait(0.1):
                pool.cancel()
                for p in self.proposers:  # an LLM request in flight ends now, not when its reply comes
                    try:
                        p.cancel()
                    except Exception as exc:
                        self.notes.append(f"{p.name} could not be stopped: {exc}")
                return

    def _stop(self, pool: EvaluationPool) -> None:
        self.cancel.set()
        pool.cancel()

    # ------------------------------------------------------------ the loop
    def _search(self, pool: EvaluationPool) -> None:
        while not self.cancel.is_set():
            self._fill(pool)
            if not self.in_flight:
                return
            left = self.budget.wall_s - (time.monotonic() - self.started)
            if left <= 0:
                self._cut_off(pool)
                return
            result = pool.next_done(min(0.2, left))
            if result is None or result.id not in self.in_flight:
                continue
            if self.cancel.is_set():  # it came back after a cancel: its verdict, or cancelled
                self._settle(result, "the cancel")
            else:
                self._record(result, self.in_flight.pop(result.id)[0])

    def _record(self, result: CandidateResult, prop: Proposal) -> None:
        self.archive.add(result)
        self.log.add(result, prop)
        self._guard(result, prop)
        best = self.archive.best
        self.say(CandidateDone(result.id, result.status, result.reason, result.speedup, len(self.archive.results),
                               best.speedup if best else None, result.round))

    def _guard(self, result: CandidateResult, prop: Proposal) -> None:
        """A candidate wrong only at edge variants of its inputs: where the project allows specialising this
        target, its guarded form (specialise.py) goes next, judged like any other candidate."""
        if not result.correct_only_at or not self.config.specialise(self.target.spec):
            return
        try:
            code = guarded(self.target, result.code, result.correct_only_at)
        except (ValueError, SyntaxError) as exc:
            self.notes.append(f"{result.id} could not be guarded: {exc}")
            return
        approach = f"{result.id} at the {len(result.correct_only_at)} input(s) it was verified on, the original elsewhere"
        self.queue.appendleft((result.round, Proposal(code=code, origin=f"{prop.origin}+guarded", approach=approach,
                                                      parent=result.id, trusted=prop.trusted)))

    def _cut_off(self, pool: EvaluationPool) -> None:
        """The time limit is reached: the evaluations still running are stopped (see _wind_up)."""
        pool.cancel()
        self._time_up(self._wind_up(pool, "the time limit"))

    def _wind_up(self, pool: EvaluationPool, by: str) -> list[str]:
        """The evaluations in flight when the pool was cancelled, given WIND_UP_S to return: one whose
        verdict was already reached (stopped while Nsight Compute profiled it) keeps that verdict, without
        the profile; the others are recorded `cancelled`, with the stage they were stopped in. Returns
        the ids of those stopped."""
        stopped: list[str] = []
        until = time.monotonic() + WIND_UP_S
        while self.in_flight and (left := until - time.monotonic()) > 0:
            result = pool.next_done(min(0.2, left))
            if result is not None and result.id in self.in_flight and self._settle(result, by):
                stopped.append(result.id)
        for cid, (prop, job) in sorted(self.in_flight.items()):
            stopped.append(cid)
            self._record(decided(job, "cancelled", f"stopped by {by}; its evaluation did not wind up within "
                                 f"{WIND_UP_S:g} s", None), prop)
        self.in_flight.clear()
        return stopped

    def _settle(self, result: CandidateResult, by: str) -> bool:
        """Record a result that came back after a cancel; whether the cancel stopped it."""
        prop, _ = self.in_flight.pop(result.id)
        if result.status == "cancelled":
            where = f" during {result.stage.replace('_', ' ')}" if result.stage else " before it ran"
            result = result.model_copy(update={"reason": f"stopped by {by}{where}"})
        self._record(result, prop)
        return result.status == "cancelled"

    def _time_up(self, stopped: list[str]) -> None:
        """The time limit is reached (said once), and the evaluations it stopped, if any, named."""
        names = ", ".join(sorted(stopped, key=lambda c: int(c[1:])))
        if self.timed_out and names:
            self.notes.append(f"{names} stopped by the time limit (cancelled)")
        elif not self.timed_out:
            self.notes.append(f"the time limit ({self.budget.wall_s:g} s) was reached"
                              + (f": {names} stopped (cancelled)" if names else ""))
        self.timed_out = True

    def _fill(self, pool: EvaluationPool) -> None:
        """Submit queued proposals while the pool has room, proposing a new round when the queue is empty."""
        while self.submitting and len(self.in_flight) < pool.concurrency and not self.cancel.is_set():
            if not self.queue:
                if not self._next_round(pool):
                    return
                continue
            round_, prop = self.queue.popleft()
            if prop.code.strip() in self.seen_code:
                continue  # the same code was measured already
            if self._out_of_budget():
                self.submitting = False
                if time.monotonic() - self.started > self.budget.wall_s:
                    self._time_up([])  # between two candidates: none was running
                return
            self.seen_code.add(prop.code.strip())
            self.numbered += 1
            cid = f"c{self.numbered}"
            job = Job(cid, prop.code, prop.origin, round_, prop.parent, prop.trusted, prop.approach)
            self.in_flight[cid] = prop, job
            self.say(CandidateStarted(cid, prop.origin, round_))
            pool.submit(job)

    def _next_round(self, pool: EvaluationPool) -> bool:
        """Queue the next round's proposals; False when there is none (rounds spent, plateau, no ideas)."""
        if not self.proposing or self.next_round > self.last_round:
            return False
        best_now = self.archive.best.speedup if self.archive.best else 0.0
        if self.best_at_last_round is not None:
            self.stale = self.stale + 1 if (best_now or 0) <= self.best_at_last_round * 1.01 else 0
            if self.stale >= self.budget.plateau_rounds:
                self.notes.append(f"stopped on a plateau after round {self.next_round - 1}")
                self.proposing = False
                return False
        self.best_at_last_round = best_now or 0.0
        proposals = self._propose(pool, self.next_round)
        if not proposals:
            self.proposing = False
            return False
        self.tokens += sum(p.tokens for p in proposals)
        self.queue.extend((self.next_round, p) for p in proposals)
        self.next_round += 1
        return True

    def _propose(self, pool: EvaluationPool, round_: int) -> list[Proposal]:
        ctx = Context(target=self.target, round=round_, history=list(self.archive.results), best=self.archive.best,
                      hotspot_note=self.hotspot_note, inputs=pool.inputs, hardware=pool.hardware,
                      device=self.settings.device, inputs_from=pool.inputs_info.source, bound=pool.bound,
                      local_types=pool.local_types, callee_types=pool.callee_types,
                      hot_lines=self.hot_lines, prompt_values=self.config.prompt_values,
                      baseline_s=statistics.median(pool.baseline_times) if pool.baseline_times else None)
        out: list[Proposal] = []
        for p in sorted(self.proposers, key=lambda p: p.rank(ctx)):
            use = self.uses.get(p.name)
            if use is None:
                use = self.uses[p.name] = ProposerUse(name=p.name, skipped=self._skip(p, ctx))
            if use.skipped is not None:
                continue
            try:
                found = self._asked(p, ctx)
            except NotApplicable as exc:
                use.skipped = str(exc)
                continue
            except Exception as exc:  # one proposer failing must not end the run
                if self.cancel.is_set():
                    return out  # stopped by the cancel (its request closed), not a failure
                self.notes.append(f"{p.name} failed in round {round_}: {exc}")
                self.say(ProposerFailed(p.name, str(exc)))
                continue
            use.proposed += len(found)
            out += found
        return out

    def _asked(self, p: Proposer, ctx: Context) -> list[Proposal]:
        """p.propose(ctx), on a thread of its own, so a cancel returns at once even while the proposer
        waits on a reply (an LLM request whose socket a close cannot wake): the proposer is told to stop
        (Proposer.cancel) and whatever it returns later is dropped."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def ask() -> None:
            try:
                box["found"] = p.propose(ctx)
            except BaseException as exc:  # handed to the search thread, which raises it
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=ask, name=f"redline-propose-{p.name}", daemon=True).start()
        while not done.wait(0.1):
            if self.cancel.is_set():
                return []
        if "error" in box:
            raise box["error"]
        return list(box["found"])

    def _skip(self, p: Proposer, ctx: Context) -> str | None:
        try:
            return p.skip(ctx)
        except Exception as exc:  # a proposer that cannot tell is asked anyway
            self.notes.append(f"{p.name} could not tell whether it applies: {exc}")
            return None

    def _out_of_budget(self) -> bool:
        b = self.budget
        return (len(self.archive.results) + len(self.in_flight) >= b.candidates or self.tokens > b.tokens
                or time.monotonic() - self.started > b.wall_s)

    # ----------------------------------------------------------- the report
    def _report(self, pool: EvaluationPool, winner: Winner | None, regression: Regression | None,
                run_id: str) -> Report:
        cancelled = self.cancel.is_set()
        results = self.archive.results
        n = len(results)
        timed = [r for r in results if r.energy_j is not None]
        t = self.target
        return Report(
            target=TargetInfo(file=str(t.file), function=t.qualname, line=t.fn.line, end_line=t.fn.end_line,
                              sha256=t.digest),
            device=self.settings.device, isolation=pool.isolation, baseline=interval(pool.baseline_times),
            candidates=sorted(results, key=id_order), winner=winner, regression=regression, run_id=run_id,
            notes=self.notes + (["cancelled"] if cancelled else []) + pool.notes + self.archive.hardware_notes(),
            backend=pool.name, hardware=self.archive.hardware or "", inputs=pool.inputs_info, cancelled=cancelled,
            bound=pool.bound, proposers=list(self.uses.values()),
            cost=Cost(wall_s=time.monotonic() - self.started, candidates=n, tokens=self.tokens,
                      accepted_rate=(sum(r.status == "ok" for r in results) / n) if n else 0.0,
                      device_s=sum(r.eval_s or 0.0 for r in results),
                      energy_j=sum(r.energy_j or 0.0 for r in timed) if timed else None))


def _config(target: Target) -> ProjectConfig:
    try:
        return load_config(target.project_root)
    except ConfigError as exc:
        raise TargetError(str(exc))

