"""The exporter's own process: ``/metrics`` answered outside the parsing process (its own GIL, its own CPU share).

``watch`` parses in one process, and Python's regex engine holds the GIL while it scans a line: a scrape that
arrives then waits for it (on a loaded machine, over a second for a 1 MB line). So ``watch`` serves its endpoint
from this small child program, which imports nothing of the parser (only ``httpserver`` and the standard
library) and runs the same bounded HTTP server on the listening socket the watcher bound and passed to it.

Protocol (two pipes). For each scrape the child writes a request — ``!QI`` (its number, the
length) then JSON ``[method, path, query, Accept]`` — to its stdout. The watcher reads every request waiting,
calls its WSGI app (``prometheus_client``'s, on the watcher's registry) once per distinct request, and answers
each with a frame on the child's stdin — ``!QdII`` (the highest request number it answers, the wall time it
built at, the two lengths), JSON ``[request, status, headers]``, the body. A scrape waits up to ``FRESH_WAIT_S``
for the answer to its own number, so whenever the watcher is responsive the answer is built after the request
arrived, exactly as in-process; otherwise it gets the latest answer to the same request at once
(``vllmlog_watch_exporter_late_scrapes_total``), and ``vllmlog_watch_exporter_snapshot_age_seconds`` says how old
the numbers shown are. The child gzips (when asked) and exits when its stdin ends (the watcher stopped or died).
Everything a scrape does in the child runs on the HTTP server's event loop (the pipe is read there too): no hand-off
between threads, so a starved CPU has one thread to schedule per scrape, not three passing the GIL around.

    python -c BOOT LIVE_DIR FD INSTANCE TIMEOUT MAX_CONNECTIONS
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import signal
import socket
import struct
import sys
import time
from typing import Any, Callable, Iterable

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


class Answers(asyncio.Protocol):
    """The child's side, all on the HTTP server's event loop (no thread hand-off per scrape, so a starved CPU
    schedules one thread, not three handing the GIL around): asks the watcher to build each scrape's answer and
    keeps the latest per request."""

    def __init__(self, out_fd: int, instance: str) -> None:
        self.out_fd = out_fd
        self.instance = _escape(instance)
        self.latest: dict[Key, _Answer] = {}
        self.late = 0
        self.gone = False
        self.ended: asyncio.Future[None] | None = None
        self._asked = 0
        self._waiters: list[tuple[Key, int, asyncio.Future[None]]] = []
        self._buf = b""

    # -- the watcher's answers (an asyncio protocol on the read end of stdin)
    def data_received(self, data: bytes) -> None:
        """Frames from the watcher: keep the newest answer per request, wake the scrapes it answers."""
        self._buf += data
        while len(self._buf) >= FRAME.size:
            rid, built, nh, nb = FRAME.unpack_from(self._buf)
            if nh > MAX_FRAME or nb > MAX_FRAME:
                self.eof_received()
                return
            end = FRAME.size + nh + nb
            if len(self._buf) < end:
                return
            meta, body = self._buf[FRAME.size:FRAME.size + nh], self._buf[FRAME.size + nh:end]
            self._buf = self._buf[end:]
            key, status, headers = json.loads(meta)
            k: Key = (key[0], key[1], key[2], key[3])
            old = self.latest.get(k)
            if old is None or rid >= old[0]:
                self.latest[k] = (rid, built, status, [(str(a), str(b)) for a, b in headers], body)
            keep = []
            for w in self._waiters:
                if w[0] == k and w[1] <= rid:
                    if not w[2].done():
                        w[2].set_result(None)
                else:
                    keep.append(w)
            self._waiters = keep

    def eof_received(self) -> None:
        """The watcher's end of the pipe closed: answer what waits with what there is, then end."""
        self.gone = True
        for _k, _r, f in self._waiters:
            if not f.done():
                f.set_result(None)
        self._waiters = []
        if self.ended is not None and not self.ended.done():
            self.ended.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof_received()

    def _ask(self, key: Key) -> int:
        self._asked += 1
        data = json.dumps(list(key)).encode()
        try:
            os.write(self.out_fd, REQUEST.pack(self._asked, len(data)) + data)  # < PIPE_BUF: one atomic write
        except OSError:
            pass  # the watcher is gone: the latest answer is all there is
        return self._asked

    async def _wait(self, key: Key, rid: int, timeout: float) -> None:
        if self.gone:
            return
        f: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((key, rid, f))
        try:
            await asyncio.wait_for(f, timeout)
        except asyncio.TimeoutError:
            self._waiters = [w for w in self._waiters if w[2] is not f]

    async def answer(self, req: tuple[str, str, str, str | None, str | None]) -> tuple[str, list[tuple[str, str]], bytes]:
        """One scrape (the bounded server's ``async_app``): the watcher's answer if it comes in time, else the latest."""
        method, path, query, accept, encoding = req
        key: Key = (method, path, query, accept)
        rid = self._ask(key)
        await self._wait(key, rid, FRESH_WAIT_S)
        if key not in self.latest:
            await self._wait(key, 0, FIRST_WAIT_S)
        a = self.latest.get(key)
        if a is None:
            return "503 Service Unavailable", [("Content-Type", "text/plain")], b"the watcher has not answered yet\n"
        if a[0] < rid:
            self.late += 1
        _rid, built, status, headers, body = a
        ctype = next((v for h, v in headers if h.lower() == "content-type"), "")
        if status.startswith("200") and (ctype.startswith("text/plain") or ctype.startswith("application/openmetrics-text")):
            body = self._with_own(body, ctype.startswith("application/openmetrics-text"), self.late,
                                  max(0.0, time.time() - built))
        if body and any(e.split(";")[0].strip().lower() == "gzip" for e in (encoding or "").split(",")):
            body = gzip.compress(body)
            headers = headers + [("Content-Encoding", "gzip")]
        return status, headers, body

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


def _unused_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    raise RuntimeError("the exporter's process answers on its event loop (async_app)")


def main(argv: list[str]) -> None:
    """The child program (see the module docstring for its arguments)."""
    fd, instance, timeout, max_conn = argv[:4]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the watcher; we end with its pipe
    sock = socket.socket(fileno=int(fd))
    answers = Answers(sys.stdout.fileno(), instance)
    server = BoundedHTTPServer(_unused_app, sock, timeout=float(timeout), max_connections=int(max_conn),
                               async_app=answers.answer)
    server.start()
    loop = server._loop  # noqa: SLF001  (the server's own loop: every scrape and the pipe on one thread)

    async def follow() -> None:
        answers.ended = loop.create_future()
        await loop.connect_read_pipe(lambda: answers, sys.stdin.buffer)  # type: ignore[arg-type,return-value]
        await answers.ended

    try:
        asyncio.run_coroutine_threadsafe(follow(), loop).result()
    except Exception:  # noqa: BLE001  (the server's loop ended first: nothing left to serve)
        pass
    finally:
        server.shutdown()
        server.server_close()
        os._exit(0)  # no interpreter teardown racing the server's daemon thread


if __name__ == "__main__":
    main(sys.argv[1:])
