"""The captured-calls store: `.redline/inputs/<module>.<qualname>/`, a manifest and one file per call.

Each call file is a pickle of `{"call": bytes, "streams": [bytes], "outcome": {...}}`: `call` is the
pickle of `(args, kwargs)` as they were before the call (`self` first for a method), unpickled only
inside the sandbox; an iterator argument in it is a persistent reference `("stream", i)` to
`streams[i]`, the pickle of the items the call took from it (replayed as a fresh iterator over them);
`outcome` is `{"kind": "return", "value": bytes | None}` (for a generator, `"yielded": n`: `value` is
then the n items it yielded, pickled one after another as they were yielded, with one memo) or
`{"kind": "raise", "type": "module.Qualname", "message": str}`.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...profilers.record import redline_dir

STORE = Path(".redline") / "inputs"
LAST_PROFILE = Path(".redline") / "last-profile.json"
PROFILES = Path(".redline") / "profiles.json"  # every `redline profile` run: its trace and command
# redline's own files under .redline/ that are not traces (a trace glob such as `.redline/*.json` meets them)
BOOKKEEPING = (LAST_PROFILE, PROFILES)


def is_bookkeeping(path: Path, root: Path) -> bool:
    """Whether `path` is one of redline's own files in the workspace `root`, not a trace."""
    return any(path.resolve() == (root / own).resolve() for own in BOOKKEEPING)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SignatureCount(_Model):
    signature: str = Field(description="argument types with shapes/dtypes or length buckets, and keywords given")
    seen: int
    kept: int


class CapturedCall(_Model):
    file: str
    signature: str
    bytes: int
    outcome: Literal["return", "raise"]
    raises: str = ""  # the exception type, for a call that raised
    redacted: bool = False  # values under secret names (redline.toml's `redact`) were replaced in it


class Manifest(_Model):
    """What one capture kept of one target, and what it could not keep."""

    target: str = Field(description="FILE::QUALNAME, FILE relative to the project root")
    file: str
    qualname: str
    module: str = Field(description="the module's name in the captured program ('__main__' for its script)")
    import_root: str = Field(description="the folder the module is imported from")
    command: list[str]
    cwd: str
    captured_at: str
    python: str = Field(description="the program's Python version")
    interpreter: str = Field("", description="the program's interpreter (sys.executable): the target's workers "
                                             "run with it, so they import what the program's environment has")
    exit_code: int
    processes: int
    calls_seen: int = Field(description="calls of the target (estimated once it was called more than 1,024 times)")
    calls_examined: int = Field(description="calls whose signature was read (all of the first 1,024, then a thinning sample)")
    calls_kept: int
    signatures: list[SignatureCount] = []
    calls: list[CapturedCall] = []
    unrecordable: dict[str, int] = Field(default_factory=dict, description="why calls were skipped -> calls")
    dropped: dict[str, int] = Field(default_factory=dict, description="kept calls left out of the store -> calls")

    def weights(self) -> list[float]:
        """Each kept call's weight in a mix that reflects how often its signature was seen."""
        per_sig = {s.signature: s.seen / s.kept for s in self.signatures if s.kept}
        return [per_sig.get(c.signature, 1.0) for c in self.calls]


class LastProfile(_Model):
    """What `redline profile` ran, for `redline capture` to run again."""

    command: list[str]
    cwd: str
    trace: str
    recorded_at: str
    attached_s: float | None = None  # a running process sampled for this long (`redline.attach`), not started


class ProfileIndex(_Model):
    """The recordings `redline profile` made in a workspace, oldest first (`.redline/profiles.json`)."""

    profiles: list[LastProfile] = []

    def superseded(self, among: set[str]) -> set[str]:
        """Of the traces `among` (resolved paths), those of a command recorded again since in the same
        folder, also among them: the newer one replaces them."""
        newest: dict[tuple[tuple[str, ...], str], LastProfile] = {}
        for p in self.profiles:
            if p.trace in among:
                newest[(tuple(p.command), p.cwd)] = p
        kept = {p.trace for p in newest.values()}
        return {p.trace for p in self.profiles if p.trace in among and p.trace not in kept}

    def find(self, trace: str) -> LastProfile | None:
        resolved = str(Path(trace).resolve())
        return next((p for p in reversed(self.profiles) if p.trace == resolved), None)


