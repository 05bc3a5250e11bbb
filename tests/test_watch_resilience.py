"""Issue 15 §5: the stages of the live path do not share one fate. A failing read, parse, rules or notify
stage is counted in ``vllmlog_watch_errors_total{stage}`` and the others go on; the exporter answers
through 300 idle half-open connections and 32 concurrent scrapers (thread per connection, socket timeout,
backlog 128), and a scrape never waits behind a batch being parsed (it gets the previous snapshot).
Loopback only."""

from __future__ import annotations

import socket
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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


def _get(url: str, timeout: float = 10.0) -> int:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        r.read()
        return r.status


def test_exporter_survives_idle_half_open_clients_and_a_burst(tmp_path: Path) -> None:
    st = LiveState("x.log", year=2026)
    server, _ = serve(make_registry(LiveCollector(st)), "127.0.0.1:0")
    port = server.server_port  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{port}/metrics"
    idle = []
    try:
        for _ in range(300):  # connect, send half a request line, never finish it
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /metr")
            idle.append(s)
        assert _get(url) == 200  # served while 300 connections sit idle
        with ThreadPoolExecutor(32) as ex:  # 32 concurrent scrapers (a backlog of 5 dropped them)
            codes = list(ex.map(lambda _: _get(url), range(64)))
        assert codes == [200] * 64
        before = threading.active_count()
        assert before >= 300  # each idle client holds a thread …
        import time

        t0 = time.monotonic()
        while threading.active_count() > before - 290 and time.monotonic() - t0 < 30:
            time.sleep(0.1)
        assert threading.active_count() <= before - 290  # … until the socket timeout releases it
        assert _get(url) == 200
    finally:
        for s in idle:
            s.close()
        server.shutdown()  # type: ignore[attr-defined]
        server.server_close()  # type: ignore[attr-defined]


def test_exporter_closes_idle_connections(monkeypatch) -> None:
    import vllmlog.live.exporter as ex

    monkeypatch.setattr(ex, "SOCKET_TIMEOUT_S", 0.3)
    server, _ = serve(make_registry(LiveCollector(LiveState("x.log"))), "127.0.0.1:0")
    try:
        s = socket.create_connection(("127.0.0.1", server.server_port), timeout=5)  # type: ignore[attr-defined]
        s.sendall(b"GET /")
        s.settimeout(5)
        assert s.recv(100) == b""  # the server hung up on the idle client after its timeout
        s.close()
    finally:
        server.shutdown()  # type: ignore[attr-defined]
        server.server_close()  # type: ignore[attr-defined]
