"""A small JSON service on http.server, as backend programs are: POST a record, get its score.

python service.py [--port N]              serve until stopped (SIGTERM, SIGINT), on port N or a free one
python service.py --prefork N --requests K    N pre-forked workers on one socket, each serving K
                                           requests and ending with os._exit, as pre-fork servers'
                                           workers do; the parent waits for them and exits
It prints "listening on PORT" once it accepts connections.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


def score(record):
    words = record.get("text", "").lower().split()
    weights = record.get("weights", {})
    return round(sum(weights.get(w, 1.0) for w in words) / (1 + len(words)), 6)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        out = json.dumps({"score": score(json.loads(body))}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def main():
    chosen = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0
    server = HTTPServer(("127.0.0.1", chosen), Handler)
    port = server.server_address[1]
    if "--prefork" not in sys.argv:
        print(f"listening on {port}", flush=True)
        server.serve_forever()
        return
    workers = int(sys.argv[sys.argv.index("--prefork") + 1])
    requests = int(sys.argv[sys.argv.index("--requests") + 1])
    pids = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            for _ in range(requests):
                server.handle_request()
            os._exit(0)
        pids.append(pid)
    print(f"listening on {port}", flush=True)
    for pid in pids:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
