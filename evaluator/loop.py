"""The optimise loop: propose, evaluate, keep an archive, stop on budget, plateau or cancel."""

from __future__ import annotations

import difflib
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from redline.profilers import Hotspot

from .config import ConfigError, ProjectConfig, load_config
from .models import CandidateResult, Cost, EvalSettings, Interval, Regression, Report, TargetInfo, Winner
from .pool import EvaluationPool, Job, LocalPool, PoolFactory
from .proposers import Context, Proposal, Proposer
from .proposers.builtin import torch_compile_code
from .stats import median, median_ci
from .target import Target, TargetError, apply_candidate

ProgressFn = Callable[[str, dict[str, object]], None]


@dataclass
class Budget:
    candidates: int = 12
    rounds: int = 3
    wall_s: float = 600.0
    tokens: int = 200_000
    plateau_rounds: int = 2


class Archive:
    """The best verified candidates and one representative per approach (diversity).

    Speedups are ratios against a baseline timed on the same device, but a ratio measured on one
    GPU (or CPU) model says little about another: the archive ranks only results measured on the
    run's hardware, the hardware of the first timed result.
    """

    def __init__(self) -> None:
        self.results: list[CandidateResult] = []
        self.hardware: str | None = None

    def add(self, r: CandidateResult) -> None:
        if self.hardware is None and r.hardware and r.speedup is not None:
            self.hardware = r.hardware
        self.results.append(r)

    def comparable(self, r: CandidateResult) -> bool:
        return not r.hardware or self.hardware is None or r.hardware == self.hardware

    def hardware_notes(self) -> list[str]:
        other = sorted({r.hardware for r in self.results if not self.comparable(r)})
        return [f"candidates measured on {h} are not ranked against those measured on {self.hardware}"
                for h in other]

    @property
    def verified(self) -> list[CandidateResult]:
        return sorted((r for r in self.results if r.status == "ok" and self.comparable(r)),
                      key=lambda r: -(r.speedup or 0))

    @property
    def best(self) -> CandidateResult | None:
        v = self.verified
        return v[0] if v else None

    def diverse(self, k: int = 4) -> list[CandidateResult]:
        seen: dict[str, CandidateResult] = {}
        for r in sorted(self.results, key=lambda r: -(r.speedup or 0)):
            if r.status in ("ok", "not_faster") and r.approach not in seen:
                seen[r.approach] = r
        return list(seen.values())[:k]


def unified_diff(target: Target, new_source: str) -> str:
    name = target.file.name
    return "".join(difflib.unified_diff(target.source.splitlines(keepends=True), new_source.splitlines(keepends=True),
                                        f"a/{name}", f"b/{name}"))


