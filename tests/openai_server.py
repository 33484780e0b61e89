"""A real local HTTP server speaking the OpenAI Chat Completions protocol (streaming and not).

Replies come from a script: a list of actions, one per request, each a reply text (`reply`), several
choices (`replies`, one per index, for requests with n > 1), or an HTTP status to fail with; `delay`
holds the response back and `chunk_delay` slows each streamed chunk. Every request body is recorded
so tests can read the prompts.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedOpenAI:
    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                try:
                    self._answer()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout): nothing to answer

            def _answer(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.requests.append(body)
                    outer.arrived.notify_all()
                    action = outer.script.pop(0) if outer.script else {"reply": "no more replies"}
                if "delay" in action:
                    time.sleep(action["delay"])
                if "status" in action:
                    self.send_response(action["status"])
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(json.dumps({"error": {"message": "scripted failure"}}).encode())
                    return
                texts = action.get("replies") or [action["reply"]] * int(body.get("n") or 1)
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    # Choices interleave chunk by chunk, as real servers stream them.
                    for i in range(0, max(len(t) for t in texts), 40):
                        for index, text in enumerate(texts):
                            if i >= len(text):
                                continue
                            chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": body["model"],
                                     "choices": [{"index": index, "delta": {"content": text[i:i + 40]},
                                                  "finish_reason": None}]}
                            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                            self.wfile.flush()
                            time.sleep(action.get("chunk_delay", 0))
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                payload = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                           "choices": [{"index": index, "message": {"role": "assistant", "content": text},
                                        "finish_reason": "stop"} for index, text in enumerate(texts)],
                           "usage": {"prompt_tokens": 10, "completion_tokens": 10 * len(texts),
                                     "total_tokens": 10 + 10 * len(texts)}}
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def wait_requests(self, n: int, timeout: float = 120) -> None:
        """Until `n` requests have arrived (each is recorded before it is answered)."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.requests) >= n, timeout), f"{len(self.requests)} of {n}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
