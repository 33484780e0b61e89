"""Nsight Systems: the SQLite export (`nsys export --type sqlite`), or a `.nsys-rep` through nsys.

Kernels (`CUPTI_ACTIVITY_KIND_KERNEL`), copies and sets are joined to the runtime call that
launched them (`CUPTI_ACTIVITY_KIND_RUNTIME`, on `correlationId`). The launch's thread gives the
NVTX push/pop and start/end ranges open at that moment (code regions), and its `callchainId`
the native backtrace from `CUDA_CALLCHAINS`. The export holds no Python frames (the Python
backtraces' payloads are not written to SQLite), so Triton kernels are tied to source later, by
name, against the workspace's `@triton.jit` functions.
"""

from __future__ import annotations

import bisect
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

from pydantic import BaseModel, TypeAdapter, ValidationError

from .errors import ParseError
from .model import Frame, Profile

_NVTX_RANGES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
_COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD",
               9: "HtoH", 10: "PtoP"}


class KernelRow(BaseModel):
    start: int
    end: int
    correlationId: int
    name: str


class RuntimeRow(BaseModel):
    start: int
    correlationId: int
    globalTid: int
    callchainId: int | None = None


class RangeRow(BaseModel):
    start: int
    end: int | None
    globalTid: int | None
    text: str | None


_KERNELS = TypeAdapter(list[KernelRow])
_RUNTIME = TypeAdapter(list[RuntimeRow])
_RANGES = TypeAdapter(list[RangeRow])


def export_report(path: Path) -> Path:
    """Turn a `.nsys-rep` into SQLite with the installed nsys, into a temporary file."""
    nsys = shutil.which("nsys")
    if nsys is None:
        raise ParseError(path, "whole file", "an Nsight Systems SQLite export: nsys is not on PATH to convert "
                         "this .nsys-rep; run `nsys export --type sqlite " + path.name + "` where Nsight Systems "
                         "is installed and pass the .sqlite")
    out = Path(tempfile.mkdtemp(prefix="redline-nsys-")) / (path.stem + ".sqlite")
    proc = subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out),
                           str(path)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ParseError(path, "whole file", f"a report nsys can export (nsys said: {tail[0]})")
    return out


def _rows(db: sqlite3.Connection, sql: str) -> list[dict[str, object]]:
    cur = db.execute(sql)
    names = [c[0] for c in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur]


def read_nsys_sqlite(path: str | Path) -> Profile:
    path = Path(path)
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)  # a damaged file fails on the first query
    except sqlite3.Error as exc:
        raise ParseError(path, "whole file", f"a readable SQLite database ({exc})")
    try:
        try:
            tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
        except sqlite3.DatabaseError as exc:
            raise ParseError(path, "whole file", f"an SQLite database ({exc})")
        return _read(path, db, tables)
    except sqlite3.DatabaseError as exc:
        raise ParseError(path, "tables", f"the Nsight Systems export schema ({exc})")
    except UnicodeDecodeError as exc:  # a damaged page: sqlite hands over text that is not UTF-8
        raise ParseError(path, "text", f"UTF-8 names and strings ({exc.reason} at byte {exc.start})")
    finally:
        db.close()


