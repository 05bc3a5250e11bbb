"""The exporter's own process: ``/metrics`` answered outside the parsing process (its own GIL, its own CPU share).

``watch`` parses in one process, and Python's regex engine holds the GIL while it scans a line: a scrape that
arrives then waits for it (on a loaded machine, over a second for a 1 MB line). So ``watch`` serves its endpoint
from this small child program, which imports nothing of the parser (only ``httpserver`` and the standard
library) and runs the same bounded HTTP server on the listening socket the watcher bound and passed to it.

Protocol (two pipes, both ends blocking). For each scrape the child writes a request — ``!QI`` (its number, the
length) then JSON ``[method, path, query, Accept]`` — to its stdout. The watcher reads every request waiting,
calls its WSGI app (``prometheus_client``'s, on the watcher's registry) once per distinct request, and answers
each with a frame on the child's stdin — ``!QdII`` (the highest request number it answers, the wall time it
built at, the two lengths), JSON ``[request, status, headers]``, the body. A scrape waits up to ``FRESH_WAIT_S``
for the answer to its own number, so whenever the watcher is responsive the answer is built after the request
arrived, exactly as in-process; otherwise it gets the latest answer to the same request at once
(``vllmlog_watch_exporter_late_scrapes_total``), and ``vllmlog_watch_exporter_snapshot_age_seconds`` says how old
the numbers shown are. The child gzips (when asked) and exits when its stdin ends (the watcher stopped or died).

    python -c BOOT LIVE_DIR FD INSTANCE TIMEOUT MAX_CONNECTIONS
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any, BinaryIO, Callable, Iterable

if __package__:
    from .httpserver import BoundedHTTPServer
else:  # the child program: this directory is on sys.path and the vllmlog package is not imported (fast start)
    import importlib

    BoundedHTTPServer = importlib.import_module("httpserver").BoundedHTTPServer  # our own live/httpserver.py

REQUEST = struct.Struct("!QI")
"""(request number, JSON length)."""
FRAME = struct.Struct("!QdII")
"""(answered request number, built at (epoch s), JSON head length, body length)."""
FRESH_WAIT_S = 0.25
"""How long a scrape waits for the watcher to answer it before it gets the latest answer."""
FIRST_WAIT_S = 10.0
"""How long a scrape waits for a first answer to its request (the watcher starting up) before a 503."""
MAX_FRAME = 256 << 20
"""Largest head or body the child accepts from the watcher (a corrupt pipe ends the child, not its memory)."""

#: ``python -c BOOT LIVE_DIR …``: the child imports this module as a top-level one (not the vllmlog package).
BOOT = "import sys; sys.path.insert(0, sys.argv[1]); import scrapeproc; scrapeproc.main(sys.argv[2:])"

Key = tuple[str, str, str, "str | None"]
_Answer = tuple[int, float, str, list[tuple[str, str]], bytes]


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def read_exactly(f: BinaryIO, n: int) -> bytes | None:
    """``n`` bytes from a blocking pipe, or None at its end."""
    buf = b""
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


class Answers:
    """The child's side: asks the watcher to build each scrape's answer and keeps the latest per request."""

    def __init__(self, out: BinaryIO, instance: str) -> None:
        self.out = out
        self.instance = _escape(instance)
        self.cond = threading.Condition()
        self.latest: dict[Key, _Answer] = {}
        self.late = 0
        self.gone = False
        self._asked = 0
        self._write = threading.Lock()

    def read_frames(self, inp: BinaryIO) -> None:
        """Read the watcher's answers until its end of the pipe closes."""
        while True:
            head = read_exactly(inp, FRAME.size)
            if head is None:
                break
            rid, built, nh, nb = FRAME.unpack(head)
            if nh > MAX_FRAME or nb > MAX_FRAME:
                break
            meta, body = read_exactly(inp, nh), read_exactly(inp, nb)
            if meta is None or body is None:
                break
            key, status, headers = json.loads(meta)
            k: Key = (key[0], key[1], key[2], key[3])
            with self.cond:
                old = self.latest.get(k)
                if old is None or rid >= old[0]:
                    self.latest[k] = (rid, built, status, [(str(a), str(b)) for a, b in headers], body)
                self.cond.notify_all()
        with self.cond:
            self.gone = True
            self.cond.notify_all()

    def _ask(self, key: Key) -> int:
        data = json.dumps(list(key)).encode()
        with self._write:
            self._asked += 1
            rid = self._asked
            try:
                self.out.write(REQUEST.pack(rid, len(data)) + data)
                self.out.flush()
            except (OSError, ValueError):
                pass  # the watcher is gone: the latest answer is all there is
            return rid

    def app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        """The WSGI app the bounded server calls: the watcher's answer if it comes in time, else the latest one."""
        key: Key = (environ["REQUEST_METHOD"], environ["PATH_INFO"], environ.get("QUERY_STRING", ""),
                    environ.get("HTTP_ACCEPT"))
        rid = self._ask(key)

        def answered() -> bool:
            a = self.latest.get(key)
            return self.gone or (a is not None and a[0] >= rid)

        with self.cond:
            self.cond.wait_for(answered, FRESH_WAIT_S)
            if key not in self.latest:
                self.cond.wait_for(lambda: self.gone or key in self.latest, FIRST_WAIT_S)
            a = self.latest.get(key)
            if a is not None and a[0] < rid:
                self.late += 1
            late = self.late
        if a is None:
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [b"the watcher has not answered yet\n"]
        _rid, built, status, headers, body = a
        ctype = next((v for h, v in headers if h.lower() == "content-type"), "")
        if status.startswith("200") and (ctype.startswith("text/plain") or ctype.startswith("application/openmetrics-text")):
            body = self._with_own(body, ctype.startswith("application/openmetrics-text"), late,
                                  max(0.0, time.time() - built))
        enc = environ.get("HTTP_ACCEPT_ENCODING") or ""
        if body and any(e.split(";")[0].strip().lower() == "gzip" for e in enc.split(",")):
            body = gzip.compress(body)
            headers = headers + [("Content-Encoding", "gzip")]
        start_response(status, headers)
        return [body]

    def _with_own(self, body: bytes, om: bool, late: int, age: float) -> bytes:
        """The watcher's exposition plus the child's own two families (before OpenMetrics' ``# EOF``)."""
        lab = f'{{instance="{self.instance}"}}'
        name = "vllmlog_watch_exporter_late_scrapes"
        fam = name if om else name + "_total"
        own = (f"# HELP {fam} Scrapes answered with an earlier snapshot because the watcher did not answer within "
               f"{FRESH_WAIT_S:g} s (a busy parser).\n# TYPE {fam} counter\n{name}_total{lab} {float(late)!r}\n"
               "# HELP vllmlog_watch_exporter_snapshot_age_seconds Age of the numbers this scrape shows (since the "
               "watcher built them).\n# TYPE vllmlog_watch_exporter_snapshot_age_seconds gauge\n"
               f"vllmlog_watch_exporter_snapshot_age_seconds{lab} {age!r}\n").encode()
        if om and body.endswith(b"# EOF\n"):
            return body[:-6] + own + b"# EOF\n"
        return body + own


def main(argv: list[str]) -> None:
    """The child program (see the module docstring for its arguments)."""
    fd, instance, timeout, max_conn = argv[:4]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the watcher; we end with its pipe
    sock = socket.socket(fileno=int(fd))
    answers = Answers(sys.stdout.buffer, instance)
    server = BoundedHTTPServer(answers.app, sock, timeout=float(timeout), max_connections=int(max_conn))
    server.start()
    try:
        answers.read_frames(sys.stdin.buffer)
    finally:
        server.shutdown()
        server.server_close()
        os._exit(0)  # no interpreter teardown racing the server's daemon threads


if __name__ == "__main__":
    main(sys.argv[1:])
