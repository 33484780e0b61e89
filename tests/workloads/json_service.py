"""A small JSON service on http.server, as backend code writes it: each request renders a report.
Prints `listening PORT` once it accepts connections; runs until it is stopped."""

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


def render_report(n):
    """The hot handler: rows of a report, totalled and serialised."""
    rows = [{"id": i, "name": f"item-{i}", "price": (i * 37) % 101 / 7, "tags": [str(i % 5), str(i % 3)]}
            for i in range(n)]
    total = sum(row["price"] for row in rows)
    return json.dumps({"rows": rows, "total": round(total, 2)})


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = render_report(int(self.path.rsplit("/", 1)[-1] or 200)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    server = HTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