class StoreError(Exception):
    """A store or last-profile file that cannot be read; the message names the file."""


def store_dir(project_root: Path, module_name: str, qualname: str) -> Path:
    return project_root / STORE / f"{module_name}.{qualname}"


def private_folder(path: Path, root: Path) -> Path:
    """`path` (under root/.redline) and the folders up to it, readable by the user alone."""
    redline_dir(root)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    for folder in (path, *path.parents):
        if folder == root / ".redline" or root / ".redline" not in folder.parents:
            break
        os.chmod(folder, 0o700)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write `path` readable and writable by the user alone (captured calls are the program's data)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600)


def clear_stores(root: Path, folder: Path | None = None) -> list[Path]:
    """Delete captured calls: one target's store (`folder`) or all of them; the stores deleted."""
    base = root / STORE
    gone = [folder] if folder is not None else sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    return [p for p in gone if p is not None]


def read_manifest(folder: Path) -> Manifest | None:
    """The manifest in `folder`, None where there is none; StoreError where it is not one."""
    path = folder / "manifest.json"
    if not path.is_file():
        return None
    try:
        return Manifest.model_validate_json(path.read_text())
    except (ValidationError, OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: not a redline capture manifest ({_first_error(exc)})")


def read_last_profile(root: Path) -> LastProfile | None:
    path = root / LAST_PROFILE
    if not path.is_file():
        return None
    try:
        return LastProfile.model_validate_json(path.read_text())
    except (ValidationError, OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: not a redline profile record ({_first_error(exc)})")


def command_to_capture(root: Path, given: list[str], missing: str) -> tuple[list[str], Path]:
    """The command a capture runs and its folder: `given` (run in `root`), else the last `redline profile`
    run's in `root`; StoreError(`missing`, what the user should do) where there is neither."""
    if given:
        return given, root
    last = read_last_profile(root)
    if last is None:
        raise StoreError(missing)
    return last.command, Path(last.cwd)


def remember_profile(root: Path, command: list[str], trace: Path, cwd: Path | None = None,
                     attached_s: float | None = None) -> None:
    """Keep what `redline profile` ran under `root` (in `cwd`, default `root`), for capture to run again and
    the editor to profile again; `attached_s`: it sampled a running process (that command's) this long."""
    import datetime

    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    record = LastProfile(command=list(command), cwd=str(cwd or root), trace=str(trace.resolve()), recorded_at=now,
                         attached_s=attached_s)
    redline_dir(root)
    write_private(root / LAST_PROFILE, record.model_dump_json(indent=2).encode())
    index = read_profile_index(root)
    index.profiles = [p for p in index.profiles if p.trace != record.trace and Path(p.trace).is_file()] + [record]
    write_private(root / PROFILES, index.model_dump_json(indent=2).encode())


def read_profile_index(root: Path) -> ProfileIndex:
    """The workspace's recordings; empty where there is no index or it cannot be read (it only decides
    which of redline's own traces replace which)."""
    try:
        return ProfileIndex.model_validate_json((root / PROFILES).read_text())
    except (OSError, ValidationError, UnicodeDecodeError):
        return ProfileIndex()


def capture_hint(target: str, root: Path) -> str:
    """The `redline capture` command that would record inputs for `target`."""
    try:
        last = read_last_profile(root)
    except StoreError:
        last = None
    cmd = shlex.join(last.command) if last else "python YOUR_PROGRAM.py"
    return f"redline capture --target {shlex.quote(target)} -- {cmd}"


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}"
    return str(exc)
