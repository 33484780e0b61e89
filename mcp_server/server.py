"""`redline mcp`: redline's hotspots and verified optimisation as MCP tools for coding agents.

The same models and evaluator as the CLI and the language server. `optimise` never applies a
winner; `apply_winner` applies one only if the file is unchanged since its run, as the editor does.
"""

from __future__ import annotations

import queue
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, cast

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from redline.evaluator.apply import ApplyRefused, run_report
from redline.evaluator.apply import apply_winner as apply_run_winner
from redline.evaluator.inputs.capture import CaptureError, capture_target, hot_targets, run_capture
from redline.evaluator.inputs.store import StoreError, command_to_capture, remember_profile
from redline.evaluator.progress import CandidateDone, Event, describe
from redline.evaluator.proposers.llm import SYSTEM, AskingProposer
from redline.evaluator.run import LLMOptions, RunOptions, execute
from redline.evaluator.sandbox import isolation_line
from redline.evaluator.target import TargetError, load_target
from redline.profilers import ParseError
from redline.profilers import report as hotspot_report
from redline.profilers.record import RecordError, Sampling, record

ANSWER_TIMEOUT_S = 600.0
"""How long a run waits for the client's model to answer its prompts before it is cancelled."""


class _Run:
    """One `optimise` call's search, on its own thread so that it can outlive one round of the call.

    The search speaks to the tool call through events: ("progress", args), ("ask", prompts) and
    ("done", report) or ("error", exception). Over a connection with a back-channel (protocol
    versions before 2026-07-28) the handler answers an ask itself with sampling/createMessage. On
    2026-07-28, which has no back-channel, it returns the prompts as an InputRequiredResult and the
    client's retry of the call brings the answers back, with the run's token as its request state.
    """

    def __init__(self) -> None:
        self.token = secrets.token_urlsafe(24)
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.answers: queue.Queue[list[str]] = queue.Queue()
        self.cancel = threading.Event()
        self.asked: list[str] = []  # the keys of the prompts the client holds

    def start(self, search: Callable[[], Any]) -> None:
        def main() -> None:
            try:
                self.events.put(("done", search()))
            except BaseException as exc:  # the handler turns it into a tool error
                self.events.put(("error", exc))

        threading.Thread(target=main, name=f"redline-mcp-{self.token[:6]}", daemon=True).start()

    def ask(self, prompts: list[str]) -> list[str]:
        """On the search's thread: the client model's replies to PROMPTS, in order."""
        self.events.put(("ask", prompts))
        try:
            return self.answers.get(timeout=ANSWER_TIMEOUT_S)
        except queue.Empty:
            self.cancel.set()
            raise RuntimeError(f"the MCP client did not answer within {ANSWER_TIMEOUT_S:.0f} s; the run was cancelled")


def _sampling_request(prompt: str) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(params=types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=4096, system_prompt=SYSTEM))


def _reply_text(result: Any) -> str:
    """The text of a sampling result (a model, or its JSON as a dict); '' for anything else."""
    content = result.get("content") if isinstance(result, dict) else getattr(result, "content", None)
    for part in content if isinstance(content, list) else [content]:
        text = part.get("text") if isinstance(part, dict) else getattr(part, "text", None)
        if isinstance(text, str):
            return text
    return ""


def _rooted(spec: str, resolve: Callable[[str], Path]) -> str:
    """FILE::QUALNAME with FILE taken relative to the workspace root."""
    file, sep, qual = spec.partition("::")
    return f"{resolve(file)}{sep}{qual}"


def build(root: Path) -> MCPServer:
    root = root.resolve()
    server = MCPServer("redline", instructions=(
        "Measured hotspots from real profiles, and verified optimisation of one function: every candidate "
        "is sandboxed, checked against the original on fresh inputs and timed against it with a 95% "
        "interval. optimise never edits files; apply_winner does, only if the file is unchanged."))

    _trace_tools(server, root)
    _running_tools(server, root)
    _optimise_tools(server, root)
    _run_resources(server, root)
    return server


