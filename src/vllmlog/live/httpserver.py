"""A bounded HTTP/1.x server for a WSGI app (the exporter's ``/metrics``): connections cost no thread.

One event-loop thread holds every connection; a pool of ``workers`` threads calls the app. A client must
send its request head within ``timeout`` seconds and take its response within as long, else it is cut off;
at most ``max_connections`` are open at once: a new one beyond evicts the oldest connection still sending
its request head (so idle sockets cannot lock scrapers out), or is closed at once when none is. Idle or half-open
clients therefore cost a socket and a small buffer, never a thread (the thread-per-connection server held
one thread per idle client for up to 5 s). Requests that arrive while a response of the same kind is being
built share the *next* build: a burst of 32 scrapers costs two builds, not 32, and every response is built
after its request arrived. One request per connection (``Connection: close``), as wsgiref served it.
"""

from __future__ import annotations

import asyncio
import io
import logging
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Iterable
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_Key = tuple[str, str, str, str | None, str | None]
_Response = tuple[str, list[tuple[str, str]], bytes]
AsyncApp = Callable[[_Key], Awaitable[_Response]]

MAX_HEAD = 16 * 1024
"""Largest request head (request line and headers) accepted; longer: 431 and closed."""


class BoundedHTTPServer:
    """Serve ``app`` on a bound listening socket from one daemon thread; ``shutdown()`` stops it.

    ``server_address`` / ``server_port`` as socketserver's servers have them; ``counters`` (requests,
    served, builds, refused, evicted, timed_out, bad_request, app_error) are read by tests and benchmarks."""

    def __init__(self, app: App, sock: socket.socket, *, timeout: float, max_connections: int, workers: int = 2,
                 async_app: AsyncApp | None = None) -> None:
        self.app = app
        self.async_app = async_app
        """Called on the event loop instead of ``app`` on a worker (no thread hand-off: the exporter's process)."""
        self.sock = sock
        self.timeout = timeout
        self.max_connections = max_connections
        self.server_address = sock.getsockname()
        self.server_port: int = self.server_address[1]
        self.counters = dict.fromkeys(("requests", "served", "builds", "refused", "evicted", "timed_out",
                                       "bad_request", "app_error"), 0)
        self.open = 0
        """Connections open now."""
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vllmlog-exporter-app")
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._idle: dict[asyncio.StreamWriter, None] = {}
        """Connections still sending their request head, oldest first (evicted first when full)."""
        self._pending: dict[_Key, asyncio.Future[_Response]] = {}
        self._running: dict[_Key, asyncio.Future[_Response]] = {}
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="vllmlog-exporter", daemon=True)

    # ------------------------------------------------------------------ life cycle
    def start(self) -> threading.Thread:
        """Start serving in the daemon thread (returns it once the loop accepts connections)."""
        self.thread.start()
        self._ready.wait(10)
        return self.thread

    def shutdown(self) -> None:
        """Stop accepting, cut every open connection, and wait for the thread to end."""
        if self.thread.is_alive() and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self.thread.join(10)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def server_close(self) -> None:
        """Close the listening socket (done by ``shutdown`` already; harmless twice)."""
        self.sock.close()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._connection, sock=self.sock, limit=MAX_HEAD)
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for w in list(self._writers):
                w.transport.abort()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ one connection
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open >= self.max_connections:
            if not self._idle:  # every connection has sent its request: refuse the new one
                self.counters["refused"] += 1
                writer.transport.abort()
                return
            oldest = next(iter(self._idle))  # the oldest still sending its head makes room: scrapes get in
            self._idle.pop(oldest)
            self.counters["evicted"] += 1
            oldest.transport.abort()
        self.open += 1
        self._writers.add(writer)
        self._idle[writer] = None
        writer.transport.set_write_buffer_limits(high=0)  # drain() waits until the kernel has it all
        cut = True
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.timeout)
            except asyncio.LimitOverrunError:
                self.counters["bad_request"] += 1
                await self._send(writer, ("431 Request Header Fields Too Large", [], b""))
                return
            finally:
                self._idle.pop(writer, None)
            self.counters["requests"] += 1
            key = _request_key(head)
            if key is None:
                self.counters["bad_request"] += 1
                await self._send(writer, ("400 Bad Request", [("Content-Type", "text/plain")], b"bad request\n"))
                return
            resp = await asyncio.shield(self._flight(key))
            await self._send(writer, resp)
            self.counters["served"] += 1
            cut = False
        except asyncio.TimeoutError:
            self.counters["timed_out"] += 1
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass  # a client that hung up is not an error of ours
        except asyncio.CancelledError:
            pass  # shutdown: the connection ends with the loop (re-raising makes asyncio log each one)
        finally:
            self.open -= 1
            self._writers.discard(writer)
            if cut:  # timed out, refused or hung up: no lingering for a client that reads nothing
                writer.transport.abort()
            else:
                writer.close()

    async def _send(self, writer: asyncio.StreamWriter, resp: _Response) -> None:
        status, headers, body = resp
        out = [f"HTTP/1.1 {status}"]
        out += [f"{k}: {v}" for k, v in headers if k.lower() not in ("content-length", "connection")]
        out += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
        writer.write("\r\n".join(out).encode("latin-1") + body)
        await asyncio.wait_for(writer.drain(), self.timeout)

    # ------------------------------------------------------------------ shared builds
    def _flight(self, key: _Key) -> asyncio.Future[_Response]:
        """The build this request gets: the one not started yet for ``key``, or a new one."""
        f = self._pending.get(key)
        if f is None:
            f = self._pending[key] = self._loop.create_future()
            f.add_done_callback(lambda fut: fut.cancelled() or fut.exception())  # retrieved even if nobody waits
            self._loop.create_task(self._lead(key, f))
        return f

    async def _lead(self, key: _Key, f: asyncio.Future[_Response]) -> None:
        prev = self._running.get(key)
        if prev is not None:  # requests that arrive during a build wait for it to end, then share the next
            await asyncio.wait({prev})
        del self._pending[key]
        if self.async_app is not None:
            run: asyncio.Future[_Response] = asyncio.ensure_future(self.async_app(key))
        else:
            run = asyncio.wrap_future(self._pool.submit(self._call, key), loop=self._loop)
        self._running[key] = run
        self.counters["builds"] += 1
        try:
            f.set_result(await run)
        except Exception:  # noqa: BLE001  (the server keeps serving)
            log.debug("exporter app failed", exc_info=True)
            self.counters["app_error"] += 1
            f.set_result(("500 Internal Server Error", [("Content-Type", "text/plain")], b"internal error\n"))
        finally:
            if self._running.get(key) is run:
                del self._running[key]

    def _call(self, key: _Key) -> _Response:
        return call_wsgi(self.app, key, str(self.server_address[0]), self.server_port)


