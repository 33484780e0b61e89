"""The language server end to end: the real `redline serve` over stdio, driven by pytest-lsp's client.

The workspace is the bundled demo with a real py-spy recording of it. The client answers the
server's requests the way an editor does (showMessageRequest, applyEdit, progress)."""

from __future__ import annotations

import ast
import asyncio
import shutil
import sys
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from helpers import REPO, plain, redline
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from redline.profilers import report

DEMO = REPO / "examples" / "demo" / "app.py"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ws")
    shutil.copy(DEMO, root / "app.py")
    (root / "redline.toml").write_text("")
    (root / "pyproject.toml").write_text('[project]\nname = "demo"\ndependencies = [\n    "numpy>=1.26",\n]\n')
    run = redline("profile", "--rate", "200", "-o", ".redline/app.speedscope.json", "--", sys.executable, "app.py",
                  cwd=root)  # as a user does: the command is kept, for capture and for profiling again
    assert run.returncode == 0, run.stderr
    return root


class Editor:
    """What the test client records of the server's requests and notifications."""

    def __init__(self) -> None:
        self.choice = "Apply"
        self.edits: list[lsp.ApplyWorkspaceEditParams] = []
        self.events: dict[str, list[Any]] = {}
        self.changed = asyncio.Event()

    def record(self, method: str, params: Any) -> None:
        self.events.setdefault(method, []).append(params)
        self.changed.set()

    async def wait(self, method: str, n: int = 1, timeout: float = 120) -> list[Any]:
        async def until() -> list[Any]:
            while len(self.events.get(method, [])) < n:
                self.changed.clear()
                await self.changed.wait()
            return self.events[method]
        return await asyncio.wait_for(until(), timeout)


EDITOR = Editor()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "redline.cli", "serve"]))
async def client(lsp_client: LanguageClient, workspace: Path) -> Any:
    global EDITOR
    EDITOR = Editor()
    ed = EDITOR

    for method in ("redline/profileLoaded", "redline/winner", "redline/lineHeat", "redline/runFinished",
                   "redline/openSetting"):
        lsp_client.feature(method)(lambda params, m=method: ed.record(m, plain(params)))

    @lsp_client.feature(lsp.WINDOW_SHOW_MESSAGE_REQUEST)
    def message_request(params: lsp.ShowMessageRequestParams) -> lsp.MessageActionItem:
        ed.record("showMessageRequest", params)
        return lsp.MessageActionItem(title=ed.choice)

    @lsp_client.feature(lsp.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
        ed.edits.append(params)
        ed.record("applyEdit", params)
        return lsp.ApplyWorkspaceEditResult(applied=True)

    for refresh in (lsp.WORKSPACE_CODE_LENS_REFRESH, lsp.WORKSPACE_INLAY_HINT_REFRESH):
        lsp_client.feature(refresh)(lambda params, m=refresh: ed.record(m, params))

    lsp_client.protocol.fm.features.pop(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, None)

    @lsp_client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def diagnostics(params: lsp.PublishDiagnosticsParams) -> None:
        lsp_client.diagnostics[params.uri] = params.diagnostics
        ed.record("diagnostics", params)

    caps = client_capabilities("visual-studio-code")
    await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=caps, root_uri=workspace.as_uri(), workspace_folders=[lsp.WorkspaceFolder(workspace.as_uri(), "ws")],
        initialization_options={"budget": 2, "rounds": 1}))
    await ed.wait("redline/profileLoaded")
    yield lsp_client
    await lsp_client.shutdown_session()


def open_doc(client: LanguageClient, path: Path, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=version, text=path.read_text())))
    return uri


def def_line(path: Path, name: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines()) if line.startswith(f"def {name}("))


async def test_profile_loads_and_diagnostics_mark_the_hot_function(client: LanguageClient, workspace: Path) -> None:
    loaded = EDITOR.events["redline/profileLoaded"][0]
    assert loaded["samples"] > 50 and loaded["errors"] == []
    uri = open_doc(client, workspace / "app.py")
    await EDITOR.wait("diagnostics")
    diags = client.diagnostics[uri]
    hot = [d for d in diags if "rolling_zscore" in d.message]
    assert len(hot) == 1 and hot[0].source == "redline" and hot[0].severity == lsp.DiagnosticSeverity.Information
    assert hot[0].range.start.line == def_line(workspace / "app.py", "rolling_zscore")
    heat = (await EDITOR.wait("redline/lineHeat"))[-1]
    assert heat["uri"] == uri and max(ln["heat"] for ln in heat["lines"]) == 1.0


