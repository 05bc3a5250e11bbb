"""The live OTLP/HTTP trace receiver: ``POST /v1/traces`` (protobuf or JSON, optionally gzip), so
``vllm serve --otlp-traces-endpoint http://127.0.0.1:4318/v1/traces`` points straight at ``vllmlog watch``.

Bounded by construction: a body over ``max_body`` bytes (or a gzip body that inflates past it) is refused
without being read whole; decoded spans wait in a queue of at most ``max_spans`` until the watch loop
drains it — beyond that they are dropped, counted, and reported to the exporter as an OTLP
``partial_success`` (``rejected_spans``). Malformed payloads get ``400`` and a counter, never a crash.
Binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import threading
import zlib
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ..errors import ConfigError
from .otlp import RequestSpan, Span, TraceStats, decode_json, decode_protobuf, spans_of

PATH = "/v1/traces"
DEFAULT_LISTEN = "127.0.0.1:4318"
MAX_BODY = 16 << 20
MAX_SPANS = 200_000
IDLE_TIMEOUT_S = 15.0
"""A connection that sends nothing for this long is closed (an idle keep-alive or half-open client holds a
thread until then, not forever; OTel exporters reconnect for their next batch)."""
_PROTOBUF = "application/x-protobuf"
_JSON = "application/json"


class TooLarge(ValueError):
    """A body over the size limit."""


def _inflate(body: bytes, limit: int) -> bytes:
    """gunzip with a cap on the inflated size (a zip bomb is refused, not expanded)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as exc:
        raise ValueError(f"bad gzip body ({exc})") from None
    if len(out) > limit or d.unconsumed_tail:
        raise TooLarge(f"gzip body inflates past {limit} bytes")
    return out


