"""The VS Code extension contributes exactly the server's settings (names, types, defaults, descriptions)."""

from __future__ import annotations

import json

from helpers import REPO
from redline.server.settings import EXTENSION_ONLY, ServerSettings, vscode_properties


def test_package_json_mirrors_the_settings_model() -> None:
    pkg = json.loads((REPO / "vscode-extension" / "package.json").read_text())
    contributed = pkg["contributes"]["configuration"]["properties"]
    assert contributed == vscode_properties(), "regenerate with: python -m redline.server.settings"
    server_keys = {k for k in contributed if k not in EXTENSION_ONLY}
    assert server_keys == {f"redline.{name}" for name in ServerSettings.model_fields}
    defaults = ServerSettings()
    for name, field in ServerSettings.model_fields.items():
        entry = contributed[f"redline.{name}"]
        assert entry["default"] == getattr(defaults, name)
        assert entry["description"] == field.description and field.description


def test_extension_commands_do_not_shadow_server_commands() -> None:
    pkg = json.loads((REPO / "vscode-extension" / "package.json").read_text())
    ids = {c["command"] for c in pkg["contributes"]["commands"]}
    server = {"redline.loadProfile", "redline.optimise", "redline.applyWinner", "redline.discardWinner",
              "redline.cancel", "redline.status", "redline.compareProfiles", "redline.reprofile",
              "redline.attach", "redline.captureService"}
    assert not ids & server  # the language client registers those itself
    titles = {c["title"] for c in pkg["contributes"]["commands"]}
    assert {"Load profile", "Record profile", "Optimise hotspot", "Show flame graph", "Accept winner",
            "Reject winner", "Set LLM API key"} <= titles
