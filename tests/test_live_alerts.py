"""Alert state machine (for / clear hysteresis, staleness, config) and notifiers (stdout, webhook)."""

from __future__ import annotations

import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from vllmlog.errors import ConfigError
from vllmlog.live.alerts import AlertConfig, AlertEngine, parse_duration
from vllmlog.live.notify import AlertmanagerNotifier, StreamNotifier, WebhookNotifier, sign

T0 = 1_800_000_000.0


def _f(code: str = "K202", severity: str = "warning", last: float | None = None) -> dict[str, Any]:
    from datetime import datetime

    return {
        "code": code, "rule": "kv-cache-pressure", "category": "kv_cache", "severity": severity,
        "title": "KV cache saturated", "message": "KV cache ≥ 90% for 3 intervals",
        "evidence": [{"file": "a.log", "line": 7, "text": "Engine 000: … KV cache usage: 100.0%"}],
        "last_seen": datetime.fromtimestamp(last).isoformat() if last is not None else None,
    }


def _states(ts) -> list[tuple[str, str, str]]:
    return [(t.alert.code, t.old, t.new) for t in ts]


def test_for_duration_then_fire_then_hysteresis_then_resolve() -> None:
    eng = AlertEngine(AlertConfig(for_s=10, clear_s=30))
    assert _states(eng.update([_f()], T0)) == [("K202", "inactive", "pending")]
    assert eng.update([_f()], T0 + 5) == []
    assert _states(eng.update([_f()], T0 + 10)) == [("K202", "pending", "firing")]
    # flapping: absent for less than clear_for, back again → no transition
    assert eng.update([], T0 + 15) == []
    assert eng.update([_f()], T0 + 40) == []
    assert eng.update([], T0 + 45) == []
    assert eng.update([], T0 + 70) == []
    assert _states(eng.update([], T0 + 75)) == [("K202", "firing", "resolved")]
    assert eng.alerts == {}
    # a pending alert that goes away never fires and is dropped quietly
    eng.update([_f("X1")], T0 + 100)
    assert eng.update([], T0 + 101) == [] and eng.alerts == {}


def test_zero_for_fires_at_once_and_stale_findings_clear() -> None:
    eng = AlertEngine(AlertConfig(for_s=0, clear_s=0, stale_after_s=60))
    assert _states(eng.update([_f(last=T0)], T0 + 1)) == [("K202", "inactive", "firing")]
    assert eng.update([_f(last=T0)], T0 + 50) == []
    # a silent log (dead server): the wall-advanced clock moves, the log's own does not → still firing
    assert eng.update([_f(last=T0)], T0 + 600, log_time=T0 + 1) == []
    # the rule still reports it, but the log moved on without new evidence for longer than stale_after
    assert _states(eng.update([_f(last=T0)], T0 + 601, log_time=T0 + 61)) == [("K202", "firing", "resolved")]


def test_config_toml_overrides_and_severity_filter(tmp_path: Path) -> None:
    p = tmp_path / "alerts.toml"
    p.write_text(
        '[alerts]\nfor = "2s"\nclear_for = "1m"\nmin_severity = "warning"\n'
        '[alerts.codes.K202]\nfor = 0\n[alerts.codes.Q1]\nenabled = false\n'
        '[watch]\ndiagnose_interval = "500ms"\nmax_inflight = 7\n'
    )
    cfg = AlertConfig.load(p)
    assert (cfg.for_s, cfg.clear_s, cfg.diagnose_interval_s, cfg.max_inflight) == (2.0, 60.0, 0.5, 7)
    eng = AlertEngine(cfg)
    out = eng.update([_f("K202"), _f("Q1"), _f("I9", severity="info"), _f("S1", severity="critical")], T0)
    assert _states(out) == [("K202", "inactive", "firing"), ("S1", "inactive", "pending")]
    act, _ = eng.gauges()
    assert act[("I9", "info")] == 1  # below min_severity: exported as a finding, not alerted
    (tmp_path / "bad.toml").write_text("[alerts]\nfour = 1\n")
    with pytest.raises(ConfigError):
        AlertConfig.load(tmp_path / "bad.toml")
    assert parse_duration("250ms") == 0.25 and parse_duration("2m") == 120.0


def test_stdout_notifier_writes_one_json_line_per_change() -> None:
    buf = io.StringIO()
    n = StreamNotifier(buf)
    eng = AlertEngine(AlertConfig(for_s=0, clear_s=0))
    for t in eng.update([_f()], T0) + eng.update([], T0 + 1):
        n.send(t, {"instance": "i", "model": "m"})
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert [x["state"] for x in lines] == ["firing", "resolved"]
    assert lines[0]["alert"]["code"] == "K202" and lines[0]["instance"] == "i"
    assert lines[0]["alert"]["evidence"][0]["line"] == 7


class _Recorder(BaseHTTPRequestHandler):
    fail_first = 0
    got: list[tuple[str, dict[str, str], bytes]] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        cls = type(self)
        if cls.fail_first > 0:
            cls.fail_first -= 1
            self.send_response(503)
            self.end_headers()
            return
        cls.got.append((self.path, dict(self.headers), body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a: Any) -> None:
        pass


@pytest.fixture
def receiver():
    class H(_Recorder):
        fail_first = 2
        got: list = []

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", H
    srv.shutdown()


def _wait(cond, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_webhook_retries_with_backoff_and_signs(receiver, monkeypatch) -> None:
    url, H = receiver
    monkeypatch.setenv("VLLMLOG_TEST_SECRET", "s3cret")
    monkeypatch.setenv("VLLMLOG_TEST_TOKEN", "tok")
    wh = WebhookNotifier(url + "/hook", hmac_env="VLLMLOG_TEST_SECRET", token_env="VLLMLOG_TEST_TOKEN", backoff_s=0.05)
    eng = AlertEngine(AlertConfig(for_s=0))
    t0 = time.monotonic()
    for t in eng.update([_f()], T0):
        wh.send(t, {"instance": "i"})
    assert time.monotonic() - t0 < 0.05  # never blocks the caller
    _wait(lambda: wh.counts["sent"] == 1)
    path, headers, body = H.got[0]
    assert path == "/hook"
    assert headers["X-Vllmlog-Signature"] == "sha256=" + sign(b"s3cret", body)
    assert headers["Authorization"] == "Bearer tok"
    assert json.loads(body)["alert"]["code"] == "K202"
    assert wh.counts["retried"] == 2 and wh.counts["sent"] == 1
    wh.close(1)


def test_alertmanager_payload_shape(receiver) -> None:
    url, H = receiver
    H.fail_first = 0
    am = AlertmanagerNotifier(url, resend_s=60)
    eng = AlertEngine(AlertConfig(for_s=0, clear_s=0))
    for t in eng.update([_f()], T0) + eng.update([], T0 + 1):
        am.send(t, {"instance": "i", "model": "m"})
    _wait(lambda: am.counts["sent"] == 2)
    (p1, _, b1), (_, _, b2) = H.got
    assert p1 == "/api/v2/alerts"
    a1, a2 = json.loads(b1)[0], json.loads(b2)[0]
    assert a1["labels"] == {"alertname": "vllmlog_K202", "code": "K202", "severity": "warning", "source": "vllmlog",
                            "instance": "i", "model": "m", "rule": "kv-cache-pressure", "category": "kv_cache"}
    assert a1["annotations"]["summary"] == "KV cache saturated"
    assert a1["endsAt"] > a1["startsAt"] and a2["endsAt"] <= a1["endsAt"]
    am.close(1)
