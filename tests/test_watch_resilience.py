"""Issue 15 §5: the stages of the live path do not share one fate. A failing read, parse, rules or notify
stage is counted in ``vllmlog_watch_errors_total{stage}`` and the others go on; the exporter answers
through 300 idle half-open connections and 32 concurrent scrapers (one event-loop thread for every
connection, socket timeout, backlog 128, shared builds), and a scrape never waits behind a batch being
parsed (it gets the previous snapshot).
Loopback only."""

from __future__ import annotations

import socket
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from vllmlog.live import FileFollower, LiveCollector, LiveState, Watcher
from vllmlog.live.exporter import make_registry, serve

from .conftest import CORPUS

LIGHT = CORPUS / "vllm-cpu" / "01-startup-and-light-load.log"


def _errors(reg) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        if fam.name == "vllmlog_watch_errors":
            for s in fam.samples:
                out[s.labels["stage"]] = s.value
    return out


class _Boom:
    name = "boom"
    counts: dict = {}

    def send(self, t, ctx):
        raise RuntimeError("receiver down")

    def tick(self, firing, ctx, wall):
        raise RuntimeError("receiver down")

    def close(self, timeout):
        pass


def test_failing_stages_are_counted_and_isolated(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "s.log"
    lines = LIGHT.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:100]))
    st = LiveState(str(log), year=2026)

    def bad_rules(run):
        raise ValueError("a rule broke")

    w = Watcher(FileFollower(str(log)), st, evaluate=bad_rules, notifiers=[_Boom()])
    reg = make_registry(LiveCollector(st, health=w.health))
    assert _errors(reg) == {s: 0.0 for s in ("read", "parse", "spans", "rules", "notify", "export")}
    w.step()
    w.diagnose()
    # the parser chokes on one batch: counted, and the next batch is read and counted as usual
    real_feed = st.feed
    monkeypatch.setattr(st, "feed", lambda segs: (_ for _ in ()).throw(RuntimeError("parser bug")))
    with log.open("a") as fh:
        fh.write("".join(lines[100:110]))
    w.step()
    monkeypatch.setattr(st, "feed", real_feed)
    with log.open("a") as fh:
        fh.write("".join(lines[110:]))
    w.step()
    w.finish(eof=True)
    # the follower raising: counted
    monkeypatch.setattr(w.source, "poll", lambda: (_ for _ in ()).throw(OSError("EIO")))
    w.step()
    e = _errors(reg)
    assert e["rules"] >= 2 and e["parse"] == 1 and e["read"] == 1, e
    assert w.health.lines_failed == 10
    assert w.health.lines_read == len(lines)
    assert sum(st.lines.values()) == len(lines) - 10  # the failed batch is counted as failed, the rest exactly once
    assert generate_latest(reg)  # the exporter still builds


class _Spans:
    def drain(self):
        raise RuntimeError("span queue broke")


@pytest.mark.parametrize("stage", ["read", "parse", "spans", "rules", "notify", "export"])
def test_each_stage_fails_alone(tmp_path: Path, monkeypatch, stage: str) -> None:
    """One stage raising is counted under its own label only, and every line is still read and counted
    (the scrape too: the exporter answers with its previous snapshot)."""
    log = tmp_path / "s.log"
    lines = LIGHT.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:100]))
    st = LiveState(str(log), year=2026)
    fire = lambda run: [{"code": "E101", "severity": "error", "message": "x"}]  # noqa: E731
    w = Watcher(FileFollower(str(log)), st, evaluate=fire, notifiers=[],
                spans=_Spans() if stage == "spans" else None)
    col = LiveCollector(st, health=w.health)
    reg = make_registry(col)
    w.step()
    assert generate_latest(reg)
    if stage == "read":
        real_poll = w.source.poll
        monkeypatch.setattr(w.source, "poll", lambda: (_ for _ in ()).throw(OSError("EIO")))
    elif stage == "parse":
        real_feed = st.feed
        monkeypatch.setattr(st, "feed", lambda segs: (_ for _ in ()).throw(RuntimeError("parser bug")))
    elif stage == "rules":
        w.evaluate = lambda run: (_ for _ in ()).throw(ValueError("a rule broke"))
    elif stage == "notify":
        w.notifiers = [_Boom()]
    elif stage == "export":
        monkeypatch.setattr(col, "_build", lambda: (_ for _ in ()).throw(RuntimeError("collector bug")))
    with log.open("a") as fh:
        fh.write("".join(lines[100:110]))
    w.step()
    w.diagnose()
    text = generate_latest(reg)  # answered (the previous snapshot when the collector raised)
    assert b"vllmlog_log_lines_total" in text
    if stage == "read":
        monkeypatch.setattr(w.source, "poll", real_poll)
    elif stage == "parse":
        monkeypatch.setattr(st, "feed", real_feed)
    elif stage == "export":
        monkeypatch.undo()
    with log.open("a") as fh:
        fh.write("".join(lines[110:]))
    w.step()
    w.finish(eof=True)
    e = _errors(reg)
    assert e[stage] >= 1 and all(v == 0 for s, v in e.items() if s != stage), e
    assert w.health.lines_read == len(lines)
    failed = 10 if stage == "parse" else 0  # the batch the parser raised on is counted as failed
    assert w.health.lines_failed == failed and sum(st.lines.values()) == len(lines) - failed
    if stage != "rules":
        assert any(t.new == "firing" for t in w.transitions)  # the rules and alerts went on