def call_wsgi(app: App, key: _Key, host: str, port: int) -> _Response:
    """Call a WSGI app for a request key (method, path, query, Accept, Accept-Encoding): (status, headers, body)."""
    method, path, query, accept, encoding = key
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, "SERVER_PROTOCOL": "HTTP/1.1",
        "SERVER_NAME": host, "SERVER_PORT": str(port), "SCRIPT_NAME": "",
        "wsgi.input": io.BytesIO(b""), "wsgi.errors": io.StringIO(), "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0), "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
    }
    if accept is not None:
        environ["HTTP_ACCEPT"] = accept
    if encoding is not None:
        environ["HTTP_ACCEPT_ENCODING"] = encoding
    started: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: object = None) -> Callable[[bytes], None]:
        started[:] = [status, headers]
        return lambda data: None

    body = b"".join(app(environ, start_response))
    return started[0], list(started[1]), body


def _request_key(head: bytes) -> _Key | None:
    """(method, path, query, Accept, Accept-Encoding) of a request head, or None when it is not HTTP/1.x."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[0].isalpha():
        return None
    method, target = parts[0], parts[1]
    try:
        u = urlsplit(target)
    except ValueError:
        return None
    headers: dict[str, str] = {}
    for ln in lines[1:]:
        if not ln:
            continue
        name, sep, value = ln.partition(":")
        if not sep or not name or name != name.strip():
            return None
        headers.setdefault(name.lower(), value.strip())
    return method, u.path or "/", u.query, headers.get("accept"), headers.get("accept-encoding")


def bind(host: str, port: int, backlog: int) -> socket.socket:
    """A listening TCP socket on (host, port) (IPv6 when the host has a colon); raises OSError/OverflowError."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=backlog)