class OtlpReceiver:
    """Decodes OTLP/HTTP export requests into spans and queues them for the watch loop (thread-safe)."""

    def __init__(self, max_body: int = MAX_BODY, max_spans: int = MAX_SPANS) -> None:
        self.max_body = max_body
        self.max_spans = max_spans
        self.lock = threading.Lock()
        self.queue: deque[Span | RequestSpan] = deque()
        self.stats = TraceStats()
        self.requests: Counter[str] = Counter()
        """Export requests by result: ``ok``, ``partial`` (some spans dropped), ``rejected``."""
        self.rejected: Counter[str] = Counter()
        """Refused payloads by reason: ``too_large``, ``malformed``, ``content_type``, ``no_length``."""
        self.spans: Counter[str] = Counter()
        """Spans accepted by type (``llm_request``, ``other``) and ``dropped`` (queue full)."""
        self.server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------------ payloads
    def accept(self, body: bytes, content_type: str, content_encoding: str = "") -> tuple[int, int]:
        """Decode one export request; returns (spans queued, spans dropped). Raises ``ValueError``
        (``TooLarge``) for a payload to refuse."""
        if len(body) > self.max_body:
            raise TooLarge(f"body of {len(body)} bytes over {self.max_body}")
        if content_encoding.strip().lower() == "gzip":
            body = _inflate(body, self.max_body)
        elif content_encoding.strip().lower() not in ("", "identity"):
            raise ValueError(f"unsupported Content-Encoding {content_encoding!r}")
        ct = content_type.split(";", 1)[0].strip().lower()
        if ct == _PROTOBUF:
            msg: Any = decode_protobuf(body)
        elif ct == _JSON:
            msg = decode_json(body)
        else:
            raise LookupError(f"unsupported Content-Type {content_type!r} (use {_PROTOBUF} or {_JSON})")
        with self.lock:
            items = spans_of(msg, "otlp", self.stats.lines + 1, self.stats)
            self.stats.lines += 1
            room = max(0, self.max_spans - len(self.queue))
            keep, drop = items[:room], len(items) - min(room, len(items))
            self.queue.extend(keep)
            for s in keep:
                self.spans["llm_request" if isinstance(s, RequestSpan) else "other"] += 1
            if drop:
                self.spans["dropped"] += drop
            self.requests["partial" if drop else "ok"] += 1
        return len(keep), drop

    def reject(self, reason: str, why: str) -> None:
        """Count a refused payload."""
        with self.lock:
            self.rejected[reason] += 1
            self.requests["rejected"] += 1
            self.stats.skip("otlp", why)

    def drain(self) -> list[Span | RequestSpan]:
        """Every span received since the last call (the watch loop folds them into the journeys)."""
        with self.lock:
            out = list(self.queue)
            self.queue.clear()
        return out

    def counters(self) -> dict[str, dict[str, int]]:
        """Snapshot of the counters (for the exporter)."""
        with self.lock:
            return {"requests": dict(self.requests), "rejected": dict(self.rejected), "spans": dict(self.spans)}

    # ------------------------------------------------------------------ HTTP
    def serve(self, listen: str = DEFAULT_LISTEN) -> tuple[str, int]:
        """Listen on ``HOST:PORT`` in a daemon thread; returns the bound (host, port)."""
        from ..live.exporter import parse_listen

        host, port = parse_listen(listen)
        handler = type("Handler", (_Handler,), {"receiver": self, "timeout": IDLE_TIMEOUT_S})
        try:
            srv = ThreadingHTTPServer((host, port), handler)
        except OSError as exc:
            raise ConfigError(f"cannot listen on {listen}: {exc.strerror or exc}",
                              hint="pick a free port (port 0 picks one and reports it)") from None
        srv.daemon_threads = True
        self.server = srv
        threading.Thread(target=srv.serve_forever, name="vllmlog-otlp", daemon=True).start()
        return srv.server_address[0], srv.server_address[1]

    def close(self) -> None:
        """Stop listening."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


class _Handler(BaseHTTPRequestHandler):
    receiver: OtlpReceiver
    protocol_version = "HTTP/1.1"
    server_version = "vllmlog-otlp"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass  # no per-request stderr lines

    def _reply(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, code: int, reason: str, why: str, close: bool = False) -> None:
        self.receiver.reject(reason, why)
        if close:
            self.close_connection = True
        self._reply(code, why.encode() + b"\n", "text/plain; charset=utf-8")

    def do_GET(self) -> None:  # noqa: N802
        self._reply(405 if self.path.split("?")[0] == PATH else 404, b"POST OTLP trace data to /v1/traces\n",
                    "text/plain; charset=utf-8")

    def do_POST(self) -> None:  # noqa: N802
        r = self.receiver
        if self.path.split("?")[0] != PATH:
            self.close_connection = True
            self._reply(404, b"only /v1/traces is served here\n", "text/plain; charset=utf-8")
            return
        length = self.headers.get("Content-Length")
        if length is None or not length.strip().isdigit():
            self._refuse(400, "no_length", "a Content-Length is required", close=True)
            return
        n = int(length)
        if n > r.max_body:  # refused unread: the connection closes instead of draining it
            self._refuse(400, "too_large", f"body of {n} bytes over the {r.max_body}-byte limit", close=True)
            return
        body = self.rfile.read(n)
        ctype = self.headers.get("Content-Type", "")
        try:
            kept, dropped = r.accept(body, ctype, self.headers.get("Content-Encoding", ""))
        except TooLarge as exc:
            self._refuse(400, "too_large", str(exc))
            return
        except LookupError as exc:
            self._refuse(400, "content_type", str(exc))
            return
        except ValueError as exc:
            self._refuse(400, "malformed", str(exc))
            return
        resp = ExportTraceServiceResponse()
        if dropped:
            resp.partial_success.rejected_spans = dropped
            resp.partial_success.error_message = "vllmlog's span queue is full"
        if ctype.split(";", 1)[0].strip().lower() == _JSON:
            self._reply(200, json_format.MessageToJson(resp, indent=None).encode(), _JSON)
        else:
            self._reply(200, resp.SerializeToString(), _PROTOBUF)
