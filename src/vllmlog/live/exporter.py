"""The Prometheus exporter: a ``Collector`` over the live state, on its own ``CollectorRegistry``.

Metric families are built at scrape time from the state's counters (under its lock), so the
numbers a scrape shows are always consistent with each other. Names start with ``vllmlog_``;
``vllmlog_log_lines_total{level,kind}`` and ``vllmlog_requests_total{status}`` are fixed names
dashboards and tests rely on.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from .state import HISTOGRAMS, STATS_GAUGES, Histogram, LiveState

if TYPE_CHECKING:
    from .alerts import AlertEngine

#: Stats field → (gauge name, help).
_GAUGE_NAMES = {
    "running": ("vllmlog_num_requests_running", "Requests running on the engine (latest stats line)."),
    "waiting": ("vllmlog_num_requests_waiting", "Requests waiting to be scheduled (latest stats line)."),
    "swapped": ("vllmlog_num_requests_swapped", "Requests swapped to CPU (latest V0 stats line)."),
    "kv_cache_usage": ("vllmlog_kv_cache_usage_ratio", "KV-cache usage 0..1 (latest stats line)."),
    "prompt_throughput": ("vllmlog_prompt_throughput_tokens_per_second", "Average prompt throughput (latest stats line)."),
    "generation_throughput": ("vllmlog_generation_throughput_tokens_per_second", "Average generation throughput (latest stats line)."),
    "prefix_cache_hit_rate": ("vllmlog_prefix_cache_hit_ratio", "Prefix-cache hit rate 0..1 (latest stats line)."),
}
assert set(_GAUGE_NAMES) == set(STATS_GAUGES)


@dataclass
class Health:
    """The watcher's own health, updated by the watch loop."""

    lines_per_second: float = 0.0
    lag_bytes: int = 0
    last_line_time: float = 0.0
    """Wall-clock time (epoch s) the last line was read."""
    started: float = field(default_factory=time.time)
    rotations: int = 0
    truncations: int = 0
    bytes_read: int = 0
    lines_read: int = 0
    truncated_lines: int = 0
    invalid_utf8_lines: int = 0
    diagnose_runs: int = 0
    diagnose_errors: int = 0
    diagnose_seconds: float = 0.0
    """Duration of the last diagnosis."""
    source_open: bool = True
    errors: Counter[str] = field(default_factory=Counter)
    """Failures by stage (read, parse, spans, rules, notify, export): each stage fails alone, counted."""
    lines_failed: int = 0
    """Lines of batches the parse stage raised on (counted in ``vllmlog_watch_errors_total{stage="parse"}``)."""
    scrapes_stale: int = 0
    """Scrapes answered from the previous snapshot because the state was busy longer than ``SCRAPE_WAIT_S``."""


#: The stages of the live path, each isolated (``vllmlog_watch_errors_total{stage}``).
STAGES = ("read", "parse", "spans", "rules", "notify", "export")
SCRAPE_WAIT_S = 0.5
"""How long a scrape waits for the state's lock (a big batch being parsed) before it answers with the
previous snapshot: the exporter never stalls behind the parser."""


_Kind = type[CounterMetricFamily] | type[GaugeMetricFamily]


def _one(kind: _Kind, name: str, doc: str, inst: str, value: float) -> Metric:
    """A counter or gauge family with one sample, labelled by instance only."""
    fam = kind(name, doc, labels=["instance"])
    fam.add_metric([inst], value)
    return fam


def _family(kind: _Kind, name: str, doc: str, labels: list[str], samples: Iterable[tuple[list[str], float]]) -> Metric:
    """A counter or gauge family with `labels` and one sample per (label values, value), in the given order."""
    fam = kind(name, doc, labels=labels)
    for values, v in samples:
        fam.add_metric(values, v)
    return fam