def optimise(target: Target, proposers: list[Proposer], settings: EvalSettings | None = None,
             budget: Budget | None = None, progress: ProgressFn | None = None,
             cancel: threading.Event | None = None, runs_dir: Path | None = None,
             make_pool: PoolFactory | None = None, resume: str | None = None, hotspot_note: str = "") -> Report:
    """Run the search on one target and return the report (nothing is written to the target).

    Proposals wait in a queue; the pool evaluates as many at once as it has room for (one on this
    machine, one per free slot on a Ray cluster). A new round is proposed whenever the queue is
    empty and the pool has room, from everything measured so far, so a slow candidate never holds
    the next round back. `make_pool` builds the pool (default: this machine). With `resume`, an
    earlier run's candidates (from its log under `.redline/runs/`) are taken back into the archive,
    not evaluated again.
    """
    settings = settings or EvalSettings()
    budget = budget or Budget()
    cancel = cancel or threading.Event()
    say = progress or (lambda event, data: None)
    root = runs_dir or target.project_root / ".redline" / "runs"
    run_id = resume or time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    run_dir = root / run_id
    earlier = _resumed(run_dir, target) if resume else []
    (run_dir / "candidates").mkdir(parents=True, exist_ok=True)
    if not resume:
        (run_dir / "meta.json").write_text(json.dumps({"file": str(target.file), "function": target.qualname,
                                                       "sha256": target.digest}))
    started = time.monotonic()
    config = _config(target)
    if settings.rtol is None and settings.atol is None:
        rtol, atol = config.tolerance(_target_key(target))
        settings = settings.model_copy(update={"rtol": rtol, "atol": atol})
    pool = (make_pool or LocalPool)(target, settings)
    archive = Archive()
    for r in earlier:
        archive.add(r)
    seen_code = {r.code.strip() for r in earlier}
    next_round = max((r.round for r in earlier), default=0) + 1
    last_round = next_round + budget.rounds - 1
    tokens = 0
    stale = 0
    best_at_last_round: float | None = None
    notes: list[str] = [f"resumed with {len(earlier)} earlier candidates"] if resume else []
    queue: deque[tuple[int, Proposal]] = deque()
    in_flight: dict[str, Proposal] = {}
    numbered = len(earlier)
    proposing = submitting = True
    finished = threading.Event()

    def watch_cancel() -> None:
        while not finished.is_set():
            if cancel.wait(0.1):
                pool.cancel()
                return

    def propose(round_: int) -> list[Proposal]:
        ctx = Context(target=target, round=round_, history=list(archive.results), best=archive.best,
                      hotspot_note=hotspot_note, inputs=pool.inputs, hardware=pool.hardware, device=settings.device)
        out: list[Proposal] = []
        for p in proposers:
            try:
                out += p.propose(ctx)
            except Exception as exc:  # one proposer failing must not end the run
                notes.append(f"{p.name} failed in round {round_}: {exc}")
                say("proposer_error", {"proposer": p.name, "error": str(exc)})
        return out

    def out_of_budget() -> bool:
        return (len(archive.results) + len(in_flight) >= budget.candidates or tokens > budget.tokens
                or time.monotonic() - started > budget.wall_s)

    threading.Thread(target=watch_cancel, name="redline-cancel", daemon=True).start()
    try:
        while not cancel.is_set():
            while submitting and len(in_flight) < pool.concurrency and not cancel.is_set():
                if not queue:
                    if not proposing or next_round > last_round:
                        break
                    best_now = archive.best.speedup if archive.best else 0.0
                    if best_at_last_round is not None:
                        stale = stale + 1 if (best_now or 0) <= best_at_last_round * 1.01 else 0
                        if stale >= budget.plateau_rounds:
                            notes.append(f"stopped on a plateau after round {next_round - 1}")
                            proposing = False
                            break
                    best_at_last_round = best_now or 0.0
                    proposals = propose(next_round)
                    if not proposals:
                        proposing = False
                        break
                    tokens += sum(p.tokens for p in proposals)
                    queue.extend((next_round, p) for p in proposals)
                    next_round += 1
                    continue
                round_, prop = queue.popleft()
                if prop.code.strip() in seen_code:
                    continue  # the same code was measured already
                if out_of_budget():
                    submitting = False
                    break
                seen_code.add(prop.code.strip())
                numbered += 1
                cid = f"c{numbered}"
                in_flight[cid] = prop
                say("candidate_start", {"id": cid, "origin": prop.origin, "round": round_})
                pool.submit(Job(cid, prop.code, prop.origin, round_, prop.parent, prop.trusted, prop.approach))
            if not in_flight:
                break
            result = pool.next_done(0.2)
            if result is None or cancel.is_set():
                continue  # a candidate cut short by cancelling is not a result
            prop = in_flight.pop(result.id)
            archive.add(result)
            _log(run_dir, result, prop)
            best = archive.best
            say("candidate_done", {"id": result.id, "status": result.status, "reason": result.reason,
                                   "speedup": result.speedup, "tried": len(archive.results),
                                   "best": best.speedup if best else None, "round": result.round})
    except KeyboardInterrupt:
        cancel.set()
        pool.cancel()
    winner, regression = None, None
    try:
        # Cancelled or not, the best verified so far is offered (after the project's tests).
        winner, regression = _pick_winner(target, archive.verified, pool, config.test_command, notes, say)
        if winner is not None and not cancel.is_set():
            winner, plain_compile = _versus_compile(target, winner, archive, pool, cancel, notes, say,
                                                    settings.device)
            if plain_compile is not None:  # torch.compile itself beat the winner head-to-head: offer it
                # The unchanged project's tests ran already; a candidate's run means they passed.
                original = regression if regression is None or not regression.candidate else \
                    Regression(ran=True, passed=True, command=regression.command)
                fallback, fallback_regression = _pick_winner(target, [plain_compile], pool, config.test_command,
                                                             notes, say, original)
                if fallback is not None:
                    winner, regression = _as_compile(fallback), fallback_regression
    except KeyboardInterrupt:
        cancel.set()
        pool.cancel()
    finally:
        finished.set()
        pool.close()
    if cancel.is_set():
        notes.append("cancelled")
    n = len(archive.results)
    timed = [r for r in archive.results if r.energy_j is not None]
    report = Report(
        target=TargetInfo(file=str(target.file), function=target.qualname, line=target.fn.line,
                          end_line=target.fn.end_line, sha256=target.digest),
        device=settings.device, isolation=pool.isolation, baseline=_interval(pool.baseline_times),
        candidates=sorted(archive.results, key=_id_order), winner=winner, regression=regression, run_id=run_id,
        notes=notes + pool.notes + archive.hardware_notes(), backend=pool.name, hardware=archive.hardware or "",
        inputs=pool.inputs_info,
        cost=Cost(wall_s=time.monotonic() - started, candidates=n, tokens=tokens,
                  accepted_rate=(sum(r.status == "ok" for r in archive.results) / n) if n else 0.0,
                  device_s=sum(r.eval_s or 0.0 for r in archive.results),
                  energy_j=sum(r.energy_j or 0.0 for r in timed) if timed else None))
    (run_dir / "report.json").write_text(report.model_dump_json(indent=2))
    (run_dir / "report.md").write_text(markdown(report))
    return report


