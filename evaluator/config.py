"""Per-project settings from `redline.toml` (or `[tool.redline]` in `pyproject.toml`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class TargetConfig(BaseModel):
    """Settings of one target."""

    model_config = ConfigDict(extra="forbid")
    rtol: float | None = Field(None, ge=0)
    atol: float | None = Field(None, ge=0)
    specialise: bool = Field(False, description="a candidate correct only at the inputs it was checked on may "
                             "be offered guarded: dispatched to at those inputs, the original code elsewhere")


class ProjectConfig(BaseModel):
    """What a project can tell redline about itself."""

    model_config = ConfigDict(extra="forbid")
    rtol: float | None = Field(None, ge=0, description="relative tolerance for every target")
    atol: float | None = Field(None, ge=0, description="absolute tolerance for every target")
    targets: dict[str, TargetConfig] = Field(default_factory=dict,
                                                  description='per target, keyed "path/file.py::qualname"')
    test_command: list[str] | None = Field(None, description="regression tests for a winner, e.g. ['pytest', '-q']")
    prompt_values: bool = Field(False, description="captured calls' values (not only their types and shapes) "
                                "may go into an LLM's prompt: they are the program's real data")
    redact: list[str] = Field(["password", "passwd", "token", "secret", "authorization", "api_key", "cookie"],
                              description="names of arguments, dict keys and attributes whose values capture "
                              "replaces with a placeholder before they are stored (matched by whole words of "
                              "the name: `token` redacts `access_token` and `authToken`, not `tokens`)")
    python: str | None = Field(None, description="the interpreter the target's sandbox workers and the project's "
                               "tests run with (relative to the project root; default: the captured program's, "
                               "else redline's own)")

    def tolerance(self, key: str) -> tuple[float | None, float | None]:
        own = self.targets.get(key)
        rtol = own.rtol if own and own.rtol is not None else self.rtol
        atol = own.atol if own and own.atol is not None else self.atol
        return rtol, atol

    def specialise(self, key: str) -> bool:
        own = self.targets.get(key)
        return own is not None and own.specialise


class ConfigError(Exception):
    pass


def load_config(root: Path) -> ProjectConfig:
    data: dict[str, Any] = {}
    source = None
    if (root / "redline.toml").is_file():
        source = root / "redline.toml"
        data = _toml(source)
        data = data.get("tool", {}).get("redline", data)
    elif (root / "pyproject.toml").is_file():
        source = root / "pyproject.toml"
        data = _toml(source).get("tool", {}).get("redline", {})
    if isinstance(data.get("test_command"), str):
        data["test_command"] = data["test_command"].split()
    try:
        config = ProjectConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"{source}: {'.'.join(str(x) for x in err['loc'])}: {err['msg']}")
    if config.python is not None:
        exe = Path(config.python).expanduser()
        exe = exe if exe.is_absolute() else root / exe
        if not (exe.is_file() and os.access(exe, os.X_OK)):
            raise ConfigError(f"{source}: python: {config.python} is not an executable interpreter (expected the path "
                              "of the program's python, e.g. .venv/bin/python)")
        config.python = str(exe)
    return config


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}")