class LiveCollector(Collector):
    """Builds every ``vllmlog_*`` family from a ``LiveState`` (plus alert state and health)."""

    def __init__(
        self,
        state: LiveState,
        *,
        instance: str = "",
        health: Health | None = None,
        alerts: AlertEngine | None = None,
        notifier_stats: Callable[[], dict[tuple[str, str], int]] | None = None,
        otlp: Callable[[], dict[str, dict[str, int]]] | None = None,
    ) -> None:
        self.otlp = otlp
        """Counters of the OTLP trace receiver (``--otlp-listen``), when it runs."""
        self.state = state
        self.instance = instance
        self.health = health or Health()
        self.alerts = alerts
        self.notifier_stats = notifier_stats
        self._last: list[Metric] = []
        self._last_lock = threading.Lock()

    def describe(self) -> list[Metric]:
        """Nothing up front: families appear as data arrives (avoids a collect at registration)."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Build the families (called by the registry on each scrape); the previous snapshot when the state
        stays busy longer than ``SCRAPE_WAIT_S`` or building fails (counted, never an HTTP 500)."""
        try:
            fams = list(self._build())
        except _Busy:
            self.health.scrapes_stale += 1
            with self._last_lock:
                fams = self._last
        except Exception:  # noqa: BLE001  (the exporter keeps serving)
            self.health.errors["export"] += 1
            with self._last_lock:
                fams = self._last
        else:
            with self._last_lock:
                self._last = fams
        return iter(fams)

    def _build(self) -> Iterator[Metric]:
        inst = self.instance
        s = self.state
        if not s.acquire_for_read(SCRAPE_WAIT_S):
            raise _Busy
        try:
            lines = dict(s.lines)
            unparsed = s.unparsed_lines
            requests = dict(s.requests)
            preempt = dict(s.preemptions)
            errors = dict(s.errors)
            http = dict(s.pipe.http_status)
            hists = {k: (h.buckets(), h.sum) for k, h in s.hist.items()}
            stats = list(s.stats.values())
            model = s.model
            inflight = s.inflight
            evicted = s.evicted
            last_log = s.last_log_ts
            events = s.events
            pending = s.pending_lines
            traced = s.traced_journeys
            servers = len(s.pipe.servers)
        finally:
            s.lock.release()

        yield _family(CounterMetricFamily, "vllmlog_log_lines",
                      "Log lines read, by level and event kind (every line exactly once).",
                      ["instance", "level", "kind"],
                      (([inst, level, kind], n) for (level, kind), n in sorted(lines.items())))
        yield _one(CounterMetricFamily, "vllmlog_unparsed_lines",
                   "Lines no pattern recognised (kind=unparsed).", inst, unparsed)
        yield _one(CounterMetricFamily, "vllmlog_events", "Log records (a multi-line traceback is one).", inst, events)
        yield _family(CounterMetricFamily, "vllmlog_requests", "Finished request journeys by final status.",
                      ["instance", "model", "status"],
                      (([inst, m, st], n) for (m, st), n in sorted(requests.items())))
        yield _family(CounterMetricFamily, "vllmlog_preemptions",
                      "Preemptions seen in the log (stats lines, V0 warnings).",
                      ["instance", "model"],
                      (([inst, m], n) for m, n in sorted(preempt.items())))
        yield _family(CounterMetricFamily, "vllmlog_errors", "Error records by category.",
                      ["instance", "model", "category"],
                      (([inst, m, cat], n) for (m, cat), n in sorted(errors.items())))
        yield _family(CounterMetricFamily, "vllmlog_http_responses", "HTTP access-log lines by status code.",
                      ["instance", "model", "code"],
                      (([inst, model, str(code)], n) for code, n in sorted(http.items())))
        yield _one(CounterMetricFamily, "vllmlog_inflight_evicted",
                   "In-flight requests dropped because the cap bit.", inst, evicted)
        yield _one(CounterMetricFamily, "vllmlog_server_starts",
                   "Server runs (starts and restarts) seen in the log.", inst, servers)

        g = GaugeMetricFamily("vllmlog_requests_in_flight", "Requests seen and not finished.", labels=["instance", "model"])
        g.add_metric([inst, model], inflight)
        yield g
        by_field: dict[str, GaugeMetricFamily] = {}
        for sg in stats:
            for k, v in sg.values.items():
                fam = by_field.get(k)
                if fam is None:
                    name, doc = _GAUGE_NAMES[k]
                    fam = by_field[k] = GaugeMetricFamily(name, doc, labels=["instance", "model", "engine"])
                fam.add_metric([inst, sg.model, sg.engine], v)
        yield from by_field.values()
        if stats:
            g = GaugeMetricFamily("vllmlog_stats_timestamp_seconds", "Log time of the latest stats line.",
                                  labels=["instance", "model", "engine"])
            for sg in stats:
                if sg.ts is not None:
                    g.add_metric([inst, sg.model, sg.engine], sg.ts.timestamp())
            yield g

        for name, edges in HISTOGRAMS.values():  # every family exists from the start (zero counts)
            if (name, model) not in hists:
                hists[(name, model)] = (Histogram(edges).buckets(), 0.0)
        fams: dict[str, HistogramMetricFamily] = {}
        for (name, m), (buckets, total) in sorted(hists.items()):
            fam = fams.get(name)
            if fam is None:
                fam = fams[name] = HistogramMetricFamily(f"vllmlog_{name}", _HIST_DOC.get(name, name),
                                                         labels=["instance", "model"])
            fam.add_metric([inst, m], buckets, total)
        yield from fams.values()

        if self.alerts is not None:
            yield from self._alert_families(inst)

        h = self.health
        yield _one(GaugeMetricFamily, "vllmlog_watch_lines_per_second",
                   "Lines read per second (recent average).", inst, h.lines_per_second)
        yield _one(GaugeMetricFamily, "vllmlog_watch_lag_bytes",
                   "Bytes written to the file and not read yet.", inst, h.lag_bytes)
        yield _one(GaugeMetricFamily, "vllmlog_watch_pending_lines",
                   "Lines read whose record is not complete yet.", inst, pending)
        yield _one(GaugeMetricFamily, "vllmlog_watch_last_line_time_seconds",
                   "Wall-clock time the last line was read.", inst, h.last_line_time)
        if last_log is not None:
            yield _one(GaugeMetricFamily, "vllmlog_watch_last_log_timestamp_seconds",
                       "Timestamp printed on the latest log line.", inst, last_log.timestamp())
        yield _one(GaugeMetricFamily, "vllmlog_watch_source_up",
                   "1 while the followed file or stream is open.", inst, 1.0 if h.source_open else 0.0)
        yield _one(CounterMetricFamily, "vllmlog_watch_lines_read", "Lines read from the input.", inst, h.lines_read)
        yield _one(CounterMetricFamily, "vllmlog_watch_bytes_read", "Bytes read from the input.", inst, h.bytes_read)
        c = CounterMetricFamily("vllmlog_watch_file_changes", "Rotations (new file) and truncations seen.",
                                labels=["instance", "change"])
        c.add_metric([inst, "rotated"], h.rotations)
        c.add_metric([inst, "truncated"], h.truncations)
        yield c
        c = CounterMetricFamily("vllmlog_watch_input_problems", "Over-long or invalid UTF-8 lines.", labels=["instance", "problem"])
        c.add_metric([inst, "truncated_line"], h.truncated_lines)
        c.add_metric([inst, "invalid_utf8"], h.invalid_utf8_lines)
        yield c
        yield _family(CounterMetricFamily, "vllmlog_watch_errors", "Failures of each stage of the live path "
                      "(read, parse, spans, rules, notify, export); a failing stage never stops the others.",
                      ["instance", "stage"], (([inst, st], h.errors.get(st, 0)) for st in STAGES))
        yield _one(CounterMetricFamily, "vllmlog_watch_stale_scrapes", "Scrapes answered with the previous "
                   "snapshot while a batch was being parsed.", inst, h.scrapes_stale)
        yield _one(CounterMetricFamily, "vllmlog_watch_diagnose_runs",
                   "Diagnosis passes over the live state.", inst, h.diagnose_runs)
        yield _one(CounterMetricFamily, "vllmlog_watch_diagnose_errors",
                   "Diagnosis passes that raised.", inst, h.diagnose_errors)
        yield _one(GaugeMetricFamily, "vllmlog_watch_diagnose_duration_seconds",
                   "Duration of the last diagnosis pass.", inst, h.diagnose_seconds)
        yield _one(GaugeMetricFamily, "vllmlog_watch_start_time_seconds", "When the watcher started.", inst, h.started)
        if self.otlp is not None:
            o = self.otlp()
            yield _family(CounterMetricFamily, "vllmlog_otlp_export_requests", "OTLP trace export requests received, "
                          "by result (ok, partial: some spans dropped, rejected).", ["instance", "result"],
                          (([inst, k], o["requests"].get(k, 0)) for k in ("ok", "partial", "rejected")))
            yield _family(CounterMetricFamily, "vllmlog_otlp_rejected", "OTLP payloads refused with a 400, by reason.",
                          ["instance", "reason"],
                          (([inst, k], o["rejected"].get(k, 0))
                           for k in ("malformed", "too_large", "content_type", "no_length")))
            yield _family(CounterMetricFamily, "vllmlog_otlp_spans", "Trace spans received, by type "
                          "(llm_request, other) and dropped (queue full).", ["instance", "type"],
                          (([inst, k], o["spans"].get(k, 0)) for k in ("llm_request", "other", "dropped")))
            yield _one(CounterMetricFamily, "vllmlog_traced_requests",
                       "Finished requests whose numbers came from an llm_request span.", inst, traced)
        if self.notifier_stats is not None:
            yield _family(CounterMetricFamily, "vllmlog_notifications", "Alert notifications by notifier and result.",
                          ["instance", "notifier", "result"],
                          (([inst, name, result], n) for (name, result), n in sorted(self.notifier_stats().items())))

    def _alert_families(self, inst: str) -> Iterator[Metric]:
        assert self.alerts is not None
        active, alerts = self.alerts.gauges()
        yield _family(GaugeMetricFamily, "vllmlog_findings_active",
                      "Findings the rules report now, by code and severity.",
                      ["instance", "code", "severity"],
                      (([inst, code, sev], n) for (code, sev), n in sorted(active.items())))
        yield _family(GaugeMetricFamily, "vllmlog_alerts", "Alerts by state (pending: waiting for its `for`; firing).",
                      ["instance", "code", "severity", "state"],
                      (([inst, code, sev, st], n) for (code, sev, st), n in sorted(alerts.items())))


