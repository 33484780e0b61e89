"""Statistics used for every reported speedup."""

from __future__ import annotations

import math

import pytest
from redline.evaluator.stats import geomean, median, quantile, speedup_ci


def test_median_odd_even_and_unsorted() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    with pytest.raises(ValueError):
        median([])


def test_quantile_ends_are_min_and_max() -> None:
    xs = [5.0, 1.0, 9.0, 3.0]
    assert quantile(xs, 0.0) == 1.0 and quantile(xs, 1.0) == 9.0
    assert quantile(xs, 0.5) == median(xs)


def test_geomean_in_log_space() -> None:
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert geomean([1e300, 1e300]) == pytest.approx(1e300)  # no overflow from multiplying first
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def test_speedup_of_identical_rounds_is_one_and_interval_holds_it() -> None:
    rounds = [[1.0 + 0.01 * ((i * 7 + j) % 5) for j in range(10)] for i in range(20)]
    point, (lo, hi) = speedup_ci(rounds, rounds)
    assert point == 1.0 and lo <= 1.0 <= hi


def test_speedup_direction_and_interval_order() -> None:
    base = [[2.0 + 0.01 * j for j in range(8)] for _ in range(15)]
    cand = [[1.0 + 0.005 * j for j in range(8)] for _ in range(15)]
    point, (lo, hi) = speedup_ci(base, cand)
    assert point == pytest.approx(2.0, rel=0.01) and lo <= point <= hi and lo > 1.5


def test_drift_shared_by_a_round_cancels() -> None:
    # the machine gets 3x slower halfway; paired rounds still say 2x
    base = [[2.0 * (3 if i >= 10 else 1)] * 5 for i in range(20)]
    cand = [[1.0 * (3 if i >= 10 else 1)] * 5 for i in range(20)]
    point, (lo, hi) = speedup_ci(base, cand)
    assert math.isclose(point, 2.0) and math.isclose(lo, 2.0) and math.isclose(hi, 2.0)


class _ScriptedWorker:
    """The candidate's side of `Timing._candidate_rules`, with the worker process's CPU count scripted:
    the gaps between real batches last what the scheduler gives them, so a real worker cannot show a
    chosen amount of work in a chosen gap on every run."""

    def __init__(self) -> None:
        self.cpu = 0.0

    def own_cpu_seconds(self) -> float:
        return self.cpu


def _gaps(idle: list[float], trusted: bool = False) -> list[str]:
    """Batches of 0.02 s CPU with `idle` s of CPU in the gap before each; the rules' verdict per batch."""
    from redline.evaluator.models import EvalSettings
    from redline.evaluator.protocol import TimeReply
    from redline.evaluator.timing import Timing
    from redline.evaluator.verdict import Rejected

    timing = Timing(EvalSettings(), plan=None, gate=None, trusted=trusted)  # type: ignore[arg-type]
    worker, seen = _ScriptedWorker(), []
    for gap in idle:
        worker.cpu += gap
        before = worker.cpu
        worker.cpu += 0.02
        try:
            timing._candidate_rules(worker, TimeReply(op="time", worker_s=0.02, batch_s=0.02), before, 0.02)  # type: ignore[arg-type]
            seen.append("ok")
        except Rejected as e:
            seen.append(e.reason)
            break
    return seen


def test_work_between_batches_rejects_when_it_recurs_not_when_a_library_settles_once() -> None:
    # One gap with work (a compiler's last step) passes; work in every gap (handed off by the calls) rejects
    # at the second, naming both amounts.
    assert _gaps([0, 0.3, 0, 0, 0, 0]) == ["ok"] * 6
    seen = _gaps([0, 0.08, 0, 0.09, 0, 0])
    assert seen[:3] == ["ok"] * 3 and "0.080s, 0.090s of CPU while idle" in seen[3] and len(seen) == 4
    assert _gaps([0, 0.04, 0.04, 0.04]) == ["ok"] * 4  # below the floor: a worker's own housekeeping
    assert _gaps([0, 0.3, 0.3, 0.3], trusted=True) == ["ok"] * 4  # redline's own proposers are not audited