def _read(path: Path, db: sqlite3.Connection, tables: set[str]) -> Profile:
    if "StringIds" not in tables or not tables & {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"}:
        raise ParseError(path, "tables", "an Nsight Systems export with StringIds and CUPTI_ACTIVITY_KIND_KERNEL "
                         "(record with --trace=cuda)")
    try:
        kernels = _KERNELS.validate_python(_rows(db, _device_sql(tables)))
        runtime = _RUNTIME.validate_python(_rows(
            db, "select start, correlationId, globalTid, "
                + ("callchainId" if _has_column(db, "CUPTI_ACTIVITY_KIND_RUNTIME", "callchainId") else "null as callchainId")
                + " from CUPTI_ACTIVITY_KIND_RUNTIME")) if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables else []
        ranges = _RANGES.validate_python(_rows(
            db, "select e.start, e.end, e.globalTid, coalesce(e.text, s.value) as text from NVTX_EVENTS e "
                "left join StringIds s on s.id = e.textId where e.eventType in (59, 60)")) if "NVTX_EVENTS" in tables else []
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ParseError(path, "row " + ".".join(str(x) for x in err["loc"]), err["msg"])
    for k in kernels:
        if k.end < k.start:
            raise ParseError(path, f"kernel correlationId {k.correlationId}", "end not before start")
    chains = _callchains(db) if "CUDA_CALLCHAINS" in tables else {}
    # With backtraces on, a launch appears twice: once bare and once with its callchain.
    launches: dict[int, RuntimeRow] = {}
    for row in runtime:
        if row.correlationId not in launches or row.callchainId is not None:
            launches[row.correlationId] = row
    by_tid: dict[int, list[RangeRow]] = {}
    for r in ranges:
        if r.globalTid is not None and r.end is not None and r.text:
            by_tid.setdefault(r.globalTid, []).append(r)
    starts = {tid: [r.start for r in sorted(rs, key=lambda r: r.start)] for tid, rs in by_tid.items()}
    for tid in by_tid:
        by_tid[tid].sort(key=lambda r: r.start)
    profile = Profile(unit="seconds", sources=[str(path)])
    for k in kernels:
        name = k.name
        if name.startswith("[CUDA memcpy "):
            code = name[len("[CUDA memcpy "):-1]
            name = f"[CUDA memcpy {_COPY_KINDS.get(int(code), code) if code.isdigit() else code}]"
        stack: list[int] = []
        launch = launches.get(k.correlationId)
        if launch is not None:
            rs = by_tid.get(launch.globalTid, [])
            upto = bisect.bisect_right(starts.get(launch.globalTid, []), launch.start)
            for r in rs[:upto]:
                if r.end is not None and r.end >= launch.start:
                    stack.append(profile.frame_id(Frame(r.text or "?", None, None, "region")))
            for sym, module in chains.get(launch.callchainId, []) if launch.callchainId is not None else []:
                stack.append(profile.frame_id(Frame(sym, module, None, "native")))
        stack.append(profile.frame_id(Frame(name, None, None, "kernel")))
        profile.add("gpu", tuple(stack), (k.end - k.start) * 1e-9, 1)
    if not profile.weights:
        raise ParseError(path, "CUPTI_ACTIVITY_KIND_KERNEL", "at least one kernel or copy (none were recorded)")
    return profile


def _device_sql(tables: set[str]) -> str:
    """One query for the device's work: kernels, copies and memsets, each with its span and name."""
    parts = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        parts.append("select k.start, k.end, k.correlationId, coalesce(s.value, d.value, '?') as name "
                     "from CUPTI_ACTIVITY_KIND_KERNEL k left join StringIds s on s.id = k.shortName "
                     "left join StringIds d on d.id = k.demangledName")
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        parts.append("select start, end, correlationId, '[CUDA memcpy ' || copyKind || ']' as name "
                     "from CUPTI_ACTIVITY_KIND_MEMCPY")
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        parts.append("select start, end, correlationId, '[CUDA memset]' as name from CUPTI_ACTIVITY_KIND_MEMSET")
    return " union all ".join(parts)


def _has_column(db: sqlite3.Connection, table: str, column: str) -> bool:
    return any(r[1] == column for r in db.execute(f"pragma table_info([{table}])"))


def _callchains(db: sqlite3.Connection) -> dict[int, list[tuple[str, str | None]]]:
    """Native launch backtraces, outermost frame first."""
    out: dict[int, list[tuple[int, str, str | None]]] = {}
    for cid, sym, module, depth in db.execute(
            "select c.id, coalesce(s.value, '?'), m.value, c.stackDepth from CUDA_CALLCHAINS c "
            "left join StringIds s on s.id = c.symbol left join StringIds m on m.id = c.module"):
        out.setdefault(cid, []).append((depth, sym, module))
    return {cid: [(s, m) for _, s, m in sorted(frames, key=lambda t: -t[0])] for cid, frames in out.items()}
