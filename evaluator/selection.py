"""Which verified candidate is offered: the fastest whose edit can be written, that compute-sanitizer
passes (on CUDA) and that keeps the project's own tests passing; for torch code, timed head-to-head
against torch.compile of the target, which is offered instead where it is surely faster. Then Nsight
Compute on the one offered, where the search took no profile of it."""

from __future__ import annotations

import threading
from collections.abc import Callable

from .archive import Archive
from .backends import EvaluationPool
from .config import ProjectConfig
from .models import CandidateResult, EvalSettings, Job, Regression, Winner
from .needs import dependency_edit, needs
from .progress import Event, ProfileStarted, RegressionStarted, SanitizerStarted, VersusCompile
from .proposers.builtin import torch_compile_code
from .report import unified_diff
from .target import EditError, Target, apply_candidate


class Selection:
    def __init__(self, target: Target, settings: EvalSettings, config: ProjectConfig, archive: Archive,
                 notes: list[str], say: Callable[[Event], None], cancel: threading.Event,
                 timed_out: Callable[[], bool]) -> None:
        self.target, self.settings, self.config, self.archive = target, settings, config, archive
        self.notes, self.say, self.cancel, self.timed_out = notes, say, cancel, timed_out

    def winner(self, pool: EvaluationPool) -> tuple[Winner | None, Regression | None]:
        winner, regression = self._offered(pool)
        if winner is not None:
            self._profile_offered(pool, winner.id)
        return winner, regression

    def _offered(self, pool: EvaluationPool) -> tuple[Winner | None, Regression | None]:
        winner, regression = self._pick(pool, self.archive.verified)
        if winner is None or self.cancel.is_set():
            return winner, regression
        winner, plain_compile = self._versus_compile(pool, winner)
        if plain_compile is None:
            return winner, regression
        # torch.compile itself beat the winner head-to-head: offer it. The unchanged project's tests
        # ran already; a candidate's run means they passed.
        original = regression if regression is None or not regression.candidate else \
            Regression(ran=True, passed=True, command=regression.command)
        fallback, fallback_regression = self._pick(pool, [plain_compile], original)
        if fallback is None:
            return winner, regression
        return _as_compile(fallback), fallback_regression

    def _profile_offered(self, pool: EvaluationPool, cid: str) -> None:
        """Nsight Compute on the candidate offered, where no profile of it was taken during the search (no
        proposer read them): announced; not after a cancel, nor past the time limit (a note says so)."""
        offered = self.archive.find(cid)
        if not self.settings.profiles_kernels or offered.kernel_profile is not None or self.cancel.is_set():
            return
        if self.timed_out():
            self.notes.append(f"{cid} was not profiled with Nsight Compute: the time limit was reached")
            return
        self.say(ProfileStarted(cid))
        profile = pool.profile_offered(offered)
        if profile is not None:
            self.archive.replace(offered.model_copy(update={"kernel_profile": profile}))

    def _pick(self, pool: EvaluationPool, candidates: list[CandidateResult],
              original: Regression | None = None) -> tuple[Winner | None, Regression | None]:
        """The first of `candidates` (fastest first) whose change keeps the project's own tests passing.

        The tests run first on the unchanged project (unless `original` is that run already): tests that
        already fail cannot judge a change, and the report says so.
        """
        verified = [c for c in candidates if c.speedup and c.speedup_ci95]
        if not verified:
            return None, None
        command = self.config.test_command
        if original is None:
            self.say(RegressionStarted("the original"))
            original = pool.regression(self.target, self.target.source, command)
        for cand in verified:
            assert cand.speedup is not None and cand.speedup_ci95 is not None
            try:
                new_source = apply_candidate(self.target, cand.code)
            except EditError as exc:
                self.notes.append(f"{cand.id} is faster but cannot be written into the file ({exc}); not offered")
                continue
            if not self._memory_safe(pool, cand):
                continue
            required = needs(self.target, cand.code)
            deps = dependency_edit(self.target.project_root, required) if required else None
            files = [deps] if deps is not None else []
            if required and deps is None:
                self.notes.append(f"{cand.id} needs {', '.join(required)} where the program runs: add "
                                  f"{'it' if len(required) == 1 else 'them'} to the project's dependencies")
            winner = Winner(id=cand.id, speedup=cand.speedup, speedup_ci95=cand.speedup_ci95,
                            diff=unified_diff(self.target, new_source, files), needs=required, files=files)
            if not original.ran:
                return winner, original
            if not original.passed:
                self.notes.append("the project's tests fail without any change (" + " ".join(original.command)
                                  + "), so they could not check the winner")
                return winner, original
            self.say(RegressionStarted(cand.id))
            reg = pool.regression(self.target, new_source, command)
            if reg.passed:
                return winner, reg.model_copy(update={"candidate": cand.id})
            last = reg.output_tail.strip().splitlines()[-1:] or [""]
            self.notes.append(f"{cand.id} is faster but breaks the project's tests ({' '.join(reg.command)}: "
                              f"{last[0]}); not offered")
        return None, None

    def _memory_safe(self, pool: EvaluationPool, cand: CandidateResult) -> bool:
        """compute-sanitizer on CUDA, once, on the candidate about to be offered (the search's time limit
        does not cut it short; it is announced). One it reports is `incorrect` from here on."""
        if self.cancel.is_set():  # the best verified so far is offered as it is
            if self.settings.checks_memory:
                self.archive.replace(cand.model_copy(update={"sanitizer": "not run: the run was cancelled"}))
            return True
        if self.settings.checks_memory:
            self.say(SanitizerStarted(cand.id))
        ran, reason = pool.check_memory(cand)
        if ran is None:
            return True
        checked = self.archive.replace(cand.model_copy(update={"sanitizer": ran}))
        if reason is None:
            return True
        self.archive.replace(checked.model_copy(update={"status": "incorrect", "reason": reason, "stage": "memory_check"}))
        self.notes.append(f"{cand.id} is faster but compute-sanitizer rejects it ({reason}); not offered")
        return False

    def _versus_compile(self, pool: EvaluationPool, winner: Winner) -> tuple[Winner, CandidateResult | None]:
        """For torch code, the stronger baseline is whichever of eager and torch.compile is faster: the
        winner is timed head-to-head against torch.compile of the target (same host, interleaved).

        Where that shows the winner slower than plain torch.compile (the interval's top below 1) and
        torch.compile(default) was verified in this run, that candidate is returned too, to be offered
        instead: the speedups against eager come from separate runs, so a variant can lead them by
        noise and still lose the direct comparison.
        """
        compile_code = torch_compile_code(self.target, "default")
        if compile_code is None:
            return winner, None
        if self.timed_out():
            self.notes.append(f"{winner.id} was not timed against torch.compile: the time limit was reached")
            return winner, None
        if self.settings.device == "cpu" and "triton" in self.target.source:
            self.notes.append("not timed against torch.compile: it cannot trace Triton kernels in Triton's CPU "
                              "interpreter")
            return winner, None
        won = self.archive.find(winner.id)
        if won.code.strip() == compile_code.strip():  # the winner is torch.compile itself
            return _as_compile(winner), None
        self.say(VersusCompile(winner.id))
        pool.submit(Job(f"{winner.id}-vs-compile", won.code, won.origin, won.round, won.id,
                        trusted=won.trusted, approach=won.approach, reference=compile_code))
        result = None
        while result is None and not self.cancel.is_set():
            result = pool.next_done(1.0)
        if result is None:
            return winner, None
        if result.speedup is None or result.speedup_ci95 is None:
            self.notes.append(f"{winner.id} could not be timed against torch.compile: {result.reason}")
            return winner, None
        compile_vs_eager = winner.speedup / result.speedup
        self.notes.append(f"{winner.id} against torch.compile of the target: {result.speedup:.2f}x (95% CI "
                          f"{result.speedup_ci95[0]:.2f}-{result.speedup_ci95[1]:.2f}); torch.compile is about "
                          f"{compile_vs_eager:.2f}x eager")
        measured = winner.model_copy(update={
            "vs_compile_speedup": result.speedup, "vs_compile_ci95": result.speedup_ci95,
            "stronger_baseline": "torch.compile" if compile_vs_eager > 1 else "eager",
            "speedup_vs_stronger": min(result.speedup, winner.speedup)})
        return measured, plain_compile_instead(winner.id, result.speedup_ci95, self.archive, compile_code,
                                               self.notes)


def plain_compile_instead(winner_id: str, versus_compile_ci95: tuple[float, float], archive: Archive,
                          compile_code: str, notes: list[str]) -> CandidateResult | None:
    """torch.compile(default)'s verified candidate where the winner is surely slower than it."""
    if versus_compile_ci95[1] >= 1.0:
        return None
    plain = next((c for c in archive.verified if c.code.strip() == compile_code.strip()), None)
    if plain is None:
        notes.append(f"torch.compile of the target is faster than {winner_id}; it was not verified in this run, "
                     "so it is not offered in its place")
    else:
        notes.append(f"{winner_id} is slower than torch.compile of the target head-to-head, so {plain.id} "
                     "(torch.compile(default)) is offered instead")
    return plain


def _as_compile(winner: Winner) -> Winner:
    """A winner that is torch.compile of the target: level with it by construction."""
    return winner.model_copy(update={"vs_compile_speedup": 1.0, "vs_compile_ci95": (1.0, 1.0),
                                     "stronger_baseline": "torch.compile", "speedup_vs_stronger": 1.0})