def _resolver(root: Path) -> Callable[[str], Path]:
    def resolve(path: str) -> Path:
        p = Path(path)
        return p if p.is_absolute() else root / p
    return resolve


def _trace_tools(server: MCPServer, root: Path) -> None:
    """hotspots and diff: traces read."""
    resolve = _resolver(root)

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
    def diff(before: str, after: str, workspace_root: str = "", top: int = 20) -> dict[str, Any]:
        """Two traces of one program compared function by function (the JSON of `redline diff --json`):
        each function's self and total share before and after, the change, and what vanished or appeared,
        largest self change first."""
        from redline.profilers.diff import diff as profile_diff

        try:
            doc = profile_diff([resolve(before)], [resolve(after)], resolve(workspace_root or str(root)), top)
        except ParseError as exc:
            raise ToolError(str(exc))
        return doc.model_dump(mode="json")


def _running_tools(server: MCPServer, root: Path) -> None:
    """profile and capture: the program run."""
    resolve = _resolver(root)

    @server.tool()
    async def profile(command: list[str], output: str = "", format: Literal["speedscope", "raw"] = "speedscope",
                      subprocesses: bool = False, top: int = 10) -> dict[str, Any]:
        """Record a command with py-spy; returns the trace path, the command's exit code and its top hotspots."""
        if not command:
            raise ToolError("give the command to record, e.g. ['python', 'app.py']")
        out = resolve(output) if output else root / ".redline" / ("mcp-profile.speedscope.json" if format == "speedscope"
                                                                  else "mcp-profile.txt")
        try:
            rc = await anyio.to_thread.run_sync(lambda: record(command, out, Sampling(fmt=format, subprocesses=subprocesses),
                                                                            stdio_to_stderr=True))
            remember_profile(root, command, out)
            doc = hotspot_report([out], root, top)
        except (RecordError, ParseError) as exc:
            raise ToolError(str(exc))
        return {"trace": str(out), "exit_code": rc, "hotspots": doc.model_dump(mode="json")["hotspots"]}

    @server.tool()
    async def capture(command: list[str] | None = None, targets: list[str] | None = None, top: int = 3,
                      calls: int = 64, max_mb: float = 256.0, duration: float | None = None) -> dict[str, Any]:
        """Run a command (default: the last profiled one) and keep real calls of functions (FILE::QUALNAME;
        default: the `top` hottest of the workspace's own code in the latest trace) as their inputs, for
        optimise; a service is stopped after `duration` seconds (SIGTERM) with its calls kept. Returns the
        command's exit code (and `stopped`) and, per function, the calls kept and what was not."""
        try:
            cmd, cwd = command_to_capture(root, list(command or []),
                                          "give the command, e.g. ['python', 'app.py'] (no profile was recorded here)")
            chosen = [capture_target(_rooted(t, resolve)) for t in targets or []] or hot_targets(root, top)[1]
            result = await anyio.to_thread.run_sync(lambda: run_capture(chosen, cmd, cwd, calls, max_mb,
                                                                                 stdio_to_stderr=True,
                                                                                 duration=duration))
        except (CaptureError, StoreError) as exc:
            raise ToolError(str(exc))
        return {"exit_code": result.exit_code, "stopped": result.stopped, "command": cmd, "targets": [
            {"target": t.spec, "store": str(folder), "calls_seen": m.calls_seen, "calls_kept": m.calls_kept,
             "signatures": len(m.signatures), "not_kept": {**m.unrecordable, **m.dropped}}
            for t, m, folder in result.manifests]}