def _id_order(r: CandidateResult) -> tuple[int, str]:
    digits = r.id[1:]
    return (int(digits), r.id) if digits.isdigit() else (1 << 30, r.id)


def _interval(times: list[float]) -> Interval | None:
    if not times:
        return None
    return Interval(median_s=median(times), ci95_s=median_ci(times, 400), runs=len(times))


def hotspot_note(spot: Hotspot) -> str:
    """What a prompt says about the target's place in the profile: shares, hot lines, kernels."""
    parts = [f"{spot.kind.upper()} self {spot.self_fraction:.1%}, total {spot.total_fraction:.1%} of the profile"]
    if spot.callees:
        parts.append("calls " + ", ".join(f"{c.function} {c.fraction:.1%}" for c in spot.callees[:4]))
    hot = sorted((lw for lw in spot.lines if lw.self_weight > 0), key=lambda lw: -lw.self_weight)[:4]
    if hot:
        parts.append("hottest lines " + ", ".join(f"L{lw.line} ({lw.fraction:.1%})" for lw in hot))
    if spot.kernels:
        parts.append("kernels " + ", ".join(f"{k.name[:60]} x{k.count} {k.time_s * 1e6:.1f} us" for k in spot.kernels[:4]))
    return "; ".join(parts)


def _config(target: Target) -> ProjectConfig:
    try:
        return load_config(target.project_root)
    except ConfigError as exc:
        raise TargetError(str(exc))


def _target_key(target: Target) -> str:
    return f"{target.file.relative_to(target.project_root).as_posix()}::{target.qualname}"


def _pick_winner(target: Target, candidates: list[CandidateResult], pool: EvaluationPool, command: list[str] | None,
                 notes: list[str], say: ProgressFn,
                 original: Regression | None = None) -> tuple[Winner | None, Regression | None]:
    """The first of CANDIDATES (fastest first) whose change keeps the project's own tests passing.

    The tests run first on the unchanged project (unless ORIGINAL is that run already): tests that
    already fail cannot judge a change, and the report says so.
    """
    verified = [c for c in candidates if c.speedup and c.speedup_ci95]
    if not verified:
        return None, None
    if original is None:
        say("regression", {"id": "the original"})
        original = pool.regression(target, target.source, command)
    for cand in verified:
        assert cand.speedup is not None and cand.speedup_ci95 is not None
        new_source = apply_candidate(target, cand.code)
        winner = Winner(id=cand.id, speedup=cand.speedup, speedup_ci95=cand.speedup_ci95,
                        diff=unified_diff(target, new_source))
        if not original.ran:
            return winner, original
        if not original.passed:
            notes.append("the project's tests fail without any change (" + " ".join(original.command)
                         + "), so they could not check the winner")
            return winner, original
        say("regression", {"id": cand.id})
        reg = pool.regression(target, new_source, command)
        regression = reg.model_copy(update={"candidate": cand.id})
        if reg.passed:
            return winner, regression
        last = reg.output_tail.strip().splitlines()[-1:] or [""]
        notes.append(f"{cand.id} is faster but breaks the project's tests ({' '.join(reg.command)}: {last[0]}); "
                     "not offered")
    return None, None