_HIST_DOC = {
    "request_queue_time_seconds": "Time requests spent waiting before scheduling (from journeys).",
    "time_to_first_token_seconds": "Time to first token (from journeys).",
    "time_per_output_token_seconds": "Mean time per output token after the first (from journeys).",
    "e2e_request_latency_seconds": "End-to-end request latency (from journeys).",
}


def make_registry(collector: LiveCollector) -> CollectorRegistry:
    """A fresh registry holding only our collector (never the global one)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(collector)
    return reg


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` / ``[v6]:PORT`` / ``:PORT`` (→ 127.0.0.1) into (host, port)."""
    from ..errors import ConfigError

    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"--listen {listen!r}: expected HOST:PORT", hint="e.g. --listen 127.0.0.1:9464")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


class _Busy(Exception):
    """The state's lock was not free within ``SCRAPE_WAIT_S``."""


SOCKET_TIMEOUT_S = 5.0
"""A connection that sends no complete request within this time (or takes no response within it) is cut."""
BACKLOG = 128
"""Pending connections the kernel queues (the default 5 overflowed with 32 concurrent scrapers)."""
MAX_CONNECTIONS = 1024
"""Connections open at once; beyond, a new one is closed at once. An open connection costs a socket, not a
thread (one event-loop thread serves them all; two worker threads build responses)."""


