"""The checks of a verified candidate about to be offered, outside its verdict's stages: compute-sanitizer
(whose findings make it `incorrect`, stage `memory_check`) and Nsight Compute's profile of its kernels.
Both run its code in sandboxed workers under the tool, on its own build."""

from __future__ import annotations

from .inputs.plan import fresh_seeds
from .kernel_profile import ncu_path, ncu_prefix, read_report, summarise
from .models import EvalSettings, KernelProfile
from .protocol import ProfiledCalls
from .sandbox import Worker, WorkerDied, WorkerTimeout
from .sanitizer import prefix as sanitizer_prefix
from .sanitizer import read_log, sanitizer_path, tools_for
from .verdict import Channel, Rejected
from .workers import Workers


class Offered:
    def __init__(self, settings: EvalSettings, workers: Workers) -> None:
        self.settings, self.workers = settings, workers

    def sanitize(self, code: str, trusted: bool, build: str | None = None) -> tuple[str, Rejected | None]:
        """compute-sanitizer's tools (sanitizer.py) on `code` in sandboxed workers, one fresh input each:
        what ran (or why nothing did), and the rejection a reported error means."""
        tool_path = sanitizer_path()
        if tool_path is None:
            return "not run: compute-sanitizer is not installed here", None
        passed = []
        for tool in tools_for(code):
            # Each tensor its own allocation: a write past a tensor inside one of the caching allocator's
            # blocks is invisible to the tool.
            with self.workers.under(code, trusted, sanitizer_prefix(tool_path, tool),
                                    {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, build) as worker:
                try:
                    self._profiled(worker, f"the candidate under compute-sanitizer {tool}", 1)
                    finding = read_log(worker.scratch, tool)
                except (Rejected, WorkerDied, WorkerTimeout) as exc:
                    finding = read_log(worker.scratch, tool)  # a tool may stop the process at the first error
                    if finding is None or not finding.errors:
                        return f"not run: {tool} stopped ({exc})", None
            if finding is None:
                return f"not run: {tool} reported no summary", None
            if finding.errors:
                return f"{tool}: {finding.errors} error(s)", Rejected(
                    "incorrect", f"compute-sanitizer {tool} reports {finding.errors} error(s): {finding.first}",
                    stage="memory_check")
            passed.append(tool)
        return f"{', '.join(passed)}: no errors", None

    def profile_kernels(self, code: str | None, trusted: bool, build: str | None = None) -> KernelProfile | None:
        """Nsight Compute on `code`'s kernels in a sandboxed worker; None where ncu is missing or fails."""
        ncu = ncu_path()
        if ncu is None or self.workers.cancelled.is_set():
            return None
        with self.workers.under(code, trusted, ncu_prefix(ncu), build=build) as worker:
            try:
                if not self._profiled(worker, "the candidate under ncu", 2):
                    return None
            except (Rejected, WorkerDied, WorkerTimeout):
                return None
            profile = read_report(worker.scratch)
            return summarise(profile) if profile is not None else None

    def _profiled(self, worker: Worker, who: str, calls: int) -> bool:
        """`calls` calls on fresh inputs in a worker under a tool, then its exit (when the tool writes its
        report); False where the code did not load or the tool did not finish."""
        ch = Channel(worker, who, self.settings.limits.wall_s * 4)
        if not ch.load().ok:
            return False
        reply = ch.ask(ProfiledCalls(seeds=fresh_seeds(calls)))
        if reply.batch_error:
            raise Rejected("crashed", f"{who} raised: {reply.batch_error}")
        return worker.finish(timeout=self.settings.limits.wall_s * 4) is not None
