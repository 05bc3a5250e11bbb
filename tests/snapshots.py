"""A loopback HTTP server that answers each scrape with the next saved /metrics snapshot (the last one repeated),
for the tests that point vllmlog or a real Prometheus at a vLLM-like /metrics endpoint; and a free loopback port."""

from __future__ import annotations

import http.server
import socket
import threading


class SnapshotHandler(http.server.BaseHTTPRequestHandler):
    """Serves ``bodies`` in order, one per GET; ``hits`` counts the GETs (class attributes of a subclass)."""

    bodies: list[bytes] = []
    hits = 0

    def do_GET(self) -> None:  # noqa: N802
        cls = type(self)
        body = cls.bodies[min(cls.hits, len(cls.bodies) - 1)]
        cls.hits += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def serve_snapshots(bodies: list[bytes]) -> http.server.ThreadingHTTPServer:
    """Start a server on 127.0.0.1 (a port of its own) serving ``bodies``; its handler class is
    ``srv.RequestHandlerClass`` (``.bodies``, ``.hits``). Stop it with ``srv.shutdown(); srv.server_close()``."""
    handler = type("Snapshots", (SnapshotHandler,), {"bodies": list(bodies), "hits": 0})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def free_port() -> int:
    """A loopback port nobody listens on (for a Prometheus started by a test)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