async def test_optimise_is_a_quick_fix_of_the_hot_function_diagnostic(client: LanguageClient, workspace: Path) -> None:
    uri = open_doc(client, workspace / "app.py")
    await EDITOR.wait("diagnostics")
    (hot,) = [d for d in client.diagnostics[uri] if "rolling_zscore" in d.message]
    params = lsp.CodeActionParams(lsp.TextDocumentIdentifier(uri), hot.range,
                                  lsp.CodeActionContext(diagnostics=[hot], only=[lsp.CodeActionKind.QuickFix]))
    # Read as the JSON the server sent: pygls's client would structure a CodeAction that carries a
    # Command as a Command, losing its kind and diagnostics.
    protocol = client.protocol
    typed = protocol.get_result_type
    protocol.get_result_type = lambda method: None  # type: ignore[method-assign]
    try:
        raw = await protocol.send_request_async(lsp.TEXT_DOCUMENT_CODE_ACTION, params)
    finally:
        protocol.get_result_type = typed  # type: ignore[method-assign]
    (action,) = [plain(a) for a in raw]
    assert action["title"] == "Optimise hotspot" and action["kind"] == "quickfix" and action["isPreferred"] is True
    assert action["diagnostics"][0]["data"] == {"function": "rolling_zscore"}
    assert action["command"]["arguments"] == [{"uri": uri, "function": "rolling_zscore"}]


async def test_lenses_hints_hover_and_edits_that_move_them(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "app.py"
    uri = open_doc(client, path)
    line = def_line(path, "rolling_zscore")
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    # Lenses go on every function of the file whose inclusive share reaches the threshold (5%).
    hot = {def_line(path, h.function) for h in report([workspace / ".redline" / "app.speedscope.json"],
                                                      workspace).hotspots
           if h.file == "app.py" and h.inclusive_fraction >= 0.05 and h.function != "<module>"}
    assert line in hot and {ln.range.start.line for ln in lenses} == hot
    optimise = [ln for ln in lenses if ln.command and ln.command.command == "redline.optimise"
                and ln.range.start.line == line]
    assert plain(optimise[0].command.arguments) == [{"uri": uri, "function": "rolling_zscore"}]
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(0, 0), lsp.Position(200, 0))))
    assert hints and hints[0].position.line == line and "self" in str(hints[0].label)
    hover = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                   lsp.Position(line + 6, 4)))
    assert hover is not None
    text = hover.contents.value  # type: ignore[union-attr]
    assert "rolling_zscore" in text and "Hottest lines" in text and "↑" in text  # a caller above it
    # The hottest lines, the caller and the callees are links to their places.
    assert f"]({uri}#L" in text.split("Hottest lines")[1]
    go_to = next(ln for ln in text.splitlines() if ln.startswith("Go to: "))
    assert go_to.startswith("Go to: ↑ [") and f"{(workspace / 'app.py').as_uri()}#L" in go_to, go_to
    # Insert three lines above the function: the lens follows the function, not the old line.
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
        [lsp.TextDocumentContentChangePartial(range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)),
                                              text="# one\n# two\n# three\n")]))
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert {ln.range.start.line for ln in lenses} == {h + 3 for h in hot}


