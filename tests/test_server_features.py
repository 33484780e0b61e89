"""The server's features as functions over redline's models (no LSP transport)."""

from __future__ import annotations

import pytest
from helpers import GPU, TESTS, WORKLOAD, py_spy_record
from lsprotocol import types as lsp
from redline.profilers import report
from redline.server.features.diagnostics import diagnostics
from redline.server.features.heat import line_heat
from redline.server.features.hover import hover
from redline.server.features.inlay_hints import inlay_hints
from redline.server.features.lenses import code_lenses
from redline.server.placement import place
from redline.server.settings import ServerSettings

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_gpu_hover_lists_kernels_with_nsight_metrics() -> None:
    spots = report([GPU / "torch_trace_kernels.json", GPU / "ncu_kernels_details.csv"], WORKLOAD).hotspots
    text = (WORKLOAD / "model" / "kernels.py").read_text()
    mine = [h for h in spots if h.file == "model/kernels.py"]
    assert all(h.module_fraction == h.inclusive_fraction for h in spots if h.kind == "gpu")  # kernels: not compiled
    placed = place(text, mine)
    line = next(i for i, s in enumerate(text.splitlines()) if s.startswith("def gelu_bias_triton"))
    shown = hover(text, placed, lsp.Position(line + 2, 4))
    assert shown is not None
    md = shown.contents.value  # type: ignore[union-attr]
    assert "gelu_bias_triton" in md and "GPU" in md and "`gelu_bias_kernel` ×2" in md
    assert "Memory Throughput" in md  # from the Nsight Compute page merged in


def test_placement_follows_the_function_through_edits(tmp_path) -> None:
    trace = py_spy_record(TESTS / "workloads" / "cpu_work.py", tmp_path / "t.json", "speedscope")
    spots = [h for h in report([trace], TESTS).hotspots if h.file == "workloads/cpu_work.py"]
    text = (TESTS / "workloads" / "cpu_work.py").read_text()
    settings = ServerSettings(threshold=0.1)
    before = {d.message.split(":")[0]: d.range.start.line for d in diagnostics(text, place(text, spots), settings)}
    edited = "import os\n\n\n" + text.replace("class Grid:", "class Grid:\n    '''A grid.'''\n")
    after = {d.message.split(":")[0]: d.range.start.line for d in diagnostics(edited, place(edited, spots), settings)}
    assert after["hot function Grid.relax"] == before["hot function Grid.relax"] + 5
    assert after["hot function checksum"] == before["hot function checksum"] + 5
    removed = edited.replace("def checksum(", "def renamed(")
    names = [d.message for d in diagnostics(removed, place(removed, spots), settings)]
    assert not any("checksum" in n for n in names), "a function that is gone shows nothing"


def test_threshold_and_toggles(tmp_path) -> None:
    trace = py_spy_record(TESTS / "workloads" / "cpu_work.py", tmp_path / "t.json", "speedscope")
    spots = [h for h in report([trace], TESTS).hotspots if h.file == "workloads/cpu_work.py"]
    text = (TESTS / "workloads" / "cpu_work.py").read_text()
    placed = place(text, spots)
    everything = lsp.Range(lsp.Position(0, 0), lsp.Position(999, 0))
    assert diagnostics(text, placed, ServerSettings(threshold=0.99)) == []
    assert inlay_hints(text, placed, ServerSettings(inlayHints=False), everything) == []
    assert code_lenses(text, "file:///x.py", placed, ServerSettings(codeLenses=False)) == []
    hint = inlay_hints(text, placed, ServerSettings(), everything)[0]
    assert str(hint.label).startswith("self ") and "· total " in str(hint.label)
    heat = line_heat(placed)
    assert heat and all(0 < h["heat"] <= 1 for h in heat)


def test_settings_merge_reports_bad_values() -> None:
    s, problem = ServerSettings.merged(ServerSettings(), {"redline": {"threshold": 2, "budget": 3}})
    assert problem and "threshold" in problem and s == ServerSettings()
    s, problem = ServerSettings.merged(ServerSettings(), {"budget": 3, "unknownThing": 1})
    assert problem is None and s.budget == 3


def test_an_entry_point_whose_callees_compiled_with_it_reach_the_threshold_is_offered(tmp_path) -> None:
    """A parser whose own time and libraries are below the threshold, but whose time with the functions of
    its module it calls is above it: no diagnostic (changed alone it reaches little), but the Optimise
    action, and its hover says what compiling it with them reaches. Its helpers, each below the
    threshold, get neither."""
    from redline.server.features.actions import code_actions

    spread = TESTS / "workloads" / "spread"
    trace = py_spy_record(spread / "prog.py", tmp_path / "t.json", "speedscope")
    spots = [h for h in report([trace], spread).hotspots if h.file == "parser_mod.py"]
    text = (spread / "parser_mod.py").read_text()
    placed = place(text, spots)
    settings = ServerSettings(threshold=0.3)
    parse = next(p for p in placed if p.fn.qualname == "parse")
    assert parse.hottest < 0.3 <= parse.reach, (parse.hottest, parse.reach)
    assert all(p.reach < 0.3 for p in placed if p is not parse)
    assert diagnostics(text, placed, settings) == []
    everything = lsp.Range(lsp.Position(0, 0), lsp.Position(999, 0))
    offered = code_actions("file:///parser_mod.py", placed, settings, everything)
    assert [a.command.arguments[0]["function"] for a in offered if a.command] == ["parse"]
    line = next(i for i, s in enumerate(text.splitlines()) if s.startswith("def parse"))
    shown = hover(text, placed, lsp.Position(line + 1, 4))
    assert shown is not None
    md = shown.contents.value  # type: ignore[union-attr]
    assert f"it reaches {parse.reach:.0%} of the time; changed alone, {parse.hottest:.0%}" in md
