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
from helpers import TESTS, Service, plain, redline
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from redline.profilers import report


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
    # The five largest changes of self share. Two recordings of one command differ by sampling alone, so
    # which functions those are is chance (a start-up frame sampled in one of them); each hot function's
    # change is shown where it is, below.
    shown_changes = [abs(f["self_delta"]) for f in answer["functions"]]
    assert 0 < len(shown_changes) <= 5 and shown_changes == sorted(shown_changes, reverse=True), answer["functions"]
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


async def test_profiling_again_after_a_change_shows_the_programs_change(client: LanguageClient,
                                                                         workspace: Path) -> None:
    """`redline.reprofile` runs the last profiled command again (here `cpu_work.py again`), after a known
    change on disk: Grid.relax's loop replaced by its closed form. The program gets faster, relax's share
    falls, the new recording is loaded in place of the old, and the user is told the program's change."""
    await SEEN.wait("loaded", 1)
    source = workspace / "cpu_work.py"
    loop = "        acc = 0.0\n        for i in range(n):\n            acc += (i % 7) * 0.5\n        return acc\n"
    assert loop in source.read_text()
    source.write_text(source.read_text().replace(
        loop, "        return 0.5 * (n // 7 * 21 + (n % 7) * (n % 7 - 1) // 2)\n"))
    answer = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="redline.reprofile", arguments=[]))
    assert answer["before"].endswith("other.speedscope.json") and Path(answer["trace"]).is_file(), answer
    program = answer["program"]
    assert program["exit_code"] == 0 and program["unit"] == "seconds" and program["speedup"] > 1.5, program
    relax = next(f for f in answer["functions"] if f["function"] == "Grid.relax")
    assert relax["after_self"] < relax["before_self"] / 2, relax
    assert answer["winners"] == []  # no winner was accepted in this session
    said = [m["message"] for m in SEEN.events["message"] if "the program:" in m["message"]]
    assert said and f"({program['speedup']:.2f}x)" in said[-1], said
    loaded = SEEN.events["loaded"][-1]
    assert answer["trace"] in loaded["traces"]
    # What the differential flame graph draws: the two recordings, and nothing else loaded.
    state = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="redline.status",
                                                                                arguments=[]))
    assert state["comparing"] == {"before": [answer["before"]], "after": [answer["trace"]]}, state
    # The editor's file watcher reports the new recording after the command has compared it (in the e2e
    # run it came late): the reload it starts keeps the comparison of the two unchanged recordings.
    n = len(SEEN.events["loaded"])
    client.workspace_did_change_watched_files(lsp.DidChangeWatchedFilesParams(
        [lsp.FileEvent(uri=Path(answer["trace"]).as_uri(), type=lsp.FileChangeType.Created)]))
    await SEEN.wait("loaded", n + 1)
    state = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="redline.status",
                                                                                arguments=[]))
    assert state["comparing"] == {"before": [answer["before"]], "after": [answer["trace"]]}, state


async def test_attach_to_a_running_service_fills_in_while_it_runs_until_stopped(client: LanguageClient,
                                                                                  tmp_path: Path) -> None:
    """`redline.attach` on a real HTTP service under load: the trace is loaded after each window, with more
    samples each time, while the service keeps serving; the progress's Cancel (the editor's Stop) ends it;
    profiling again samples the same service again."""
    svc = Service(tmp_path)
    try:
        svc.wait_served(5)
        answer = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            command="redline.attach", arguments=[{"pid": svc.proc.pid}]))
        trace, token = answer["trace"], f"redline-{answer['runId']}"
        seen = len(SEEN.events.get("loaded", []))
        samples = []
        while len(samples) < 2:  # two loads of the trace as it grows
            seen += 1
            loaded = (await SEEN.wait("loaded", seen))[-1]
            samples += [t["samples"] for t in loaded["loaded"] if t["trace"] == trace]
        assert 0 < samples[0] < samples[1], samples
        svc.wait_served(1)  # it is still serving while sampled
        client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
        for _ in range(100):  # the window in progress finishes (at most 2 s), then the progress ends
            if type(client.progress_reports[token][-1]).__name__ == "WorkDoneProgressEnd":
                break
            await asyncio.sleep(0.1)
        end = client.progress_reports[token][-1]
        assert type(end).__name__ == "WorkDoneProgressEnd" and end.message.startswith("stopped; attach-"), end
        state = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="redline.status",
                                                                                    arguments=[]))
        assert answer["runId"] not in state["running"]
        hot = {h.function for h in report([Path(trace)], tmp_path).hotspots}
        assert {"render_report", "Handler.do_GET"} <= hot, sorted(hot)
        # Profiled again: the same service is sampled again, for as long, and the two recordings compared.
        again = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            command="redline.reprofile", arguments=[]))
        assert again["before"] == trace and Path(again["trace"]).name.startswith(f"attach-{svc.proc.pid}-"), again
        assert again["program"]["exit_code"] == 0 and again["winners"] == []
        assert "render_report" in {h.function for h in report([Path(again["trace"])], tmp_path).hotspots}
    finally:
        svc.close()
