"""`vllm serve … 2>&1 | vllmlog watch -`: the stream path, through the CLI and through the library."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from vllmlog.diagnose import diagnose
from vllmlog.live.alerts import AlertConfig, AlertEngine
from vllmlog.live.exporter import LiveCollector, make_registry
from vllmlog.live.follow import StreamFollower
from vllmlog.live.notify import StreamNotifier
from vllmlog.live.state import LiveState
from vllmlog.live.watch import Watcher, default_evaluator
from vllmlog.run import load

from .conftest import CORPUS

CASES = [
    CORPUS / "vllm-cpu-faults" / "P1-engine-dead-kill9.log",
    CORPUS / "vllm-cpu" / "06e-startup-fail-port-in-use.log",
    CORPUS / "vllm-cpu" / "02-overload-queueing.log",
]


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_cli_stdin_alerts_match_diagnose(path: Path) -> None:
    expected = {f.code for f in diagnose(load(str(path)))}
    r = subprocess.run(
        [sys.executable, "-m", "vllmlog", "watch", "-", "--listen", "off", "--exit-at-eof", "--instance", "x"],
        input=path.read_bytes(), capture_output=True, timeout=60,
    )
    assert r.returncode == 0, r.stderr.decode()
    alerts = [json.loads(x)["alert"] for x in r.stdout.decode().splitlines() if '"firing"' in x]
    assert {a["code"] for a in alerts} == expected
    # an alert is an incident of the same diagnosis `diagnose` prints: its id, headline and fixes
    from vllmlog.diagnose import run_diagnosis

    incidents = {i.alert_code: i for i in run_diagnosis(load(str(path))).incidents}
    # an alert fires as soon as its incident shows: when the pipe delivered the log in parts (a loaded machine),
    # the counts in its headline ('(4 requests failed)') and whether the queue had drained yet are those of the
    # part read by then, the rest is the same
    counts = lambda h: re.sub(r", then drained", "", re.sub(r" \(\d[^)]*\)", "", h))  # noqa: E731
    for a in alerts:
        inc = incidents[a["code"]]
        assert (a["incident"], counts(a["message"]), a["severity"]) == (inc.id, counts(inc.headline), inc.severity.label)
        # (and the numbers its advice quotes — how many requests the KV cache holds of the mix seen so far)
        digits = lambda xs: [re.sub(r"\d[\d,.]*", "#", x) for x in xs]  # noqa: E731
        assert digits(a["remediation"]) == digits(inc.fixes)


def test_library_stream_watcher_counts_and_alerts() -> None:
    src = CASES[0]
    data = src.read_bytes()
    rfd, wfd = os.pipe()

    def writer() -> None:  # the server writes in bursts
        for i in range(0, len(data), 8191):
            os.write(wfd, data[i : i + 8191])
            time.sleep(0.001)
        os.close(wfd)

    import io

    buf = io.StringIO()
    state = LiveState("-", year=2026)
    engine = AlertEngine(AlertConfig())
    w = Watcher(StreamFollower(rfd), state, engine=engine, notifiers=[StreamNotifier(buf)],
                evaluate=default_evaluator(), instance="lib", poll_interval=0.05)
    th = threading.Thread(target=writer)
    th.start()
    w.run(threading.Event(), exit_at_eof=True)
    th.join()
    os.close(rfd)
    n = data.count(b"\n")
    assert state.lines_counted == n == w.health.lines_read
    run = load(str(src), year=2026)
    from collections import Counter

    assert Counter({s: c for (_, s), c in state.requests.items()}) == Counter(j.status for j in run.journeys)
    assert [json.loads(x)["alert"]["code"] for x in buf.getvalue().splitlines()] == ["E403"]
    text = __import__("prometheus_client").generate_latest(make_registry(LiveCollector(state, instance="lib", alerts=engine))).decode()
    assert 'vllmlog_findings_active{code="E403",instance="lib",severity="critical"} 1.0' in text
    assert 'vllmlog_requests_total{instance="lib",model="/models/tiny",status="error"} 8.0' in text


def test_cli_bad_config_and_bad_listen_fail_cleanly(tmp_path: Path) -> None:
    bad = tmp_path / "alerts.toml"
    bad.write_text('[alerts]\nfor = "soon"\n')
    r = subprocess.run([sys.executable, "-m", "vllmlog", "watch", "-", "--config", str(bad), "--listen", "off"],
                       input=b"", capture_output=True, timeout=60)
    assert r.returncode == 2 and b"error: " in r.stderr and b"duration" in r.stderr
    r = subprocess.run([sys.executable, "-m", "vllmlog", "watch", "-", "--listen", "localhost"],
                       input=b"", capture_output=True, timeout=60)
    assert r.returncode == 2 and b"HOST:PORT" in r.stderr
    r = subprocess.run([sys.executable, "-m", "vllmlog", "watch", str(tmp_path)], capture_output=True, timeout=60)
    assert r.returncode == 2 and b"is a directory" in r.stderr
