"""Run a language server and pass its stdout on only while it is strictly framed LSP, as VS Code's
client reads it: each message a `Content-Length` header, a blank line, then exactly that many bytes of
JSON (a Content-Type header may come too). pygls' own client skips stray text between messages, so a server that lets a child print into
its stdout would pass tests driven through it and still die in VS Code. Here the first stray byte is
written to the file named by REDLINE_STRICT_LOG and the stream is cut, as VS Code cuts it.

Usage: python lsp_strict.py SERVER_COMMAND...
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading


def _violation(what: str, data: bytes) -> None:
    log = os.environ.get("REDLINE_STRICT_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(f"{what}: {data[:200]!r}\n")


def _pump_stdin(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    while chunk := os.read(0, 1 << 16):
        proc.stdin.write(chunk)
        proc.stdin.flush()
    proc.stdin.close()


def main() -> int:
    proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    threading.Thread(target=_pump_stdin, args=(proc,), daemon=True).start()
    assert proc.stdout is not None
    src, out = proc.stdout, sys.stdout.buffer
    while True:
        headers, length = b"", None
        while True:
            line = src.readline()
            if not line:
                return proc.wait()
            headers += line
            if line == b"\r\n" and length is not None:
                break
            name, sep, value = line.partition(b": ")
            if not sep or not line.endswith(b"\r\n") or name not in (b"Content-Length", b"Content-Type"):
                _violation("not an LSP header", line)
                proc.kill()
                return 1
            if name == b"Content-Length":
                length = int(value.strip())
        body = src.read(length)
        try:
            json.loads(body)
        except ValueError:
            _violation("a body that is not JSON", body)
            proc.kill()
            return 1
        out.write(headers + body)
        out.flush()
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