async def test_code_action_optimise_progress_and_versioned_apply(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "app.py"
    uri = open_doc(client, path)
    line = def_line(path, "rolling_zscore")
    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(line + 3, 0), lsp.Position(line + 3, 5)),
        lsp.CodeActionContext(diagnostics=[])))
    action = next(a for a in actions or [] if a.title == "Optimise hotspot")
    if isinstance(action, lsp.Command):
        # pygls's client converter reads a CodeAction carrying a Command as a Command whose
        # `command` is the CodeAction's command object, stringified; recover it.
        inner = ast.literal_eval(action.command)
        command = lsp.Command(title=inner["title"], command=inner["command"], arguments=inner["arguments"])
    else:
        assert isinstance(action.command, lsp.Command)
        command = action.command
    EDITOR.choice = "Apply"
    started = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command=command.command, arguments=command.arguments))
    assert started["started"] is True
    await EDITOR.wait("applyEdit", timeout=240)
    winner = EDITOR.events["redline/winner"][0]
    assert winner["speedup"] > 5 and winner["ci95"][0] > 1 and "numba" in winner["diff"]
    request = EDITOR.events["showMessageRequest"][0]
    assert [a.title for a in request.actions] == ["Review", "Apply", "Discard"]
    # What was verified and what the edit adds, in the notification the user decides on.
    assert winner["verified"].startswith("checked on fresh inputs") and "edge variant" in winner["verified"]
    assert "needs numba (added to pyproject.toml)" in winner["verified"] and winner["verified"] in request.message
    edit = EDITOR.edits[0].edit.document_changes[0]
    assert edit.text_document.uri == uri and edit.text_document.version == 1
    assert "numba.njit" in edit.edits[0].new_text
    # The package the winner imports goes into the project's dependencies in the same edit.
    deps = EDITOR.edits[0].edit.document_changes[1]
    assert deps.text_document.uri == (workspace / "pyproject.toml").as_uri() and '"numba",' in deps.edits[0].new_text
    assert "+++ b/pyproject.toml" in winner["diff"]
    token = f"redline-optimise-{started['runId']}"
    kinds = [type(v).__name__ for v in client.progress_reports[token]]
    assert kinds[0] == "WorkDoneProgressBegin" and "WorkDoneProgressReport" in kinds and kinds[-1] == "WorkDoneProgressEnd"
    assert path.read_text() == DEMO.read_text(), "the server never writes the file itself"

    # Accepted: the function's hints and lens say the profile no longer measures it, until it is profiled again.
    everywhere = lsp.Range(lsp.Position(0, 0), lsp.Position(10_000, 0))
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(lsp.TextDocumentIdentifier(uri), everywhere))
    (hint,) = [h for h in hints or [] if h.position.line == line]
    assert str(hint.label).endswith(" · changed since this profile"), hint.label
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert any(ln.command and ln.command.title.endswith("changed since this profile") for ln in lenses or [])
    # Profiled again: the program's change, next to what the winner was verified at and what its function's
    # share predicted (the test client does not save the edit, so the program itself is unchanged here).
    spot = next(h for h in report([workspace / ".redline" / "app.speedscope.json"], workspace).hotspots
                if h.function == "rolling_zscore")
    again = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.reprofile", arguments=[]))
    assert again["before"].endswith("app.speedscope.json") and again["program"]["exit_code"] == 0
    (accepted,) = again["winners"]
    assert accepted["function"] == "rolling_zscore" and accepted["verified"] == winner["speedup"]
    assert abs(accepted["share"] - spot.total_fraction) < 1e-9
    share, s = accepted["share"], accepted["verified"]
    assert abs(accepted["predicted"] - 1 / ((1 - share) + share / s)) < 1e-9
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(lsp.TextDocumentIdentifier(uri), everywhere))
    assert not any("changed since" in str(h.label) for h in hints or [])
    Path(again["trace"]).unlink()  # the workspace's one trace is app.speedscope.json again, for the tests after


async def test_a_library_idiom_is_offered_with_no_llm_configured(client: LanguageClient, workspace: Path) -> None:
    """No LLM endpoint is set (the workspace's redline.toml is empty): the built-in proposers alone offer
    hand-written causal attention rewritten to the fused library call, verified, as the CLI does."""
    pytest.importorskip("torch")
    from test_idioms import ATTENTION

    path = workspace / "attn.py"
    path.write_text(ATTENTION.format(tri="tril"))
    uri = open_doc(client, path)
    EDITOR.choice = "Discard"
    started = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.optimise", arguments=[{"uri": uri, "function": "attention"}]))
    assert started["started"] is True
    winner = (await EDITOR.wait("redline/winner", timeout=600))[0]
    assert winner["runId"] == started["runId"] and winner["ci95"][0] > 1
    assert "scaled_dot_product_attention(q, k, v, is_causal=True)" in winner["diff"]
    assert "-    scores = scores.masked_fill(mask == 0, float(\"-inf\"))" in winner["diff"]


