"""The editor on a function without inputs, end to end over stdio (pytest-lsp): the Optimise action is
offered by inclusive share, and choosing it captures the function's real calls (progress), then
optimises against them.

The program (tests/workloads/diff_work.py) spends its time in difflib: its own hot function `closest`
has little self time, so only the inclusive share makes it hot."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from helpers import TESTS, plain, redline
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

THRESHOLD = 0.3


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("diffws")
    shutil.copy(TESTS / "workloads" / "diff_work.py", root / "app.py")
    (root / "redline.toml").write_text("")
    res = redline("profile", "--rate", "200", "--", sys.executable, "app.py", "300", cwd=root)
    assert res.returncode == 0, res.stderr
    return root


# The server behind a strict reader of its stdout (tests/lsp_strict.py): a byte the captured program prints
# into the protocol stream is recorded in STRICT_LOG and ends the stream, as it does in VS Code.
STRICT_LOG = Path(tempfile.mkdtemp(prefix="redline-strict-")) / "violations.log"


class Events:
    def __init__(self) -> None:
        self.seen: dict[str, list[Any]] = {}
        self.changed = asyncio.Event()
        self.choice = "Capture and optimise"

    def record(self, method: str, params: Any) -> None:
        self.seen.setdefault(method, []).append(params)
        self.changed.set()

    async def wait(self, method: str, timeout: float = 240) -> list[Any]:
        return (await self.wait_any(method, timeout=timeout))[1]

    async def wait_any(self, *methods: str, timeout: float = 240) -> tuple[str, Any]:
        async def until() -> tuple[str, Any]:
            while True:
                for m in methods:
                    if self.seen.get(m):
                        return m, self.seen[m] if len(methods) == 1 else self.seen[m][0]
                assert not STRICT_LOG.exists(), f"the server's stream was corrupted: {STRICT_LOG.read_text()}"
                self.changed.clear()
                # Woken by the next event, or each second to see whether the stream was cut (no event comes).
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), 1)
        return await asyncio.wait_for(until(), timeout)


EVENTS = Events()


@pytest_lsp.fixture(config=ClientServerConfig(
    server_command=[sys.executable, str(TESTS / "lsp_strict.py"), sys.executable, "-m", "redline.cli", "serve"],
    server_env={**os.environ, "REDLINE_STRICT_LOG": str(STRICT_LOG)}))
async def client(lsp_client: LanguageClient, workspace: Path) -> Any:
    global EVENTS
    EVENTS = Events()
    ev = EVENTS
    for method in ("redline/profileLoaded", "redline/runFinished", "redline/winner"):
        lsp_client.feature(method)(lambda params, m=method: ev.record(m, params))

    # Requests a VS Code-like client answers (the server asks them after loading a profile).
    for request in (lsp.WORKSPACE_CODE_LENS_REFRESH, lsp.WORKSPACE_INLAY_HINT_REFRESH, lsp.CLIENT_REGISTER_CAPABILITY):
        lsp_client.feature(request)(lambda params, m=request: ev.record(m, params))

    @lsp_client.feature(lsp.WINDOW_SHOW_MESSAGE_REQUEST)
    def message_request(params: lsp.ShowMessageRequestParams) -> lsp.MessageActionItem:
        ev.record("showMessageRequest", params)
        return lsp.MessageActionItem(title=ev.choice)

    await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=workspace.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(workspace.as_uri(), "ws")],
        initialization_options={"budget": 2, "rounds": 1, "threshold": THRESHOLD}))
    loaded = (await ev.wait("redline/profileLoaded"))[0]
    # The workspace's .redline/ holds redline's own last-profile.json beside the trace: not read as one.
    assert plain(loaded)["errors"] == [] and len(plain(loaded)["traces"]) == 1, plain(loaded)
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_optimise_offered_by_inclusive_share_captures_then_optimises(client: LanguageClient,
                                                                           workspace: Path) -> None:
    path = workspace / "app.py"
    uri = path.as_uri()
    text = path.read_text()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    lines = text.splitlines()
    def_of = {name: next(i for i, ln in enumerate(lines) if ln.startswith(f"def {name}(")) for name in ("closest", "main")}
    trace = next((workspace / ".redline").glob("*.speedscope.json"))
    spots = json.loads(redline("hotspots", str(trace), "--root", str(workspace), "--json").stdout)["hotspots"]
    closest = next(h for h in spots if h["function"] == "closest")
    assert closest["self_fraction"] < THRESHOLD < closest["inclusive_fraction"]  # hot only by inclusive share

    async def actions_at(line: int) -> list[str]:
        found = await client.text_document_code_action_async(lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(line + 1, 0), lsp.Position(line + 1, 1)),
            lsp.CodeActionContext(diagnostics=[])))
        return [a.title for a in found or []]

    assert "Optimise hotspot" in await actions_at(def_of["closest"])
    assert "Optimise hotspot" not in await actions_at(def_of["main"])  # its time is closest's

    started = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.optimise", arguments=[{"uri": uri, "function": "closest"}]))
    assert started["started"] is True and started["capturing"] is True
    request = (await EVENTS.wait("showMessageRequest"))[0]
    assert f"{sys.executable} app.py 300" in request.message and "has no inputs" in request.message
    done = await EVENTS.wait_any("redline/runFinished", "redline/winner", timeout=300)
    manifest = json.loads((workspace / ".redline/inputs/app.closest/manifest.json").read_text())
    assert manifest["calls_seen"] == 300 and manifest["calls_kept"] == 64
    capture_tokens = [t for t in client.progress_reports if str(t).startswith("redline-capture-")]
    assert capture_tokens and "kept 64 of 300 calls" in client.progress_reports[capture_tokens[0]][-1].message
    if done[0] == "redline/runFinished":  # no winner: the report says the run used the captured calls
        assert plain(done[1])["report"]["inputs"]["source"] == "captured"
    assert path.read_text() == text
    # The program printed hundreds of lines on stdout and stderr while captured: none reached the
    # protocol stream, and the server still answers.
    assert not STRICT_LOG.exists(), STRICT_LOG.read_text()
    assert "Optimise hotspot" in await actions_at(def_of["closest"])


async def test_declining_the_capture_runs_nothing(client: LanguageClient, workspace: Path,
                                                             tmp_path: Path) -> None:
    lonely = tmp_path / "lonely.py"
    lonely.write_text("def f(x):\n    return x + 1\n")
    (tmp_path / "redline.toml").write_text("")
    EVENTS.choice = "Cancel"  # the user declines the capture: nothing runs, nothing is written
    result = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.optimise", arguments=[{"uri": lonely.as_uri(), "function": "f"}]))
    assert result["capturing"] is True
    await EVENTS.wait("showMessageRequest")
    assert not (tmp_path / ".redline").exists()


async def test_capture_while_a_service_runs_counts_calls_and_stop_keeps_them(client: LanguageClient,
                                                                              workspace: Path) -> None:
    """`redline.captureService`: the server starts a real HTTP service (tests/captured/service.py, which prints)
    with its handler's calls recorded while the test sends it requests; the progress counts the calls kept
    so far; cancelling the progress (the editor's Stop) ends the service as a service manager would, and
    the calls are kept for Optimise."""
    shutil.copy(TESTS / "captured" / "service.py", workspace / "service.py")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
        settings={"redline": {"captureCommand": f"{sys.executable} service.py --port {port}"}}))
    started = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.captureService", arguments=[{"targets": ["service.py::score"]}]))
    assert started["targets"] == ["service.py::score"], started
    token = f"redline-{started['runId']}"

    def post(n: int) -> None:
        body = json.dumps({"text": "fast fast slow", "weights": {"fast": 2.0}}).encode()
        for _request in range(n):
            for _attempt in range(100):  # the service is up once it accepts a connection
                try:
                    with urllib.request.urlopen(urllib.request.Request(
                            f"http://127.0.0.1:{port}/", data=body, method="POST"), timeout=10) as reply:
                        assert "score" in json.loads(reply.read())
                    break
                except OSError:
                    time.sleep(0.1)

    await asyncio.get_running_loop().run_in_executor(None, post, 40)
    kept: list[str] = []
    for _ in range(100):  # the recorder flushes within a second; the progress reads it each second
        kept = [r.message for r in client.progress_reports.get(token, []) if "calls kept of 40 seen" in (r.message or "")]
        if kept:
            break
        await asyncio.sleep(0.1)
    assert kept and kept[-1].startswith("40 calls kept of 40 seen so far"), client.progress_reports.get(token)
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    for _ in range(200):
        if type(client.progress_reports[token][-1]).__name__ == "WorkDoneProgressEnd":
            break
        await asyncio.sleep(0.1)
    end = client.progress_reports[token][-1]
    assert type(end).__name__ == "WorkDoneProgressEnd" and end.message == "service.py::score: kept 40 of 40 calls", end
    manifest = json.loads((workspace / ".redline/inputs/service.score/manifest.json").read_text())
    assert manifest["calls_kept"] == 40 and manifest["exit_code"] == 143  # ended by the SIGTERM, as a service is
    assert not STRICT_LOG.exists(), STRICT_LOG.read_text()