def test_scrape_does_not_wait_behind_the_parser(tmp_path: Path) -> None:
    st = LiveState("x.log", year=2026)
    col = LiveCollector(st)
    reg = make_registry(col)
    first = generate_latest(reg)
    with st.lock:  # a long batch holds the state
        out: list[bytes] = []
        th = threading.Thread(target=lambda: out.append(generate_latest(reg)))
        th.start()
        th.join(10)
        assert not th.is_alive() and out and col.health.scrapes_stale == 1
    assert b"vllmlog_log_lines" in out[0] and len(out[0]) == len(first)


def _get(url: str, timeout: float = 30.0) -> int:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        r.read()
        return r.status


def _idle_clients(port: int, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):  # connect, send half a request line, never finish it
        s = socket.create_connection(("127.0.0.1", port), timeout=30)
        s.sendall(b"GET /metr")
        out.append(s)
    return out


def _wait(cond, what: str, limit: float = 30.0) -> None:
    """Wait for a condition (bounded), not for a guessed time."""
    import time

    end = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < end, what
        time.sleep(0.01)


def test_exporter_idle_half_open_clients_cost_no_thread_and_block_no_scrape(tmp_path: Path) -> None:
    st = LiveState("x.log", year=2026)
    before = threading.active_count()
    server, _ = serve(make_registry(LiveCollector(st)), "127.0.0.1:0")
    port = server.server_port  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{port}/metrics"
    idle: list[socket.socket] = []
    try:
        idle = _idle_clients(port, 300)
        _wait(lambda: server.open == 300, "the server holds the 300 idle connections")  # type: ignore[attr-defined]
        assert _get(url) == 200  # served while 300 connections sit idle
        with ThreadPoolExecutor(32) as ex:  # 32 concurrent scrapers (a backlog of 5 dropped them)
            codes = list(ex.map(lambda _: _get(url), range(64)))
        assert codes == [200] * 64
        # thread per connection held >= 300 threads here; the bounded server holds its loop and 2 workers
        assert threading.active_count() - before <= 3, threading.active_count() - before
        assert server.counters["timed_out"] == 0 and server.open >= 300  # type: ignore[attr-defined]
    finally:
        for s in idle:
            s.close()
        server.shutdown()  # type: ignore[attr-defined]
        server.server_close()  # type: ignore[attr-defined]
    assert threading.active_count() == before  # nothing left behind


def test_idle_clients_beyond_the_cap_make_room_for_a_scrape(monkeypatch) -> None:
    import vllmlog.live.exporter as ex

    monkeypatch.setattr(ex, "MAX_CONNECTIONS", 20)
    server, _ = serve(make_registry(LiveCollector(LiveState("x.log"))), "127.0.0.1:0")
    port = server.server_port  # type: ignore[attr-defined]
    idle: list[socket.socket] = []
    try:
        idle = _idle_clients(port, 20)
        _wait(lambda: server.open == 20, "20 idle connections fill the cap")  # type: ignore[attr-defined]
        assert _get(f"http://127.0.0.1:{port}/metrics") == 200  # the oldest idle one made room
        assert server.counters["evicted"] == 1 and server.counters["refused"] == 0  # type: ignore[attr-defined]
        idle[0].settimeout(30)
        assert idle[0].recv(100) == b""  # it was the oldest that was cut off
    finally:
        for s in idle:
            s.close()
        server.shutdown()  # type: ignore[attr-defined]