def _optimise_tools(server: MCPServer, root: Path) -> None:
    """optimise (with the agent's own model through sampling) and apply_winner."""
    resolve = _resolver(root)
    runs_in_flight: dict[str, _Run] = {}

    @server.tool()
    async def optimise(file: str, function: str, ctx: Context, budget: int = 6, rounds: int = 2,
                       device: Literal["cpu", "cuda"] = "cpu", builtin: bool = True, base_url: str = "",
                       model: str = "", use_client_model: bool = False,
                       candidate_timeout: float = 60.0) -> dict[str, Any] | types.InputRequiredResult:
        """Search for a verified faster version of FILE's FUNCTION (qualified name). Reports progress;
        returns the report with the winner's diff. Never applies it: call apply_winner with the run id.
        With use_client_model, candidates come from your own model through MCP sampling."""
        if ctx.request_state is not None:  # a later round of the same call, bringing the client's answers
            run = runs_in_flight.get(ctx.request_state)
            if run is None:
                raise ToolError("this optimise run is unknown or over (was the server restarted?); call optimise again")
            answers = ctx.input_responses or {}
            run.answers.put([_reply_text(answers.get(key)) for key in run.asked])
        else:
            options = RunOptions(builtin=builtin, llm=LLMOptions(base_url=base_url, model=model) if base_url else None,
                                 device=device, candidate_timeout=candidate_timeout, budget=budget, rounds=rounds)
            run = _start(f"{resolve(file)}::{function}", ctx, options, use_client_model)
            runs_in_flight[run.token] = run
        try:
            return await _relay(run, ctx, runs_in_flight)
        except anyio.get_cancelled_exc_class():
            run.cancel.set()  # the evaluator kills the running candidate at once
            runs_in_flight.pop(run.token, None)
            raise

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


def _start(spec: str, ctx: Context, options: RunOptions, use_client_model: bool) -> _Run:
    """A run of the search on its own thread, its progress and questions for the client queued on `run`."""
    try:
        target = load_target(spec)
    except TargetError as exc:
        raise ToolError(str(exc))
    run = _Run()
    extra = []
    if use_client_model:
        caps = ctx.client_capabilities
        if caps is None or caps.sampling is None:
            raise ToolError("use_client_model needs a client that offers MCP sampling, and this one does not; "
                            "use the built-in proposers or base_url instead")
        extra.append(AskingProposer(run.ask))
    if not options.builtin and options.llm is None and not extra:
        raise ToolError("no proposer: set builtin, base_url or use_client_model")
    budget = options.budget

    def progress(event: Event) -> None:
        if isinstance(event, CandidateDone):
            run.events.put(("progress", (float(event.tried), float(budget), describe(event, reason_chars=120))))

    run.events.put(("progress", (0.0, float(budget), isolation_line(options.backend))))
    run.start(lambda: execute(target, options, progress, run.cancel, extra=extra))
    return run


async def _relay(run: _Run, ctx: Context, runs_in_flight: dict[str, _Run]) -> dict[str, Any] | types.InputRequiredResult:
    """The run's events to the client until it ends: progress notifications; questions for the client's
    model (through the sampling back channel, or, on the newer protocol, as an input-required result
    that the client answers in a later call); then the report, or the run's error."""
    back_channel = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
    while True:
        kind, value = await anyio.to_thread.run_sync(run.events.get, abandon_on_cancel=True)
        if kind == "progress":
            await ctx.report_progress(*value)
        elif kind == "ask" and back_channel:
            replies = [await ctx.session.create_message(r.params.messages, max_tokens=r.params.max_tokens,
                                                        system_prompt=r.params.system_prompt)
                       for r in map(_sampling_request, value)]
            run.answers.put([_reply_text(r) for r in replies])
        elif kind == "ask":
            run.asked = [f"candidate-{i}" for i in range(len(value))]
            return types.InputRequiredResult(
                input_requests={key: _sampling_request(prompt) for key, prompt in zip(run.asked, value, strict=True)},
                request_state=run.token)
        else:
            runs_in_flight.pop(run.token, None)
            if kind == "error":
                raise ToolError(str(value)) if isinstance(value, TargetError) else value
            return cast(dict[str, Any], value.model_dump(mode="json"))


def _run_resources(server: MCPServer, root: Path) -> None:
    """Past runs as resources."""
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


def serve(root: Path) -> None:
    build(root).run("stdio")
