"""Another editor: Neovim's built-in LSP client (headless) against the real `redline serve`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, TESTS, py_spy_record

NVIM = shutil.which("nvim")


@pytest.mark.skipif(NVIM is None, reason="Neovim is not installed (scripts/system-deps.sh installs it)")
def test_neovim_sees_diagnostics_hover_and_lenses(tmp_path: Path) -> None:
    shutil.copy(REPO / "examples" / "demo" / "app.py", tmp_path / "app.py")
    (tmp_path / "redline.toml").write_text("")
    py_spy_record(tmp_path / "app.py", tmp_path / ".redline" / "app.speedscope.json", "speedscope")
    line = next(i for i, s in enumerate((tmp_path / "app.py").read_text().splitlines()) if s.startswith("def rolling_zscore"))
    out = tmp_path / "nvim.json"
    env = {**os.environ, "REDLINE_CMD": f"{sys.executable} -m redline.cli serve", "REDLINE_FILE": str(tmp_path / "app.py"),
           "REDLINE_ROOT": str(tmp_path), "REDLINE_OUT": str(out), "REDLINE_HOVER_LINE": str(line + 5)}
    subprocess.run([str(NVIM), "--headless", "-u", "NONE", "-c", f"luafile {TESTS / 'editors' / 'nvim_client.lua'}"],
                   env=env, cwd=tmp_path, timeout=180, capture_output=True)
    result = json.loads(out.read_text())
    assert result.get("error") is None, result.get("error")
    hot = [d for d in result["diagnostics"] if d["source"] == "redline"]
    assert hot and hot[0]["line"] == line and "rolling_zscore" in hot[0]["message"]
    assert "rolling_zscore" in result["hover"] and "Hottest lines" in result["hover"]
    # Two lenses (share, "Optimise hotspot") per hot function: rolling_zscore at least; under load
    # py-spy's samples can put a second function of the demo over the threshold (seen in CI).
    assert result["lenses"] >= 2 and result["lenses"] % 2 == 0
