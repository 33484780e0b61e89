"""The server's one settings model. The VS Code extension contributes exactly these as `redline.*`
(a test compares its package.json against this model, defaults and descriptions included)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ServerSettings(BaseModel):
    """Settings read from initializationOptions, `workspace/configuration` (section `redline`) and
    `workspace/didChangeConfiguration`."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    profileGlobs: list[str] = Field(
        default=[".redline/*.json", ".redline/*.txt", "*.speedscope.json", "*.sqlite", "*.nsys-rep"],
        description="Trace files to load, as glob patterns relative to the workspace root.")
    mergeProfiles: bool = Field(default=False, description=(
        "Load every recording `redline profile` made of a command, merged; off: the newest recording of "
        "each command replaces the older ones."))
    threshold: float = Field(default=0.05, ge=0, le=1,
                             description="Smallest inclusive share (0-1: its own time plus the libraries it "
                                         "calls) of a function that gets a diagnostic, a code lens and the "
                                         "Optimise action.")
    diagnosticSeverity: Literal["information", "hint"] = Field(
        default="information", description="Severity of hot-function diagnostics.")
    inlayHints: bool = Field(default=True, description="Show self/total shares as inlay hints after hot function names.")
    codeLenses: bool = Field(default=True, description="Show code lenses with shares and an Optimise action.")
    lineHeat: bool = Field(default=True, description="Send per-line heat for gutter decorations (redline/lineHeat).")
    budget: int = Field(default=8, ge=1, description="Most candidates one Optimise run evaluates.")
    rounds: int = Field(default=3, ge=1, description="Most rounds of proposals in one Optimise run.")
    timeLimit: float = Field(default=300.0, gt=0, description="Wall-clock limit of one Optimise run, in seconds.")
    device: Literal["cpu", "cuda"] = Field(default="cpu", description="Device candidates are checked and timed on.")
    builtinProposers: bool = Field(default=True, description=(
        "Use the built-in proposers (ruff's fixes, plain-Python rewrites, Cython, mypyc, Numba, Triton "
        "configurations and templates, library idioms, torch.compile, CUDA graphs); no LLM needed."))
    candidatesDir: str = Field(default="", description=(
        "Folder of candidate files evaluated in every Optimise run, as the CLI's --candidates (relative "
        "to the workspace root); empty for none."))
    llmBaseUrl: str = Field(default="", description="OpenAI-compatible endpoint for LLM candidates; empty for none.")
    llmModel: str = Field(default="", description="Model name the LLM endpoint serves.")
    candidateTimeout: float = Field(default=60.0, gt=0,
                                    description="Wall-clock deadline of each sandbox request, in seconds.")
    backend: Literal["local", "ray"] = Field(
        default="local", description="Where candidates are evaluated: this machine, or a Ray cluster.")
    rayAddress: str = Field(default="", description="Ray cluster address (HOST:PORT, ray://HOST:PORT or auto); "
                                                    "empty for $RAY_ADDRESS, else a new local Ray.")
    captureCommand: str = Field(default="", description="Command that runs your program, whose real calls of a "
                                                        "function without inputs are captured before optimising "
                                                        "it; empty for the command of the last `redline profile`.")

    @classmethod
    def merged(cls, current: ServerSettings, raw: Any) -> tuple[ServerSettings, str | None]:
        """`current` updated by a client's raw settings object; an invalid value is reported and ignored."""
        if not isinstance(raw, dict):
            return current, None
        if "redline" in raw and isinstance(raw["redline"], dict):
            raw = raw["redline"]
        data = current.model_dump()
        data.update({k: v for k, v in raw.items() if k in cls.model_fields})
        try:
            return cls.model_validate(data), None
        except ValidationError as exc:
            err = exc.errors()[0]
            return current, f"redline setting {'.'.join(str(x) for x in err['loc'])}: {err['msg']}"


# Settings only the VS Code extension reads (how to start the server), and so not part of the model.
EXTENSION_ONLY = {
    "redline.interpreter": {
        "type": "string", "default": "",
        "description": "Python interpreter that runs the redline server; empty to use the Python extension's "
                       "active interpreter.",
        "scope": "resource",
    },
}


def vscode_properties() -> dict[str, dict[str, Any]]:
    """`contributes.configuration.properties` for the VS Code extension, derived from ServerSettings."""
    schema = ServerSettings.model_json_schema()
    out: dict[str, dict[str, Any]] = {}
    for name, prop in schema["properties"].items():
        entry: dict[str, Any] = {}
        if "enum" in prop:
            entry["type"] = "string"
            entry["enum"] = prop["enum"]
        else:
            entry["type"] = prop["type"]
        if prop.get("type") == "array":
            entry["items"] = prop["items"]
        for key, vs in (("minimum", "minimum"), ("maximum", "maximum"), ("exclusiveMinimum", "exclusiveMinimum")):
            if key in prop:
                entry[vs] = prop[key]
        entry["default"] = prop["default"]
        entry["description"] = prop["description"]
        out[f"redline.{name}"] = entry
    out.update(EXTENSION_ONLY)
    return out


if __name__ == "__main__":
    import json
    import sys

    json.dump(vscode_properties(), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
