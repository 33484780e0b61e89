"""Benchmark: request latency of the language server over stdio with a 1,000,000-sample profile loaded.

Run: .venv/bin/python tests/perf/bench_server.py
Records the bundled demo with py-spy, replicates its samples to one million, starts the real
`redline serve` on a workspace holding that trace, then sends 1,000 hover, 1,000 code-lens and
1,000 inlay-hint requests (one at a time, as an editor does) and prints p50/p95/max of each.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from helpers import REPO, py_spy_record  # noqa: E402


def build_workspace() -> Path:
    root = Path(tempfile.mkdtemp())
    shutil.copy(REPO / "examples" / "demo" / "app.py", root / "app.py")
    rec = py_spy_record(root / "app.py", root / "rec.json", "speedscope", rate=300)
    doc = json.loads(rec.read_text())
    prof = doc["profiles"][0]
    samples, weights = prof["samples"], prof["weights"]
    prof["samples"] = [samples[i % len(samples)] for i in range(1_000_000)]
    prof["weights"] = [weights[i % len(weights)] for i in range(1_000_000)]
    (root / ".redline").mkdir()
    (root / ".redline" / "big.speedscope.json").write_text(json.dumps(doc))
    rec.unlink()
    return root


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


async def main() -> None:
    root = build_workspace()
    client = LanguageClient("bench", "1")
    loaded = asyncio.Event()
    client.feature("redline/profileLoaded")(lambda params: loaded.set())
    for m in ("redline/lineHeat", lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lsp.WINDOW_LOG_MESSAGE, lsp.WINDOW_SHOW_MESSAGE):
        client.feature(m)(lambda params: None)
    await client.start_io(sys.executable, "-m", "redline.cli", "serve")
    t0 = time.perf_counter()
    await client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(), root_uri=root.as_uri()))
    client.initialized(lsp.InitializedParams())
    await asyncio.wait_for(loaded.wait(), 300)
    load_s = time.perf_counter() - t0
    path = root / "app.py"
    uri = path.as_uri()
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri, "python", 1, path.read_text())))
    line = next(i for i, s in enumerate(path.read_text().splitlines()) if s.startswith("def rolling_zscore"))
    doc_id = lsp.TextDocumentIdentifier(uri)
    requests: dict[str, Any] = {
        "hover": lambda i: client.text_document_hover_async(lsp.HoverParams(doc_id, lsp.Position(line + 1 + i % 12, 4))),
        "codeLens": lambda i: client.text_document_code_lens_async(lsp.CodeLensParams(doc_id)),
        "inlayHint": lambda i: client.text_document_inlay_hint_async(lsp.InlayHintParams(
            doc_id, lsp.Range(lsp.Position(0, 0), lsp.Position(60, 0)))),
    }
    print(f"1,000,000-sample profile: loaded and indexed in {load_s:.2f} s (initialize to redline/profileLoaded)")
    for name, make in requests.items():
        times = []
        for i in range(1000):
            t = time.perf_counter()
            result = await make(i)
            times.append((time.perf_counter() - t) * 1e3)
            if i == 0:
                assert result, f"{name} returned nothing"
        print(f"  {name:9s} x1000: p50 {statistics.median(times):.2f} ms, p95 {pct(times, 0.95):.2f} ms, "
              f"max {max(times):.2f} ms (target p95 <= 20 ms)")
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


if __name__ == "__main__":
    asyncio.run(main())
