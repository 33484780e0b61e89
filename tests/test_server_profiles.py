"""Profiles in the editor, over stdio (pytest-lsp): a new `redline profile` of the same command
replaces the older one unless the user asks to merge, and loading a trace by name says what it loaded."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from helpers import TESTS, plain, redline
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("profiles")
    shutil.copy(TESTS / "workloads" / "cpu_work.py", root / "cpu_work.py")
    (root / "redline.toml").write_text("")
    for name in ("first", "second"):  # the same command, profiled twice
        run = redline("profile", "-o", f".redline/{name}.speedscope.json", "--", sys.executable, "cpu_work.py",
                      cwd=root)
        assert run.returncode == 0, run.stderr
    other = redline("profile", "-o", "elsewhere/other.speedscope.json", "--", sys.executable, "cpu_work.py", "again",
                    cwd=root)
    assert other.returncode == 0, other.stderr
    return root


class Seen:
    def __init__(self) -> None:
        self.events: dict[str, list[Any]] = {}
        self.changed = asyncio.Event()

    def record(self, method: str, params: Any) -> None:
        self.events.setdefault(method, []).append(plain(params))
        self.changed.set()

    async def wait(self, method: str, n: int) -> list[Any]:
        async def until() -> list[Any]:
            while len(self.events.get(method, [])) < n:
                self.changed.clear()
                await self.changed.wait()
            return self.events[method]
        return await asyncio.wait_for(until(), 120)


SEEN = Seen()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "redline.cli", "serve"]))
async def client(lsp_client: LanguageClient, workspace: Path) -> Any:
    global SEEN
    SEEN = Seen()
    seen = SEEN
    lsp_client.feature("redline/profileLoaded")(lambda params: seen.record("loaded", params))
    lsp_client.protocol.fm.features.pop(lsp.WINDOW_SHOW_MESSAGE, None)  # pytest-lsp's own only logs it
    lsp_client.feature(lsp.WINDOW_SHOW_MESSAGE)(lambda params: seen.record("message", {"message": params.message}))
    for refresh in (lsp.WORKSPACE_CODE_LENS_REFRESH, lsp.WORKSPACE_INLAY_HINT_REFRESH, lsp.CLIENT_REGISTER_CAPABILITY):
        lsp_client.feature(refresh)(lambda params: None)
    await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=workspace.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(workspace.as_uri(), "ws")]))
    yield lsp_client
    await lsp_client.shutdown_session()


async def test_the_newest_recording_replaces_the_older_unless_merged(client: LanguageClient, workspace: Path) -> None:
    first, second = (str(workspace / ".redline" / f"{n}.speedscope.json") for n in ("first", "second"))
    loaded = (await SEEN.wait("loaded", 1))[0]
    assert loaded["traces"] == [second] and loaded["superseded"] == [first]
    (entry,) = loaded["loaded"]
    assert entry["trace"] == second and entry["samples"] > 10
    assert entry["command"] == [sys.executable, "cpu_work.py"] and entry["recordedAt"].startswith("20")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
        settings={"redline": {"mergeProfiles": True}}))
    merged = (await SEEN.wait("loaded", 2))[1]
    assert sorted(merged["traces"]) == [first, second] and merged["superseded"] == []
    assert merged["samples"] == sum(t["samples"] for t in merged["loaded"])


async def test_loading_a_trace_by_name_says_what_it_loaded(client: LanguageClient, workspace: Path) -> None:
    await SEEN.wait("loaded", 1)
    other = workspace / "elsewhere" / "other.speedscope.json"
    answer = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.loadProfile", arguments=[str(other)]))
    assert answer == {"loading": str(other)}
    loaded = (await SEEN.wait("loaded", 2))[1]
    assert str(other) in loaded["traces"]
    message = next(m for m in await SEEN.wait("message", 1) if "other.speedscope.json" in m["message"])
    text = message["message"]
    assert text.startswith("redline: loaded other.speedscope.json: ") and " samples, recorded 20" in text
    assert "cpu_work.py" in text and "1 other trace(s) loaded with it" in text


async def test_compare_with_the_recording_it_replaced(client: LanguageClient, workspace: Path) -> None:
    """The two recordings of one command: the newer is loaded, and compared with the one it replaced,
    each hot function's hint, lens and hover show the change; comparing stops on request."""
    await SEEN.wait("loaded", 1)
    uri = (workspace / "cpu_work.py").as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=(workspace / "cpu_work.py").read_text())))
    answer = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.compareProfiles", arguments=[]))
    assert answer["comparing"] is True and answer["before"].endswith("first.speedscope.json"), answer
    assert {f["function"] for f in answer["functions"]} >= {"Grid.relax", "checksum"}
    everywhere = lsp.Range(lsp.Position(0, 0), lsp.Position(1000, 0))
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(lsp.TextDocumentIdentifier(uri), everywhere))
    labels = [str(h.label) for h in hints or []]
    assert labels and all(" vs before" in label and "pt" in label for label in labels), labels
    line = next(i for i, text in enumerate((workspace / "cpu_work.py").read_text().splitlines())
                if text.startswith("def checksum"))
    shown = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                   lsp.Position(line + 2, 4)))
    assert shown is not None and "Against the earlier profile: self " in shown.contents.value  # type: ignore[union-attr]
    stopped = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.compareProfiles", arguments=[""]))
    assert stopped == {"comparing": False}
    hints = await client.text_document_inlay_hint_async(lsp.InlayHintParams(lsp.TextDocumentIdentifier(uri), everywhere))
    assert not any(" vs before" in str(h.label) for h in hints or [])