def _versus_compile(target: Target, winner: Winner, archive: Archive, pool: EvaluationPool, cancel: threading.Event,
                    notes: list[str], say: ProgressFn, device: str) -> tuple[Winner, CandidateResult | None]:
    """For torch code, the stronger baseline is whichever of eager and torch.compile is faster: the
    winner is timed head-to-head against torch.compile of the target (same host, interleaved).

    Where that shows the winner slower than plain torch.compile (the interval's top below 1) and
    torch.compile(default) was verified in this run, that candidate is returned too, to be offered
    instead: the speedups against eager come from separate runs, so a variant can lead them by
    noise and still lose the direct comparison.
    """
    compile_code = torch_compile_code(target, "default")
    if compile_code is None:
        return winner, None
    if device == "cpu" and "triton" in target.source:
        notes.append("not timed against torch.compile: it cannot trace Triton kernels in Triton's CPU interpreter")
        return winner, None
    won = next(c for c in archive.results if c.id == winner.id)
    if won.code.strip() == compile_code.strip():  # the winner is torch.compile itself
        return _as_compile(winner), None
    say("versus_compile", {"id": winner.id})
    pool.submit(Job(f"{winner.id}-vs-compile", won.code, won.origin, won.round, won.id,
                    trusted=won.origin.startswith("builtin:"), approach=won.approach, reference=compile_code))
    result = None
    while result is None and not cancel.is_set():
        result = pool.next_done(1.0)
    if result is None:
        return winner, None
    if result.speedup is None or result.speedup_ci95 is None:
        notes.append(f"{winner.id} could not be timed against torch.compile: {result.reason}")
        return winner, None
    compile_vs_eager = winner.speedup / result.speedup
    stronger = "torch.compile" if compile_vs_eager > 1 else "eager"
    notes.append(f"{winner.id} against torch.compile of the target: {result.speedup:.2f}x (95% CI "
                 f"{result.speedup_ci95[0]:.2f}-{result.speedup_ci95[1]:.2f}); torch.compile is about "
                 f"{compile_vs_eager:.2f}x eager")
    measured = winner.model_copy(update={"vs_compile_speedup": result.speedup, "vs_compile_ci95": result.speedup_ci95,
                                         "stronger_baseline": stronger,
                                         "speedup_vs_stronger": min(result.speedup, winner.speedup)})
    return measured, _plain_compile_instead(winner.id, result.speedup_ci95, archive, compile_code, notes)


def _plain_compile_instead(winner_id: str, versus_compile_ci95: tuple[float, float], archive: Archive, compile_code: str,
                           notes: list[str]) -> CandidateResult | None:
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


def _resumed(run_dir: Path, target: Target) -> list[CandidateResult]:
    """The candidates an earlier run logged, with their code; refuses a run of other code."""
    try:
        meta = json.loads((run_dir / "meta.json").read_text())
        lines = (run_dir / "results.jsonl").read_text().splitlines() if (run_dir / "results.jsonl").exists() else []
    except (OSError, json.JSONDecodeError) as exc:
        raise TargetError(f"cannot resume {run_dir.name}: {exc}")
    if meta.get("function") != target.qualname or meta.get("sha256") != target.digest:
        raise TargetError(f"cannot resume {run_dir.name}: it optimised other code ({meta.get('function')} in a "
                          "different version of the file); start a new run")
    out = []
    for line in lines:
        entry = json.loads(line)
        code_path = run_dir / "candidates" / f"{entry['id']}.py"
        entry["code"] = code_path.read_text() if code_path.exists() else ""
        out.append(CandidateResult.model_validate(entry))
    return out


def _log(run_dir: Path, result: CandidateResult, prop: Proposal) -> None:
    (run_dir / "candidates" / f"{result.id}.py").write_text(prop.code)
    if prop.prompt or prop.reply:
        (run_dir / "candidates" / f"{result.id}.prompt.txt").write_text(prop.prompt)
        (run_dir / "candidates" / f"{result.id}.reply.txt").write_text(prop.reply)
    with (run_dir / "results.jsonl").open("a") as fh:
        fh.write(json.dumps(result.model_dump(exclude={"code"})) + "\n")


def markdown(report: Report) -> str:
    lines = [f"# redline: {report.target.function} ({report.target.file})", ""]
    if report.baseline:
        lines.append(f"Baseline median {report.baseline.median_s * 1e3:.3f} ms over {report.baseline.runs} calls; "
                     f"isolation: {report.isolation}.")
    lines += ["", "| id | origin | status | speedup | reason |", "|---|---|---|---|---|"]
    for c in report.candidates:
        sp = f"{c.speedup:.2f}x" if c.speedup else ""
        lines.append(f"| {c.id} | {c.origin} | {c.status} | {sp} | {c.reason.replace('|', '/')} |")
    lines.append("")
    if report.winner:
        w = report.winner
        lines += [f"**Winner {w.id}: {w.speedup:.2f}x** (95% CI {w.speedup_ci95[0]:.2f}-{w.speedup_ci95[1]:.2f})", "",
                  "```diff", w.diff.rstrip(), "```"]
    else:
        lines.append("No candidate was verified faster than the baseline.")
    return "\n".join(lines) + "\n"
