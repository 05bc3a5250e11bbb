"""Issue 15 §5 / "no stall over 1 s of the exporter": ``watch`` answers ``/metrics`` from its own process.

The parser holds the GIL while a regex scans a line (a 1 MB line: long), and a starved CPU makes every thread of
the watcher wait; so the endpoint is served by a child process (``live.scrapeproc``) fed by the watcher. These
tests assert conditions, not timings: a watcher that cannot run at all (``SIGSTOP``) still answers scrapes with
its last numbers (and says they are late and how old); the answers are the in-process exporter's, byte for
byte; the child ends with the watcher and is started again if it dies; the endpoint binds 127.0.0.1 by default.
Scrape latency with a busy parser, as a ratio to the idle one: ``bench/bench_scrape_busy.py``."""

from __future__ import annotations

import gzip
import inspect
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from vllmlog.live.exporter import serve, serve_process

from .conftest import CORPUS

LOG = CORPUS / "vllm-cpu" / "01-startup-and-light-load.log"
OWN = re.compile(rb"# HELP vllmlog_watch_exporter_.*?(?=# EOF\n|\Z)", re.S)


def _wait(cond, what: str, limit: float = 60.0):
    end = time.monotonic() + limit
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < end, what
        time.sleep(0.05)


def _get(url: str, headers: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _scrape(url: str) -> str | None:
    try:
        return _get(url, timeout=5)[2].decode()
    except OSError:
        return None


def _value(body: str, name: str) -> float | None:
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", body, re.M)
    return float(m.group(1)) if m else None


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            out |= {int(c) for c in (t / "children").read_text().split()}
        except OSError:
            pass
    return out


def _alive(pid: int) -> bool:
    try:
        st = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return st.rsplit(")", 1)[1].split()[0] != "Z"


class _Static:
    def collect(self):
        c = CounterMetricFamily("demo_lines", "Lines.", labels=["instance", "kind"])
        c.add_metric(["x", "a\"b\\c"], 3)
        yield c
        yield GaugeMetricFamily("demo_gauge", "A gauge.", value=1.5)


@pytest.fixture
def watcher(tmp_path: Path):
    log = tmp_path / "a.log"
    log.write_text(LOG.read_text())
    p = subprocess.Popen([sys.executable, "-m", "vllmlog", "watch", str(log), "--listen", "127.0.0.1:0", "--no-stdout",
                          "--instance", "t"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "COLUMNS": "1000"})
    line = p.stderr.readline()  # "watching …; metrics: http://127.0.0.1:PORT/metrics; …"
    m = re.search(r"metrics: (http://\S+/metrics)", line)
    assert m, line
    url = m.group(1)
    n = sum(1 for _ in LOG.open())
    _wait(lambda: (b := _scrape(url)) and _value(b, "vllmlog_watch_lines_read_total") == n, "the watcher read the log")
    try:
        yield p, url, log, n
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            p.terminate()
            p.wait(30)
        p.stderr.close()


def test_a_stopped_watcher_still_answers_scrapes(watcher) -> None:
    p, url, log, n = watcher
    os.kill(p.pid, signal.SIGSTOP)  # the parsing process gets no CPU at all (the worst a busy GIL can do)
    try:
        st, _h, body = _get(url)
        assert st == 200
        text = body.decode()
        assert _value(text, "vllmlog_watch_lines_read_total") == n  # the last numbers it built
        assert _value(text, "vllmlog_watch_exporter_late_scrapes_total") >= 1  # and it says they are late
        assert _value(text, "vllmlog_watch_exporter_snapshot_age_seconds") > 0
    finally:
        os.kill(p.pid, signal.SIGCONT)
    with log.open("a") as f:  # running again: new lines show up in a later scrape
        f.write(LOG.read_text().splitlines(keepends=True)[0])
    _wait(lambda: (b := _scrape(url)) and _value(b, "vllmlog_watch_lines_read_total") == n + 1, "fresh numbers again")


def test_the_exporter_process_ends_with_the_watcher_and_comes_back_when_it_dies(watcher) -> None:
    p, url, _log, _n = watcher
    (child,) = _children(p.pid)
    os.kill(child, signal.SIGKILL)  # the exporter's process dies: counted, started again on the same socket
    _wait(lambda: (b := _scrape(url)) and (_value(b, 'vllmlog_watch_errors_total{instance="t",stage="export"}') or 0) >= 1,
          "a new exporter process answers and counts the death")
    (child2,) = _children(p.pid)
    assert child2 != child
    p.kill()  # the watcher dies without cleaning up: its pipe closes and the child ends
    p.wait(30)
    _wait(lambda: not _alive(child2), "the exporter's process ended with the watcher")


def test_answers_equal_the_in_process_exporter() -> None:
    """Same registry, both servers: the same status, content type and body for text, OpenMetrics, gzip,
    a filtered scrape and a POST (the child's own two families aside)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Static())
    a, _ = serve(reg, "127.0.0.1:0")
    b, _ = serve_process(reg, "127.0.0.1:0", instance='q"i')
    try:
        cases = [{}, {"Accept": "application/openmetrics-text; version=1.0.0"}, {"Accept-Encoding": "gzip"},
                 {"Accept": "application/openmetrics-text", "Accept-Encoding": "gzip"}]
        for hdr in cases:
            for path in ("/metrics", "/metrics?name[]=demo_gauge"):
                sa, ha, ba = _get(f"http://127.0.0.1:{a.server_port}{path}", hdr)  # type: ignore[attr-defined]
                sb, hb, bb = _get(f"http://127.0.0.1:{b.server_port}{path}", hdr)
                assert (sa, ha.get("Content-Type"), ha.get("Content-Encoding")) == \
                       (sb, hb.get("Content-Type"), hb.get("Content-Encoding")), (hdr, path)
                if hb.get("Content-Encoding") == "gzip":
                    ba, bb = gzip.decompress(ba), gzip.decompress(bb)
                assert b'vllmlog_watch_exporter_late_scrapes_total{instance="q\\"i"}' in bb
                assert OWN.sub(b"", bb) == ba, (hdr, path)
        with socket.create_connection(("127.0.0.1", b.server_port), timeout=30) as s:
            s.sendall(b"POST /metrics HTTP/1.0\r\n\r\n")
            reply = b""
            while chunk := s.recv(4096):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 405")
    finally:
        a.shutdown()  # type: ignore[attr-defined]
        a.server_close()  # type: ignore[attr-defined]
        b.shutdown()
        b.server_close()
    assert b.proc.poll() is not None  # the child ended


def test_exporter_binds_loopback_by_default() -> None:
    from vllmlog.cli.watch_cmd import watch_cmd

    params = inspect.signature(watch_cmd).parameters
    assert params["listen"].default.default == "127.0.0.1:9464"
    assert params["exporter"].default.default == "process"
    reg = CollectorRegistry(auto_describe=False)
    b, _ = serve_process(reg, ":0")  # no host: loopback, never all interfaces
    try:
        assert b.server_address[0] == "127.0.0.1"
    finally:
        b.shutdown()
        b.server_close()
