"""The docs name the code as it is: every module path docs/architecture.md names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_module_architecture_md_names_exists() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`([\w/]+\.py)(?:::[\w.]+)?`", text))
    assert len(named) > 20
    # A path as the doc writes it: from the root, or from the package folder the sentence is about.
    modules = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py")
               if p.relative_to(ROOT).parts[0] not in (".venv", "build", "vscode-extension", "tests")]
    missing = sorted(n for n in named if not any(m == n or m.endswith("/" + n) for m in modules))
    assert missing == [], f"docs/architecture.md names modules that do not exist: {missing}"