def serve(registry: CollectorRegistry, listen: str) -> tuple[object, object]:
    """Start the HTTP endpoint (``/metrics``) in a daemon thread; return (server, thread).

    A bounded server (``live.httpserver``): one event-loop thread for every connection, a socket timeout
    (``SOCKET_TIMEOUT_S``), a backlog of ``BACKLOG``, at most ``MAX_CONNECTIONS`` open, scrapes that arrive
    together sharing one build; so idle half-open clients cost no thread and a burst of scrapers is queued,
    not refused."""
    from prometheus_client import make_wsgi_app

    from .httpserver import BoundedHTTPServer

    sock = _bind(listen)
    httpd = BoundedHTTPServer(make_wsgi_app(registry), sock, timeout=SOCKET_TIMEOUT_S, max_connections=MAX_CONNECTIONS)
    return httpd, httpd.start()


RESTART_S = 1.0
"""Seconds between attempts to start the exporter's process again after it died."""


class ExporterProcess:
    """``/metrics`` answered by a child process (``live.scrapeproc``) that this one feeds: a scrape never waits for
    the parser's GIL (a 1 MB line in a regex, a starved CPU), because the child has its own.

    The watcher binds the socket (so a bad ``--listen`` is one line here, and the port is known) and passes it to
    the child, which runs the bounded HTTP server on it; for each scrape the child asks, and a feeder thread here
    calls the same ``prometheus_client`` WSGI app on our registry and sends the answer back. A child that dies is
    counted (``vllmlog_watch_errors_total{stage="export"}``) and started again on the same socket; the child ends
    when this process does (its stdin closes). ``server_address``, ``server_port``, ``shutdown()`` and
    ``server_close()`` as ``BoundedHTTPServer`` has them; ``counters``: requests, builds, restarts."""

    def __init__(self, app: Callable[..., Iterable[bytes]], sock: object, *, instance: str = "",
                 health: Health | None = None, timeout: float = 5.0, max_connections: int = 1024) -> None:
        import socket

        assert isinstance(sock, socket.socket)
        self.app = app
        self.sock = sock
        self.instance = instance
        self.health = health or Health()
        self.timeout = timeout
        self.max_connections = max_connections
        self.server_address = sock.getsockname()
        self.server_port: int = self.server_address[1]
        self.counters = dict.fromkeys(("requests", "builds", "restarts"), 0)
        self.proc: Any = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._feed, name="vllmlog-exporter-feed", daemon=True)

    def start(self) -> threading.Thread:
        """Start the child and the feeder thread (the child accepts once it has started: connections queue in the
        backlog meanwhile)."""
        self.proc = self._spawn()
        self.thread.start()
        return self.thread

    def _spawn(self) -> Any:
        import os
        import subprocess
        import sys

        from . import scrapeproc

        live = os.path.dirname(os.path.abspath(scrapeproc.__file__))
        fd = self.sock.fileno()
        return subprocess.Popen(
            [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []),  # -P: no cwd on the child's path
             "-c", scrapeproc.BOOT, live, str(fd), self.instance, repr(self.timeout), str(self.max_connections)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(fd,), close_fds=True)

    def _feed(self) -> None:
        import json
        import logging
        import os

        from .httpserver import call_wsgi
        from .scrapeproc import FRAME, REQUEST

        log = logging.getLogger(__name__)
        buf = b""
        while not self._stop.is_set():
            proc = self.proc
            try:
                chunk = os.read(proc.stdout.fileno(), 1 << 16)  # blocks without the GIL
            except (OSError, ValueError):
                chunk = b""
            if not chunk:  # the child ended
                if self._stop.is_set():
                    break
                self.health.errors["export"] += 1
                log.warning("the exporter's process ended (exit status %s); starting it again", proc.poll())
                buf = b""
                self._reap(proc)
                while not self._stop.wait(RESTART_S):
                    try:
                        self.proc = self._spawn()
                        self.counters["restarts"] += 1
                        break
                    except OSError:
                        self.health.errors["export"] += 1
                continue
            buf += chunk
            wanted: dict[tuple[Any, ...], int] = {}  # request → the highest number asking for it (one build each)
            while len(buf) >= REQUEST.size:
                rid, n = REQUEST.unpack_from(buf)
                if len(buf) < REQUEST.size + n:
                    break
                try:
                    key = tuple(json.loads(buf[REQUEST.size:REQUEST.size + n]))
                except ValueError:
                    key = ()
                buf = buf[REQUEST.size + n:]
                self.counters["requests"] += 1
                if len(key) == 4 and all(isinstance(x, str) for x in key[:3]):
                    wanted[key] = max(rid, wanted.get(key, 0))
            for key, rid in wanted.items():
                self.counters["builds"] += 1
                try:
                    status, headers, body = call_wsgi(self.app, (*key, None), str(self.server_address[0]),  # type: ignore[arg-type]
                                                      self.server_port)
                except Exception:  # noqa: BLE001  (the exporter keeps serving)
                    self.health.errors["export"] += 1
                    status, headers, body = "500 Internal Server Error", [("Content-Type", "text/plain")], b"internal error\n"
                meta = json.dumps([list(key), status, headers]).encode()
                try:
                    proc.stdin.write(FRAME.pack(rid, time.time(), len(meta), len(body)) + meta + body)
                    proc.stdin.flush()
                except (OSError, ValueError):
                    break  # the child ended: the next read says so

    @staticmethod
    def _reap(proc: Any) -> None:
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            proc.wait(5)
        except Exception:  # noqa: BLE001
            proc.kill()

    def shutdown(self) -> None:
        """Stop the child (its stdin closes: it ends) and the feeder."""
        self._stop.set()
        proc = self.proc
        if proc is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(5)
            except Exception:  # noqa: BLE001
                proc.kill()
                proc.wait(5)
        if self.thread.is_alive():
            self.thread.join(5)
        if proc is not None:
            self._reap(proc)

    def server_close(self) -> None:
        """Close the listening socket."""
        self.sock.close()


def serve_process(registry: CollectorRegistry, listen: str, *, instance: str = "",
                  health: Health | None = None) -> tuple[ExporterProcess, threading.Thread]:
    """Like ``serve``, but the endpoint is answered by a child process (``ExporterProcess``): scrapes stay fast
    while the parser holds the GIL or the machine is starved of CPU. Raises ``ConfigError`` for a bad ``listen``."""
    from prometheus_client import make_wsgi_app

    sock = _bind(listen)
    ex = ExporterProcess(make_wsgi_app(registry), sock, instance=instance, health=health,
                         timeout=SOCKET_TIMEOUT_S, max_connections=MAX_CONNECTIONS)
    try:
        return ex, ex.start()
    except BaseException:
        sock.close()  # the caller may fall back to serving in-process on the same port
        raise


def _bind(listen: str) -> Any:
    from ..errors import ConfigError
    from .httpserver import bind

    host, port = parse_listen(listen)
    try:
        return bind(host, port, BACKLOG)
    except (OSError, OverflowError) as exc:
        msg = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot listen on {listen}: {msg}",
                          hint="pick a free port (port 0 picks one and reports it)") from None
