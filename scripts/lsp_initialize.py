"""Start a language server command, send `initialize`, print the server's name and capabilities.

Exits 1 when the server does not answer with a result within 60 s. Used by check-wheel.sh to
prove an installed redline serves LSP.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import IO


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def read_message(stream: IO[bytes]) -> dict:
    length = None
    while True:
        line = stream.readline()
        if not line:
            raise SystemExit("the server closed its stdout before answering")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    if length is None:
        raise SystemExit("a message without Content-Length")
    return json.loads(stream.read(length))


def main(command: list[str]) -> int:
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin and server.stdout
    try:
        server.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                  "params": {"processId": None, "rootUri": None, "capabilities": {}}}))
        server.stdin.flush()
        while True:
            message = read_message(server.stdout)
            if message.get("id") == 1:
                break
        if "result" not in message:
            print(f"initialize failed: {message}", file=sys.stderr)
            return 1
        info = message["result"].get("serverInfo", {})
        print(f"initialize: {info.get('name')} {info.get('version')}, "
              f"capabilities: {', '.join(sorted(message['result']['capabilities']))}")
        server.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        server.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
        server.stdin.close()
        server.wait(timeout=30)
        return 0
    finally:
        if server.poll() is None:
            server.kill()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