async def test_a_run_without_a_winner_says_what_was_tried_and_opens_the_next_step(client: LanguageClient,
                                                                                  workspace: Path) -> None:
    """Nothing the built-ins propose for this function is right and faster: the message says what was tried
    and what did not apply, and offers the next steps; choosing candidate files opens that setting, and
    with the setting set, the next run evaluates the folder's candidate."""
    path = workspace / "ties.py"
    shutil.copy(REPO / "tests" / "workloads" / "plain_ties.py", path)
    uri = open_doc(client, path)
    EDITOR.choice = "Use candidate files"
    started = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.optimise", arguments=[{"uri": uri, "function": "Timeline.latest"}]))
    finished = (await EDITOR.wait("redline/runFinished", timeout=240))[-1]
    assert finished["runId"] == started["runId"] and finished["winner"] is None
    assert (await EDITOR.wait("redline/openSetting"))[0] == {"setting": "redline.candidatesDir"}
    request = next(r for r in EDITOR.events["showMessageRequest"] if "Timeline.latest" in r.message)
    assert "no candidate was verified faster (" in request.message and "incorrect" in request.message
    assert "Not applicable here: numba (numba compiles functions, not methods)" in request.message
    assert "cython (a decorated function" in request.message
    assert [a.title for a in request.actions] == ["Set an LLM endpoint", "Use candidate files"]

    # The last of the events with the highest priority, in one pass: what sorted(...)[-1] returns, faster.
    (workspace / "cands").mkdir()
    (workspace / "cands" / "scan.py").write_text(
        "@staticmethod\ndef latest(events):\n    best = events[0]\n    for e in events:\n"
        "        if e[0] >= best[0]:\n            best = e\n    return best\n")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
        settings={"redline": {"candidatesDir": "cands"}}))
    EDITOR.choice = "Discard"
    again = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.optimise", arguments=[{"uri": uri, "function": "Timeline.latest"}]))
    winner = next(w for w in await EDITOR.wait("redline/winner", timeout=240) if w["runId"] == again["runId"])
    assert winner["ci95"][0] > 1 and "best = events[0]" in winner["diff"]


async def test_apply_is_refused_when_the_document_changed(client: LanguageClient, workspace: Path) -> None:
    path = workspace / "app.py"
    uri = open_doc(client, path)
    EDITOR.choice = "Review"
    started = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.optimise", arguments=[{"uri": uri, "function": "rolling_zscore"}]))
    await EDITOR.wait("redline/winner", timeout=240)
    await EDITOR.wait("showMessageRequest")
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
        [lsp.TextDocumentContentChangePartial(range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), text="# x\n")]))
    result = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.applyWinner", arguments=[{"runId": started["runId"]}]))
    assert result["applied"] is False and "changed" in result["reason"]
    assert not EDITOR.edits


async def test_cancel_stops_the_run(client: LanguageClient, workspace: Path) -> None:
    uri = open_doc(client, workspace / "app.py")
    started = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.optimise", arguments=[{"uri": uri, "function": "rolling_zscore"}]))
    token = f"redline-optimise-{started['runId']}"
    # What the extension's "Cancel optimise" reads first: the runs in progress.
    state = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="redline.status", arguments=[]))
    assert started["runId"] in state["running"]
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    finished = await EDITOR.wait("redline/runFinished", timeout=60)
    assert finished[0]["runId"] == started["runId"] and finished[0]["winner"] is None
    assert "cancelled" in finished[0]["report"]["notes"]
    messages = [getattr(v, "message", None) for v in client.progress_reports[token]]
    assert "cancelling…" in messages  # shown from the cancel until the run ends
    assert messages.index("cancelling…") < len(messages) - 1 and type(client.progress_reports[token][-1]).__name__ \
        == "WorkDoneProgressEnd"


async def test_bad_requests_get_answers_and_the_server_stays_up(client: LanguageClient, workspace: Path) -> None:
    missing = (workspace / "nope.py").as_uri()
    assert await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(missing),
                                                                   lsp.Position(0, 0))) is None
    # Malformed params, written to the wire as raw JSON (the typed client cannot send them).
    future: Future[Any] = Future()
    client.protocol._request_futures["bad-1"] = future
    client.protocol._send_data({"jsonrpc": "2.0", "id": "bad-1", "method": "textDocument/hover",
                                "params": {"textDocument": 5, "position": "x"}})
    with pytest.raises(Exception, match="invalid params"):
        await asyncio.wait_for(asyncio.wrap_future(future), 10)
    bad = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.optimise", arguments=[{"uri": 3}]))
    assert "bad argument" in bad["error"]
    bad = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.loadProfile", arguments=[str(workspace / "missing.json")]))
    assert "no such trace" in bad["error"]
    # A profile deleted while loaded: the reload drops its hotspots, and the server answers on.
    uri = open_doc(client, workspace / "app.py")
    trace = workspace / ".redline" / "app.speedscope.json"
    moved = trace.with_suffix(".bak")
    trace.rename(moved)
    try:
        n = len(EDITOR.events["redline/profileLoaded"])
        client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
            [lsp.FileEvent(uri=trace.as_uri(), type=lsp.FileChangeType.Deleted)]))
        loaded = await EDITOR.wait("redline/profileLoaded", n + 1)
        assert list(loaded[-1]["traces"]) == []
        lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
        assert not lenses
    finally:
        moved.rename(trace)
