"""Benchmark: candidates per minute on a local Ray cluster with 1 and 2 worker nodes, against the local pool.

Run: .venv/bin/python tests/perf/bench_ray.py
Each configuration runs the same 12 candidates (copies of the reference with distinct comments,
so none is skipped as a duplicate) through `optimise` with a timing budget that makes one
evaluation take about 0.5 s. Printed side by side in one run:
- candidates per minute for the local pool, Ray with 1 node, Ray with 2 nodes (1 CPU each);
- the 2-node / 1-node scaling (target: close to 2x on 2 cores);
- Ray's overhead per candidate against the local pool (wall time per candidate, 1 node vs local).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ray_cluster import LocalRayCluster  # noqa: E402
from redline.evaluator.backends import PoolFactory  # noqa: E402
from redline.evaluator.backends.ray_cluster import ray_factory  # noqa: E402
from redline.evaluator.models import EvalSettings  # noqa: E402
from redline.evaluator.progress import CandidateDone, CandidateStarted, Event  # noqa: E402
from redline.evaluator.proposers.files import FilesProposer  # noqa: E402
from redline.evaluator.search import Budget, optimise  # noqa: E402
from redline.evaluator.target import Target, load_target  # noqa: E402

N = 12
SETTINGS = EvalSettings(time_budget_s=0.25, min_rounds=6, check_seeds=2)


def project() -> tuple[Target, Path]:
    work = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    shutil.copy(HERE.parent / "adversarial" / "target.py", work / "target.py")
    (work / "pyproject.toml").write_text("[project]\nname = 'bench'\nversion = '0'\n")
    target = load_target(f"{work / 'target.py'}::affine")
    cands = work / "cands"
    cands.mkdir()
    for i in range(N):
        (cands / f"copy{i:02d}.py").write_text(target.function_source + f"\n# copy {i}\n")
    return target, cands


def run(target: Target, cands: Path, make_pool: PoolFactory | None) -> tuple[float, float, int]:
    """(evaluation wall seconds, median seconds per evaluation, candidates); setup (pool start) excluded."""
    marks: list[float] = []

    def progress(event: Event) -> None:
        if isinstance(event, (CandidateStarted, CandidateDone)):
            marks.append(time.perf_counter())

    report = optimise(target, [FilesProposer(cands)], SETTINGS, Budget(candidates=N, rounds=1), progress,
                      runs_dir=cands.parent / "runs", make_pool=make_pool)
    assert len(report.candidates) == N and all(c.status in ("ok", "not_faster") for c in report.candidates), \
        [(c.status, c.reason) for c in report.candidates]
    return marks[-1] - marks[0], statistics.median(c.eval_s or 0 for c in report.candidates), N


def cpu_seconds() -> float:
    """Busy CPU time of the whole machine so far (/proc/stat), which sandboxed grandchildren count in."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    target, cands = project()
    run(target, cands, None)  # warm the page cache: the first run pays for cold imports
    cpu0 = cpu_seconds()
    local_wall, local_eval, n = run(target, cands, None)
    cores_per_eval = (cpu_seconds() - cpu0) / local_wall
    with LocalRayCluster(nodes=1, cpus_per_node=1) as one:
        one_wall, one_eval, _ = run(target, cands, ray_factory(one.address))
    with LocalRayCluster(nodes=2, cpus_per_node=1) as two:
        two_wall, two_eval, _ = run(target, cands, ray_factory(two.address))
    per_min = {k: 60 * n / w for k, w in (("local", local_wall), ("ray1", one_wall), ("ray2", two_wall))}
    print(f"{n} candidates, median evaluation {local_eval:.2f} s local, {one_eval:.2f} s on Ray (1 node), "
          f"{two_eval:.2f} s on Ray (2 nodes)")
    print(f"candidates per minute: local {per_min['local']:.1f}, Ray 1 node {per_min['ray1']:.1f}, "
          f"Ray 2 nodes {per_min['ray2']:.1f}")
    print(f"scaling 2 nodes / 1 node: {per_min['ray2'] / per_min['ray1']:.2f}x (target: close to 2x on 2 cores); "
          f"one local evaluation keeps {cores_per_eval:.2f} cores busy (candidate and baseline workers start "
          f"side by side), so 2 cores allow at most {min(2.0, 2 / cores_per_eval):.2f}x")
    print(f"Ray overhead per candidate vs the local pool: {(one_wall - local_wall) / n * 1e3:+.0f} ms wall "
          f"({one_wall / local_wall:.3f}x), {(one_eval - local_eval) * 1e3:+.0f} ms inside the evaluation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
