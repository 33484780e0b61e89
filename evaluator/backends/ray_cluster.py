"""Evaluations on a Ray cluster: each candidate's build, gate and timing is one Ray task.

The project reaches the workers through Ray's runtime environment (`working_dir`, and `pip` when
asked); redline itself must be installed in the workers' Python. Captured calls (the project's
.redline is not shipped) go once into Ray's object store and are written back into the unpacked
project's store by each task, which uses the calls the probe found the reference reproduces. On the
worker, the task runs the same `Evaluator` as a local run, with the same sandbox, against a baseline
worker it starts on the same host: candidate and baseline are timed side by side on one device,
interleaved. (Ray sizes its workers' thread pools itself: OMP_NUM_THREADS, to the task's CPUs.)

Each task is pinned to a node the pool chose, with the resources a timing needs: a whole GPU for
CUDA targets (a timing never shares its GPU), one CPU otherwise. The pool keeps at most one task
per free slot, so the concurrency limit holds across the cluster. A task whose worker or node dies
is tried once more on another node; a second loss is `infra_error`. Cancelling force-kills the
remote tasks, and everything the sandbox started on the worker dies with them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any

from ..evaluate import Evaluator
from ..inputs.plan import InputsInfo
from ..models import CandidateResult, EvalSettings, KernelProfile, Regression
from ..regression import run_regression
from ..sandbox import LocalBackend, default_python
from ..stages import decided
from ..target import Target, TargetError
from .base import ClusterError, EvaluationPool, Job, PoolFactory

# What is not shipped to the workers with the project.
EXCLUDES = [".git", ".venv", "venv", "node_modules", ".redline", "__pycache__", "*.egg-info", ".mypy_cache",
            ".ruff_cache", ".pytest_cache"]


# ------------------------------------------------------------------ on the worker
def _on_worker(target: Target, store: dict[str, bytes] | None = None) -> Target:
    """The target inside the project as Ray unpacked it (the task's working directory); captured calls
    written back into the project's store there from `store` (the files .redline is not shipped with)."""
    root = Path.cwd()

    def moved(p: Path) -> Path:
        return root / p.relative_to(target.project_root)

    inputs = target.inputs
    if inputs.file is not None:
        inputs = dataclasses.replace(inputs, file=moved(inputs.file))
    if inputs.store is not None and inputs.manifest is not None:
        folder = moved(inputs.store)
        _unpack(folder, store or {})
        manifest = inputs.manifest.model_copy(update={"import_root": str(moved(Path(inputs.manifest.import_root)))})
        inputs = dataclasses.replace(inputs, store=folder, manifest=manifest)
    here = dataclasses.replace(target, file=moved(target.file), inputs=inputs,
                               project_root=root)
    if hashlib.sha256(here.file.read_bytes()).hexdigest() != target.digest:
        raise TargetError(f"{target.file.name} on the worker differs from the one the run began with")
    return here


def _unpack(folder: Path, files: dict[str, bytes]) -> None:
    """Write a captured store's files into `folder`, each whole (written aside, then renamed: tasks on
    one node share the unpacked project)."""
    for name, data in files.items():
        path = folder / name
        if path.is_file() and path.stat().st_size == len(data):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{path.name}.{os.getpid()}")
        part.write_bytes(data)
        os.replace(part, path)


def _store_files(target: Target) -> dict[str, bytes] | None:
    """A captured store's manifest and call files, to send to the workers; None for other inputs."""
    inputs = target.inputs
    if inputs.kind != "captured" or inputs.store is None or inputs.manifest is None:
        return None
    if not Path(inputs.manifest.import_root).is_relative_to(target.project_root):
        raise TargetError(f"the captured calls' module is imported from {inputs.manifest.import_root}, outside the "
                          f"project ({target.project_root}) that the Ray workers receive: use --backend local")
    names = ["manifest.json", *(c.file for c in inputs.manifest.calls)]
    return {n: (inputs.store / n).read_bytes() for n in names}


def _where() -> str:
    import ray

    return f"{socket.gethostname()} (node {ray.get_runtime_context().get_node_id()[:8]})"


def probe_task(target: Target, settings: EvalSettings, store: dict[str, bytes] | None) -> dict[str, Any]:
    ev = Evaluator(_on_worker(target, store), settings)
    ev.close()
    return {"inputs": ev.inputs, "hardware": ev.hardware, "bound": ev.bound, "local_types": ev.local_types,
            "callee_types": ev.callee_types, "isolation": ev.isolation,
            "where": _where(), "inputs_info": ev.plan.info().model_dump(),
            "reproduced": (ev.plan.keys, ev.plan.excluded) if ev.plan.captured else None}


def evaluate_task(target: Target, settings: EvalSettings, job: Job, store: dict[str, bytes] | None,
                  reproduced: tuple[list[int], dict[str, int]] | None) -> dict[str, Any]:
    ev = Evaluator(_on_worker(target, store), settings, probe=False)
    if reproduced is not None:  # the captured calls the probe found the reference reproduces
        ev.plan.reproduced(*reproduced)
    try:
        result = ev.run(job)
    finally:
        ev.close()
    result.host = _where()
    return {"result": result.model_dump(), "baseline_times": ev.baseline_times}


def offered_task(target: Target, settings: EvalSettings, result: CandidateResult, store: dict[str, bytes] | None,
                 reproduced: tuple[list[int], dict[str, int]] | None, check: str) -> Any:
    """One of the evaluator's checks of the candidate about to be offered (`check`: check_memory or
    profile_offered), on a worker node."""
    ev = Evaluator(_on_worker(target, store), settings, probe=False)
    if reproduced is not None:
        ev.plan.reproduced(*reproduced)
    try:
        return getattr(ev, check)(result)
    finally:
        ev.close()


def regression_task(target: Target, new_source: str, command: list[str] | None,
                    settings: EvalSettings) -> dict[str, Any]:
    reg = run_regression(_on_worker(target), new_source, LocalBackend(settings.isolation), default_python(), command,
                         settings.limits)
    return reg.model_dump()


# ------------------------------------------------------------------ on the driver
def _host_port(address: str) -> tuple[str, str]:
    """HOST and PORT of a GCS (`HOST:PORT`) or Ray Client (`ray://HOST:PORT`) address."""
    host, _, port = address.removeprefix("ray://").rsplit("/", 1)[0].rpartition(":")
    return host, port


def _reachable(address: str) -> None:
    """Fail fast (Ray itself waits minutes) when nothing listens at `address`."""
    host, port = _host_port(address)
    if not host or not port.isdigit():
        raise ClusterError(f"--ray-address {address}: expected HOST:PORT (the head's GCS) or ray://HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ClusterError(f"the Ray cluster at {address} cannot be reached ({exc.strerror or exc})")


def _loopback(address: str | None) -> bool:
    """No address (a Ray of our own), or a cluster's at this machine's loopback address."""
    if not address:
        return True
    return _host_port(address)[0] in ("127.0.0.1", "localhost", "::1", "[::1]")


class RayPool(EvaluationPool):
    name = "ray"

    def __init__(self, target: Target, settings: EvalSettings, address: str | None = None, jobs: int | None = None,
                 pip: list[str] | None = None) -> None:
        address = address or os.environ.get("RAY_ADDRESS") or None
        if _loopback(address) and "ray" not in sys.modules:
            # A cluster at the loopback address (or our own) is on this machine and reachable from it only:
            # Ray would turn 127.0.0.1 into the host's address, where none of its nodes listens. This is
            # Ray's switch (read when ray is imported) that keeps local addresses on the loopback.
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        try:
            import ray
        except ImportError:
            raise ClusterError("Ray is not installed: pip install 'redline[ray]'")
        self.ray = ray
        self.target = target
        self.settings = settings
        if target.inputs.file is not None and not target.inputs.file.is_relative_to(target.project_root):
            raise TargetError(f"{target.inputs.file}: with --backend ray the inputs file must be inside the project "
                              f"({target.project_root}), which is what the workers receive")
        store = _store_files(target)
        if address and address != "auto":
            _reachable(address)
        runtime_env: dict[str, Any] = {"working_dir": str(target.project_root), "excludes": EXCLUDES}
        if pip:
            runtime_env["pip"] = pip
        local: dict[str, Any] = {} if address else {"include_dashboard": False}  # no address: a Ray of our own
        try:
            ray.init(address=address, runtime_env=runtime_env, namespace="redline", log_to_driver=False,
                     logging_level=logging.WARNING, **local)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ClusterError(f"cannot join the Ray cluster{' at ' + address if address else ''}: {exc}")
        self.gpu = settings.device == "cuda"
        self.resources = {"num_gpus": 1, "num_cpus": 1} if self.gpu else {"num_cpus": 1}
        self.slots = self._slots()
        total = sum(self.slots.values())
        if total == 0:
            ray.shutdown()
            raise ClusterError("no node of the Ray cluster has " + ("a GPU" if self.gpu else "a CPU") + " to offer")
        self.concurrency = min(total, jobs) if jobs else total
        self.baseline_times = []
        self.notes = []
        self._failed: list[CandidateResult] = []  # jobs that could not be started at all
        self._running: dict[Any, tuple[Job, str, int]] = {}  # ref -> (job, node, attempt)
        self._load: dict[str, int] = dict.fromkeys(self.slots, 0)
        self._cancelled = False
        try:
            self._store = ray.put(store) if store is not None else None  # sent once, read by every task
            info = self._call(probe_task, next(iter(self.slots)), target, settings, self._store)
        except BaseException:
            ray.shutdown()
            raise
        self.inputs_info = InputsInfo.model_validate(info["inputs_info"])
        self._reproduced = info["reproduced"]
        self.inputs, self.hardware, self.bound = info["inputs"], info["hardware"], info["bound"]
        self.local_types, self.callee_types = info["local_types"], info["callee_types"]
        self.isolation = f"{info['isolation']}, on Ray workers"
        self.reference_hardware = info["hardware"]

    def _slots(self) -> dict[str, int]:
        """Node id -> how many timings it can hold at once (GPUs, or CPUs)."""
        out = {}
        for node in self.ray.nodes():
            if not node.get("Alive"):
                continue
            res = node.get("Resources", {})
            out[node["NodeID"]] = int(res.get("GPU", 0)) if self.gpu else int(res.get("CPU", 0))
        return {k: v for k, v in out.items() if v > 0}

    def _remote(self, fn: Any, node: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return self.ray.remote(fn).options(max_retries=0, retry_exceptions=False, **self.resources,
                                           scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))

    def _call(self, fn: Any, node: str, *args: Any) -> Any:
        """Run `fn` on `node` and wait; worker-side errors come back as the errors they are."""
        try:
            return self.ray.get(self._remote(fn, node).remote(*args))
        except self.ray.exceptions.RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, BaseException) else None
            if isinstance(cause, TargetError):
                raise cause
            if isinstance(cause, (ImportError, ModuleNotFoundError)) or "ModuleNotFoundError" in str(exc):
                raise ClusterError(f"the Ray workers cannot run redline ({_last_line(exc)}): install redline in "
                                   "the workers' Python environment")
            raise ClusterError(f"a Ray worker failed: {_last_line(exc)}")
        except self.ray.exceptions.RayError as exc:
            raise ClusterError(f"the Ray cluster failed: {_last_line(exc)}")

    def _pick(self, avoid: str | None = None) -> str:
        """The node with the most free slots (not `avoid`, where another will do). The cluster's node
        list is asked for again only after a loss, not on every submit."""
        if avoid is not None:
            self.slots = self._slots()
        candidates = [n for n in self.slots if n != avoid] or list(self.slots)
        if not candidates:
            raise ClusterError("no node of the Ray cluster is alive")
        return max(candidates, key=lambda n: self.slots[n] - self._load.get(n, 0))

    def _launch(self, job: Job, attempt: int, avoid: str | None = None) -> None:
        node = self._pick(avoid)
        ref = self._remote(evaluate_task, node).remote(self.target, self.settings, job, self._store, self._reproduced)
        self._load[node] = self._load.get(node, 0) + 1
        self._running[ref] = (job, node, attempt)

    def submit(self, job: Job) -> None:
        try:
            self._launch(job, 0)
        except ClusterError as exc:  # the pool lost every node: this candidate cannot run
            self._failed.append(_infra(job, str(exc)))

    def next_done(self, timeout: float) -> CandidateResult | None:
        if self._failed:
            return self._failed.pop(0)
        if not self._running:
            return None
        ready, _ = self.ray.wait(list(self._running), num_returns=1, timeout=timeout)
        if not ready:
            return None
        ref = ready[0]
        job, node, attempt = self._running.pop(ref)
        self._load[node] -= 1
        ray = self.ray
        try:
            out = ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            return decided(job, "cancelled", "cancelled while it ran", None)
        except ray.exceptions.RayTaskError as exc:
            return _infra(job, f"the evaluation failed on the worker: {_last_line(exc)}")
        except ray.exceptions.RayError as exc:  # the worker process or its node died
            lost = f"the Ray worker on node {node[:8]} was lost ({exc.__class__.__name__})"
            if attempt == 0 and not self._cancelled:
                try:
                    self._launch(job, 1, avoid=node)
                    self.notes.append(f"{job.id}: {lost}; tried once more")
                    return self.next_done(timeout)
                except ClusterError as again:
                    lost += f"; no other node to retry on ({again})"
            return _infra(job, f"{lost}, twice" if attempt else lost)
        result = CandidateResult.model_validate(out["result"])
        if result.hardware in ("", self.reference_hardware):
            self.baseline_times.extend(out["baseline_times"])
        return result

    def cancel(self) -> None:
        self._cancelled = True
        for ref in list(self._running):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # already finished, or the cluster is gone
                pass

    def regression(self, target: Target, new_source: str, command: list[str] | None) -> Regression:
        try:
            return Regression.model_validate(self._call(regression_task, self._pick(), target, new_source, command,
                                                        self.settings))
        except ClusterError as exc:
            return Regression(ran=True, passed=False, command=command or [], output_tail=str(exc))

    def check_memory(self, result: CandidateResult) -> tuple[str | None, str | None]:
        if not self.settings.checks_memory:  # no task sent where Evaluator.check_memory would do nothing
            return None, None
        try:
            ran, reason = self._call(offered_task, self._pick(), self.target, self.settings, result, self._store,
                                     self._reproduced, "check_memory")
        except ClusterError as exc:
            return f"not run: {exc}", None
        return ran, reason

    def profile_offered(self, result: CandidateResult) -> KernelProfile | None:
        if not self.settings.profiles_kernels:  # no task sent where Evaluator.profile_offered would do nothing
            return None
        try:
            profile = self._call(offered_task, self._pick(), self.target, self.settings, result, self._store,
                                 self._reproduced, "profile_offered")
        except ClusterError as exc:
            self.notes.append(f"{result.id} was not profiled with Nsight Compute: {exc}")
            return None
        return KernelProfile.model_validate(profile) if profile is not None else None

    def close(self) -> None:
        if self._running:
            self.cancel()
        self.ray.shutdown()


def _infra(job: Job, reason: str) -> CandidateResult:
    return decided(job, "infra_error", reason, "harness")


def _last_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1].strip()[:300] if lines else exc.__class__.__name__


def ray_factory(address: str | None = None, jobs: int | None = None, pip: list[str] | None = None) -> PoolFactory:
    """What `optimise(make_pool=...)` takes to evaluate on the Ray cluster at `address`."""

    def make(target: Target, settings: EvalSettings) -> EvaluationPool:
        return RayPool(target, settings, address, jobs, pip)

    return make
