"""The sandboxed workers of one run: what each runs (its spec), where its compiler caches are, and the
bookkeeping that lets a cancel from any thread kill every worker of the candidate being evaluated."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from .inputs.plan import InputPlan
from .models import EvalSettings
from .sandbox import ExecutionBackend, Worker, WorkerDied, WorkerTimeout
from .target import Target, imports_of
from .verdict import Channel, error_line


class Workers:
    """Starts the run's workers (the backend's processes) and tracks the live ones for cancel()."""

    def __init__(self, target: Target, settings: EvalSettings, backend: ExecutionBackend, python: str,
                 plan: InputPlan) -> None:
        self.target, self.settings, self.backend, self.python, self.plan = target, settings, backend, python, plan
        self.threads: int | None = None  # the workers' OMP_NUM_THREADS on a busy machine (Evaluator.probe)
        self.cancelled = threading.Event()
        self._lent: list[str] = []  # folders appended to a foreign interpreter's path (see _lend)
        self._active: list[Worker] = []
        self._lock = threading.Lock()  # _active and cancelled change together (see _track)
        self._cache: str | None = None  # the trusted workers' compiler cache (see LocalBackend.start)
        self._sealed: dict[str, str] = {}  # a compiled candidate's build -> its extension modules as built (prebuild)

    def spec(self, candidate: str | None, trusted: bool, build: str | None = None,
             build_only: bool = False) -> dict[str, Any]:
        """What a worker runs. Its compiler caches: the trusted code's shared one (compile_cache), the
        candidate's `build` (the one evaluation's, see build), or else the worker's own scratch."""
        t = self.target
        cache = self.compile_cache(candidate) if trusted else build
        # The file's own folder only for a module outside a package (a script and its siblings): inside a
        # package it would shadow the standard library with the package's own html.py or types.py.
        own = [] if (t.file.parent / "__init__.py").exists() else [str(t.file.parent)]
        module, sys_path = t.module_name, [str(t.project_root), *own]
        manifest = t.inputs.manifest
        if manifest is not None and manifest.module != "__main__":
            # The module under the name the captured program knew it by: its pickled objects refer to it.
            module, sys_path = manifest.module, [manifest.import_root, *sys_path]
        return {"file": str(t.file), "qualname": t.qualname, "module": module, "sys_path": sys_path,
                "fallback_path": self._lend(), "visible": [str(Path(self.python).parent.parent), *self._lend()],
                # A build worker gets no inputs: it runs no call, and nothing it leaves may hold one.
                "inputs": {"kind": "none"} if build_only else self.plan.worker_spec(), "device": self.settings.device,
                "candidate": candidate, "allow_processes": trusted or build_only, "build_only": build_only,
                "env": self._env(candidate),
                "preimport": imports_of(candidate) if candidate else [],
                **({"compile_cache": cache} if cache else {})}

    def _lend(self) -> list[str]:
        """For the program's own interpreter (evaluate.py::program_python): a folder with redline's
        cloudpickle, which captured calls may need to unpickle, at the end of its path (the program's own
        copy comes first)."""
        if self.python == sys.executable or self._lent:
            return self._lent
        import cloudpickle

        lib = os.path.join(self._cache_dir("lent"), "lib")
        if not os.path.isdir(os.path.join(lib, "cloudpickle")):
            shutil.copytree(os.path.dirname(cloudpickle.__file__), os.path.join(lib, "cloudpickle"),
                            ignore=shutil.ignore_patterns("__pycache__"))
        self._lent = [lib]
        return self._lent

    def compile_cache(self, candidate: str | None) -> str:
        """The compiler cache of one trusted code (the target's, or one built-in variant's): shared by
        the workers that run that same code (its timing, its Nsight Compute run, the head-to-head),
        never between variants: a variant's tuned artefacts must not reach the head-to-head's plain
        torch.compile. Code in inductor's multi-kernel mode gets a fresh cache for every worker:
        compiling it again from a warm cache makes inductor raise (the trust model's Sandbox)."""
        key = hashlib.sha256(candidate.encode()).hexdigest()[:16] if candidate is not None else "target"
        if candidate is not None and "multi_kernel" in candidate:
            key += "-" + uuid.uuid4().hex[:8]
        return self._cache_dir(key)

    def build(self, code: str) -> str | None:
        """A candidate's build: the compiler caches (inductor, Triton with its autotuning choices,
        torch's inline extensions) that the workers of one evaluation of it share, at one path, so a
        kernel compiled and tuned in its first worker is loaded, not built again, by its second pair,
        compute-sanitizer's and Nsight Compute's workers. Never shared between candidates or with the
        reference, nor with a pair that times calls as first seen (see Stages._first_seen_of); none for
        inductor's multi-kernel mode (see compile_cache)."""
        return None if "multi_kernel" in code else self._cache_dir("build-" + uuid.uuid4().hex[:12])

    def builds_apart(self) -> bool:
        """Whether an untrusted candidate's compile can run in a worker of its own that may start processes:
        only in bubblewrap's own pid namespace, where every process it starts ends with it."""
        return getattr(self.backend, "isolation", "").startswith("bwrap")

    def prebuild(self, code: str, build: str) -> str | None:
        """What an untrusted candidate compiles with redline's decorators, built into its evaluation's
        `build` in a worker of its own (which may start the compiler's processes; it is never timed, and
        its pid namespace ends with it): None, or why it did not build. The workers that judge and time
        the candidate load that build and may not start processes."""
        worker = self._track(self.backend.start(self.spec(code, False, build, build_only=True), self.python,
                                                self.settings.limits))
        try:
            load = Channel(worker, "the candidate's build", self.settings.limits.wall_s).load()
        except WorkerTimeout:
            return "its build did not finish before the deadline"
        except WorkerDied as exc:
            return f"its build {exc}"
        finally:
            worker.close()
        if not load.ok:
            return error_line(load.error)
        self._sealed[build] = self._extensions_of(build)
        return None

    def extensions(self, build: str) -> str:
        """A fresh build holding only the extension modules the build worker made for `build` (copied
        when it ended, before any judged worker could write there): for the first-seen pair, which gets
        nothing a first pair left."""
        return self._extensions_of(self._sealed.get(build, ""))

    def _extensions_of(self, build: str) -> str:
        fresh = self.build("")
        assert fresh is not None
        source, target = os.path.join(build, "cython"), os.path.join(fresh, "cython")
        os.makedirs(target, exist_ok=True)
        for name in os.listdir(source) if build and os.path.isdir(source) else ():
            if name.endswith(tuple(EXTENSION_SUFFIXES)):
                shutil.copy2(os.path.join(source, name), target)
        return fresh

    def _cache_dir(self, name: str) -> str:
        if self._cache is None:
            self._cache = tempfile.mkdtemp(prefix="redline-compile-")
        path = os.path.join(self._cache, name)
        os.makedirs(path, mode=0o700, exist_ok=True)
        return path

    def _env(self, candidate: str | None) -> dict[str, str]:
        """Triton kernels on the CPU run in Triton's interpreter (set before triton is imported); thread
        pools sized to the free cores on a busy machine."""
        env = {"OMP_NUM_THREADS": str(self.threads)} if self.threads else {}
        # A Cython candidate that cannot build raises in the sandbox instead of running as plain Python.
        env["REDLINE_CYTHON_STRICT"] = "1"
        if self.settings.device == "cpu" and ("triton" in self.target.source or "triton" in (candidate or "")):
            env["TRITON_INTERPRET"] = "1"
        return env

    def start(self, candidate: str | None, trusted: bool, who: str, build: str | None = None) -> Channel:
        worker = self._track(self.backend.start(self.spec(candidate, trusted, build), self.python,
                                                self.settings.limits))
        return Channel(worker, who, self.settings.limits.wall_s)

    def pair(self, code: str, trusted: bool, baseline: str | None, build: str | None) -> tuple[Channel, Channel]:
        """A fresh candidate worker (on the candidate's `build`, where given) and a fresh baseline worker."""
        return self.start(code, trusted, "the candidate", build), self.start(baseline, True, "the reference")

    @contextlib.contextmanager
    def under(self, code: str | None, trusted: bool, prefix: tuple[str, ...],
              env: dict[str, str] | None = None, build: str | None = None) -> Iterator[Worker]:
        """A sandboxed worker of `code` run under a tool (`prefix`: compute-sanitizer, ncu), closed after."""
        spec = self.spec(code, trusted, build)
        spec["env"] = {**spec["env"], **(env or {})}
        worker = self._track(self.backend.start(spec, self.python, self.settings.limits, prefix=prefix))
        try:
            yield worker
        finally:
            self.untrack()
            worker.close()

    def _track(self, worker: Worker) -> Worker:
        """Register a started worker for cancel(). cancel() and this meet under one lock, so a worker
        started while a cancel runs is either among those it kills or killed here: none escapes a
        cancel, however the two threads interleave."""
        with self._lock:
            self._active.append(worker)
            cancelled = self.cancelled.is_set()
        if cancelled:
            worker.kill()
        return worker

    def untrack(self) -> list[Worker]:
        with self._lock:
            done, self._active = self._active, []
        return done

    def cancel(self) -> None:
        """Stop at once: kill the workers of the candidate being evaluated (safe from any thread)."""
        with self._lock:
            self.cancelled.set()
            active = list(self._active)
        for w in active:
            w.kill()

    def close(self) -> None:
        """Remove the trusted workers' compiler cache; no worker outlives an evaluation."""
        if self._cache is not None:
            shutil.rmtree(self._cache, ignore_errors=True)
            self._cache = None