def test_scrapes_that_arrive_together_share_the_next_build() -> None:
    """A burst of scrapers costs two builds, each answer built after its request arrived."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import GaugeMetricFamily

    gate, entered = threading.Event(), threading.Event()
    builds = []

    class Slow:
        def collect(self):
            builds.append(1)
            entered.set()
            gate.wait(30)
            yield GaugeMetricFamily("x_builds", "builds so far", value=len(builds))

    reg = CollectorRegistry(auto_describe=False)
    reg.register(Slow())
    server, _ = serve(reg, "127.0.0.1:0")
    url = f"http://127.0.0.1:{server.server_port}/metrics"  # type: ignore[attr-defined]

    def body(_) -> str:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.read().decode()

    try:
        with ThreadPoolExecutor(17) as ex:
            first = ex.submit(body, 0)
            entered.wait(30)  # build 1 runs (blocked) for the first request
            rest = [ex.submit(body, i) for i in range(16)]
            _wait(lambda: server.counters["requests"] == 17, "16 more requests arrive during build 1")  # type: ignore[attr-defined]
            gate.set()
            assert "\nx_builds 1.0\n" in first.result()
            assert {f.result().split("\nx_builds ")[1].split()[0] for f in rest} == {"2.0"}
        assert server.counters["builds"] == 2 and len(builds) == 2  # type: ignore[attr-defined]
    finally:
        gate.set()
        server.shutdown()  # type: ignore[attr-defined]


def test_exporter_answers_garbage_with_400_and_keeps_serving() -> None:
    server, _ = serve(make_registry(LiveCollector(LiveState("x.log"))), "127.0.0.1:0")
    port = server.server_port  # type: ignore[attr-defined]
    try:
        for junk in (b"\x00\xff garbage\r\n\r\n", b"GET /metrics\r\n\r\n", b"GET / HTTP/1.0\r\nno colon\r\n\r\n",
                     b"GET /" + b"a" * 20000 + b" HTTP/1.0\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                s.sendall(junk)
                reply = b""
                while chunk := s.recv(4096):
                    reply += chunk
            assert reply.split(b"\r\n")[0] in (b"HTTP/1.1 400 Bad Request", b"HTTP/1.1 431 Request Header Fields Too Large")
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:  # raw HTTP/1.0, gzip, OpenMetrics
            s.sendall(b"GET /metrics?x=1 HTTP/1.0\r\nAccept: application/openmetrics-text; version=1.0.0\r\n"
                      b"Accept-Encoding: gzip\r\n\r\n")
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        head, _, payload = reply.partition(b"\r\n\r\n")
        import gzip

        assert head.startswith(b"HTTP/1.1 200 OK") and b"Content-Encoding: gzip" in head
        assert b"application/openmetrics-text" in head and gzip.decompress(payload).endswith(b"# EOF\n")
        assert _get(f"http://127.0.0.1:{port}/metrics") == 200
        assert server.counters["bad_request"] == 4  # type: ignore[attr-defined]
    finally:
        server.shutdown()  # type: ignore[attr-defined]


def test_exporter_closes_idle_connections(monkeypatch) -> None:
    import vllmlog.live.exporter as ex

    monkeypatch.setattr(ex, "SOCKET_TIMEOUT_S", 0.3)
    server, _ = serve(make_registry(LiveCollector(LiveState("x.log"))), "127.0.0.1:0")
    try:
        s = socket.create_connection(("127.0.0.1", server.server_port), timeout=30)  # type: ignore[attr-defined]
        s.sendall(b"GET /")
        s.settimeout(30)
        assert s.recv(100) == b""  # the server hung up on the idle client after its timeout
        s.close()
    finally:
        server.shutdown()  # type: ignore[attr-defined]
        server.server_close()  # type: ignore[attr-defined]
