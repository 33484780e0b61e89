"""`redline mcp`: redline's hotspots and verified optimisation as MCP tools for coding agents.

The same models and evaluator as the CLI and the language server. `optimise` never applies a
winner; `apply_winner` applies one only if the file is unchanged since its run, as the editor does.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from redline.evaluator.apply import ApplyRefused, run_report
from redline.evaluator.apply import apply_winner as apply_run_winner
from redline.evaluator.loop import Budget
from redline.evaluator.loop import optimise as run_optimise
from redline.evaluator.models import EvalSettings, Limits
from redline.evaluator.proposers import Context as ProposalContext
from redline.evaluator.proposers import Proposal, Proposer
from redline.evaluator.proposers.builtin import builtin_proposers
from redline.evaluator.proposers.llm import SYSTEM, apply_search_replace, build_prompt
from redline.evaluator.target import TargetError, extract_code, load_target
from redline.profilers import ParseError
from redline.profilers import report as hotspot_report
from redline.profilers.record import RecordError, record


class ClientModelProposer(Proposer):
    """Candidates from the MCP client's own model (sampling), asked from the evaluator's thread."""

    name = "client-model"

    def __init__(self, ctx: Context, per_round: int = 2) -> None:
        self.ctx = ctx
        self.per_round = per_round

    def propose(self, ctx: ProposalContext) -> list[Proposal]:
        from mcp import types

        prompt = build_prompt(ctx)
        out = []
        for _ in range(self.per_round):
            async def ask() -> Any:
                return await self.ctx.session.create_message(
                    [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
                    max_tokens=4096, system_prompt=SYSTEM)
            result = anyio.from_thread.run(ask)
            text = getattr(result.content, "text", "") or ""
            code = extract_code(text) or apply_search_replace(ctx.best.code if ctx.best else ctx.target.function_source,
                                                             text)
            out.append(Proposal(code=code or "# the reply held no ```python block\n",
                                origin=f"client:{getattr(result, 'model', 'model')}", approach="client rewrite",
                                prompt=prompt, reply=text))
        return out


def build(root: Path) -> MCPServer:
    root = root.resolve()
    server = MCPServer("redline", instructions=(
        "Measured hotspots from real profiles, and verified optimisation of one function: every candidate "
        "is sandboxed, checked against the original on fresh inputs and timed against it with a 95% "
        "interval. optimise never edits files; apply_winner does, only if the file is unchanged."))

    def resolve(path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() else root / p

    @server.tool()
    def hotspots(traces: list[str], workspace_root: str = "", top: int = 20) -> dict[str, Any]:
        """Hot functions of py-spy, speedscope, torch.profiler, Nsight Systems or Nsight Compute traces,
        mapped onto the workspace (the JSON of `redline hotspots --json`)."""
        try:
            doc = hotspot_report([resolve(t) for t in traces], resolve(workspace_root or str(root)), top)
        except ParseError as exc:
            raise ToolError(str(exc))
        return doc.model_dump(mode="json")

    @server.tool()
    async def profile(command: list[str], output: str = "", format: Literal["speedscope", "raw"] = "speedscope",
                      subprocesses: bool = False, top: int = 10) -> dict[str, Any]:
        """Record a command with py-spy; returns the trace path, the command's exit code and its top hotspots."""
        if not command:
            raise ToolError("give the command to record, e.g. ['python', 'app.py']")
        out = resolve(output) if output else root / ".redline" / ("mcp-profile.speedscope.json" if format == "speedscope"
                                                                  else "mcp-profile.txt")
        try:
            rc = await anyio.to_thread.run_sync(lambda: record(command, out, fmt=format, subprocesses=subprocesses))
            doc = hotspot_report([out], root, top)
        except (RecordError, ParseError) as exc:
            raise ToolError(str(exc))
        return {"trace": str(out), "exit_code": rc, "hotspots": doc.model_dump(mode="json")["hotspots"]}

    @server.tool()
    async def optimise(file: str, function: str, ctx: Context, budget: int = 6, rounds: int = 2,
                       device: Literal["cpu", "cuda"] = "cpu", builtin: bool = True, base_url: str = "",
                       model: str = "", use_client_model: bool = False, candidate_timeout: float = 60.0) -> dict[str, Any]:
        """Search for a verified faster version of FILE's FUNCTION (qualified name). Reports progress;
        returns the report with the winner's diff. Never applies it: call apply_winner with the run id."""
        try:
            target = load_target(f"{resolve(file)}::{function}")
        except TargetError as exc:
            raise ToolError(str(exc))
        proposers: list[Proposer] = builtin_proposers() if builtin else []
        if base_url:
            from redline.evaluator.proposers.llm import LLMProposer, LLMSettings

            proposers.append(LLMProposer(LLMSettings(base_url=base_url, model=model or "gpt-4o-mini")))
        if use_client_model:
            proposers.append(ClientModelProposer(ctx))
        if not proposers:
            raise ToolError("no proposer: set builtin, base_url or use_client_model")
        cancel = threading.Event()
        total = float(budget)

        def progress(event: str, data: dict[str, object]) -> None:
            if event != "candidate_done":
                return
            best = data.get("best")
            msg = (f"round {data['round']} · {data['tried']} tried · {data['id']} {data['status']}: "
                   f"{str(data['reason'])[:120]} · best " + (f"{best:.2f}x" if isinstance(best, float) else "none"))
            tried = data["tried"]
            anyio.from_thread.run(ctx.report_progress, float(tried) if isinstance(tried, int) else 0.0, total, msg)

        settings = EvalSettings(device=device, limits=Limits(wall_s=candidate_timeout))
        try:
            report = await anyio.to_thread.run_sync(
                lambda: run_optimise(target, proposers, settings, Budget(candidates=budget, rounds=rounds), progress, cancel),
                abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            cancel.set()  # the evaluator kills the running candidate at once
            raise
        except TargetError as exc:
            raise ToolError(str(exc))
        return report.model_dump(mode="json")

    @server.tool()
    def apply_winner(run_id: str) -> dict[str, Any]:
        """Apply a finished run's verified winner to its file, only if the file is unchanged since the run."""
        try:
            report = run_report(root / ".redline" / "runs", run_id)
            path = apply_run_winner(report)
        except ApplyRefused as exc:
            raise ToolError(f"not applied: {exc}")
        assert report.winner is not None
        return {"applied": True, "file": path, "speedup": report.winner.speedup,
                "speedup_ci95": list(report.winner.speedup_ci95)}

    @server.resource("redline://runs", mime_type="application/json")
    def runs() -> list[dict[str, Any]]:
        """Past optimisation runs in this workspace."""
        out = []
        for d in sorted((root / ".redline" / "runs").glob("*/report.json"), reverse=True):
            try:
                r = run_report(root / ".redline" / "runs", d.parent.name)
            except ApplyRefused:
                continue
            out.append({"run_id": d.parent.name, "function": r.target.function, "file": r.target.file,
                        "winner": r.winner.speedup if r.winner else None})
        return out

    @server.resource("redline://runs/{run_id}", mime_type="text/markdown")
    def run(run_id: str) -> str:
        """One run's summary (report.md)."""
        try:
            run_report(root / ".redline" / "runs", run_id)
        except ApplyRefused as exc:
            raise ToolError(str(exc))
        return (root / ".redline" / "runs" / run_id / "report.md").read_text()

    return server


def serve(root: Path) -> None:
    build(root).run("stdio")
