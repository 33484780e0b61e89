"""`redline mcp` driven by the MCP SDK's own client over stdio."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import REPO, py_spy_record, sandboxed_workers

mcp = pytest.importorskip("mcp")
from mcp import Client, types  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    shutil.copy(REPO / "examples" / "demo" / "app.py", tmp_path / "app.py")
    (tmp_path / "redline.toml").write_text("")
    return tmp_path


def params(root: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "redline.cli", "mcp", "--root", str(root)])


def data(result: Any) -> Any:
    if result.structured_content is not None:
        sc = result.structured_content
        return sc.get("result", sc) if isinstance(sc, dict) and set(sc) == {"result"} else sc
    return json.loads(result.content[0].text)


async def test_tools_hotspots_optimise_and_safe_apply(workspace: Path) -> None:
    trace = py_spy_record(workspace / "app.py", workspace / ".redline" / "app.speedscope.json", "speedscope")
    async with Client(params(workspace)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"hotspots", "profile", "optimise", "apply_winner"} <= tools
        spots = data(await client.call_tool("hotspots", {"traces": [str(trace)]}))
        assert spots["hotspots"][0]["function"] == "rolling_zscore" and spots["hotspots"][0]["file"] == "app.py"

        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(p: float, total: float | None, message: str | None) -> None:
            progress.append((p, total, message))

        result = await client.call_tool("optimise", {"file": "app.py", "function": "rolling_zscore", "budget": 2},
                                        progress_callback=on_progress)
        assert not result.is_error, result.content
        report = data(result)
        assert report["winner"]["speedup"] > 5 and "numba" in report["winner"]["diff"]
        assert progress[0][2].startswith("sandbox: ") and "tried" in (progress[1][2] or "")  # sandbox first, then candidates
        assert (workspace / "app.py").read_text() == (REPO / "examples" / "demo" / "app.py").read_text()

        runs = await client.read_resource("redline://runs")
        assert report["run_id"] in runs.contents[0].text  # type: ignore[union-attr]

        # A changed file refuses the winner; the unchanged one takes it.
        original = (workspace / "app.py").read_text()
        (workspace / "app.py").write_text(original + "\n# edited\n")
        refused = await client.call_tool("apply_winner", {"run_id": report["run_id"]})
        assert refused.is_error and "changed since the run began" in refused.content[0].text  # type: ignore[union-attr]
        (workspace / "app.py").write_text(original)
        applied = data(await client.call_tool("apply_winner", {"run_id": report["run_id"]}))
        assert applied["applied"] is True and "numba.njit" in (workspace / "app.py").read_text()


async def test_errors_are_tool_errors_with_clear_words(workspace: Path) -> None:
    async with Client(params(workspace)) as client:
        bad = await client.call_tool("hotspots", {"traces": ["missing.json"]})
        assert bad.is_error and "not found" in bad.content[0].text  # type: ignore[union-attr]
        bad = await client.call_tool("optimise", {"file": "app.py", "function": "nope"})
        assert bad.is_error and "no function 'nope'" in bad.content[0].text  # type: ignore[union-attr]


async def test_cancel_kills_the_run_and_the_server_answers_on(workspace: Path) -> None:
    (workspace / "slow.py").write_text(
        "import time\n\ndef wait(x):\n    for _ in range(3):\n        time.sleep(x)\n    return x\n\n"
        "def make_inputs(seed):\n    return (0.2,)\n")
    async with Client(params(workspace)) as client:
        finished = False

        async def run() -> None:
            nonlocal finished
            await client.call_tool("optimise", {"file": "slow.py", "function": "wait", "budget": 4, "builtin": True})
            finished = True

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            # Cancel once the run's sandboxed workers exist (below this test process: other runs on the
            # machine do not count), not after a guessed delay: the run times many calls of 0.6 s each,
            # so it is still going when this poll sees them.
            with anyio.fail_after(120):
                while not (seen := sandboxed_workers(under=os.getpid())):
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        assert not finished
        # The server kills the sandboxed workers once it sees the cancellation: those seen gone by PID (a
        # worker that outlived its parent would no longer be below this process), and none left below it.
        with anyio.fail_after(15):
            while seen & sandboxed_workers() or sandboxed_workers(under=os.getpid()):
                await anyio.sleep(0.1)
        assert (await client.list_tools()).tools


VECTORISED = '''Vectorised over sliding windows:
```python
def rolling_zscore(xs, window):
    n = xs.shape[0]
    out = np.zeros(n)
    if n <= window:
        return out
    w = np.lib.stride_tricks.sliding_window_view(xs[:-1], window)
    mean = w.sum(axis=1) / window
    var = (w * w).sum(axis=1) / window - mean * mean
    safe = np.where(var > 0, var, 1.0)
    out[window:] = np.where(var > 0, (xs[window:] - mean) / np.sqrt(safe), 0.0)
    return out
```
'''


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_agents_own_model_proposes_through_sampling(workspace: Path, mode: str) -> None:
    """auto negotiates 2026-07-28 (sampling rides InputRequiredResult rounds); legacy has a back-channel."""
    prompts: list[str] = []

    async def sample(context: Any, p: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        prompts.append(p.messages[0].content.text)  # type: ignore[union-attr]
        text = VECTORISED if len(prompts) % 2 else "I would rather not write code today."
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=text),
                                         model="agent-model")

    progress: list[str | None] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async with Client(params(workspace), sampling_callback=sample, mode=mode) as client:  # type: ignore[arg-type]
        result = await client.call_tool(
            "optimise", {"file": "app.py", "function": "rolling_zscore", "budget": 3, "rounds": 1, "builtin": False,
                         "use_client_model": True}, progress_callback=on_progress)
    assert not result.is_error, result.content
    report = data(result)
    assert len(prompts) == 2 and "rolling_zscore" in prompts[0] and "float64" in prompts[0]
    by_status = sorted(c["status"] for c in report["candidates"])
    assert by_status == ["build_error", "ok"], by_status  # the reply without code is a failed candidate
    winner = next(c for c in report["candidates"] if c["id"] == report["winner"]["id"])
    assert winner["origin"] == "client-model" and report["winner"]["speedup"] > 2
    assert "sliding_window_view" in report["winner"]["diff"] and progress
    assert (workspace / "app.py").read_text() == (REPO / "examples" / "demo" / "app.py").read_text()


async def test_client_model_without_sampling_is_a_clear_tool_error(workspace: Path) -> None:
    async with Client(params(workspace)) as client:
        bad = await client.call_tool("optimise", {"file": "app.py", "function": "rolling_zscore",
                                                  "use_client_model": True, "builtin": False})
    assert bad.is_error and "offers MCP sampling" in bad.content[0].text  # type: ignore[union-attr]


async def test_a_forged_request_state_is_refused_and_the_server_answers_on(workspace: Path) -> None:
    """The SDK seals the run token it hands out; a round that echoes anything else is an error."""
    from mcp.shared.exceptions import MCPError

    async with Client(params(workspace)) as client:
        await client.list_tools()
        with pytest.raises(MCPError, match="requestState"):
            await client.session.call_tool("optimise", {"file": "app.py", "function": "rolling_zscore"},
                                           request_state="forged", allow_input_required=True)
        assert {t.name for t in (await client.list_tools()).tools} >= {"optimise"}


async def test_capture_tool_then_optimise_on_the_captured_calls(tmp_path: Path) -> None:
    shutil.copy(REPO / "tests" / "captured" / "app.py", tmp_path / "app.py")
    (tmp_path / "redline.toml").write_text("")
    async with Client(params(tmp_path)) as client:
        result = await client.call_tool("optimise", {"file": "app.py", "function": "scale", "budget": 1})
        assert result.is_error and "redline capture --target" in result.content[0].text
        captured = data(await client.call_tool("capture", {"command": [sys.executable, "app.py"],
                                                           "targets": ["app.py::scale"]}))
        assert captured["exit_code"] == 0
        (entry,) = captured["targets"]
        assert entry["target"] == "app.py::scale" and entry["calls_seen"] == 30 and entry["calls_kept"] == 20
        assert any("argument lock" in why for why in entry["not_kept"])
        report = data(await client.call_tool("optimise", {"file": "app.py", "function": "scale", "budget": 1}))
        assert report["inputs"]["source"] == "captured" and report["inputs"]["calls"] == 20
        bad = await client.call_tool("capture", {"targets": ["app.py::nope"], "command": [sys.executable, "app.py"]})
        assert bad.is_error and "no function 'nope'" in bad.content[0].text
