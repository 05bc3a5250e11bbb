"""The incident timeline: lifecycle, errors, metric turning points and findings in order."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from vllmlog.diagnose import diagnose
from vllmlog.errors import ConfigError
from vllmlog.run import load
from vllmlog.timeline import build_timeline, parse_around, parse_window

from .conftest import CORPUS


def _tl(path, **kw):
    run = load(str(path), year=2026)
    fs = diagnose(run)
    return run, fs, build_timeline(run, fs, **kw)


def test_hang_story_in_order() -> None:
    _, _, tl = _tl(next((CORPUS / "vllm-cpu-faults").glob("P2-*.log")))
    texts = [e.text for e in tl]
    ready = next(i for i, t in enumerate(texts) if "server ready" in t)
    collapse = next(i for i, t in enumerate(texts) if "throughput collapse" in t)
    gap = next(i for i, t in enumerate(texts) if "no stats line" in t)
    shm = next(i for i, e in enumerate(tl) if e.line == 774)
    assert ready < min(collapse, gap) and max(collapse, gap) < shm
    assert any(e.kind == "finding" and e.code == "E401" for e in tl)
    assert [e.ts for e in tl if e.ts] == sorted(e.ts for e in tl if e.ts)


def test_kv_and_queue_turning_points() -> None:
    _, _, tl = _tl(next((CORPUS / "incidents").glob("14-*.log")))
    texts = " | ".join(e.text for e in tl)
    assert "KV-cache usage 77.1% → 99.6%" in texts
    assert "Waiting 0 → 744" in texts
    assert "Running drops 256 → 189" in texts
    pre = [e for e in tl if "preempt" in e.text and e.kind == "warning"]
    assert pre and pre[0].count >= 3  # repeated preemption lines collapse into one entry


def test_crash_story() -> None:
    _, _, tl = _tl(next((CORPUS / "incidents").glob("23-*.log")))
    kinds = [(e.kind, e.text) for e in tl]
    assert any(k == "lifecycle" and t.startswith("crash") and "illegal memory access" in t for k, t in kinds)
    assert any("HTTP 500" in t and "×3" in t for _, t in kinds)


def test_healthy_has_no_errors() -> None:
    _, _, tl = _tl(next((CORPUS / "incidents").glob("43-*.log")))
    assert not [e for e in tl if e.kind in ("error", "finding") and e.severity in ("error", "critical")]


def test_window_filter() -> None:
    run, fs, full = _tl(next((CORPUS / "vllm-cpu-faults").glob("P2-*.log")))
    centre = datetime(2026, 11, 30, 3, 41, 40)
    part = build_timeline(run, fs, around=centre, window="1m")
    assert part and len(part) < len(full)
    assert all(abs((e.ts - centre).total_seconds()) <= 30 for e in part)


def test_parsers() -> None:
    assert parse_window("90s") == timedelta(seconds=90)
    assert parse_window("10m") == timedelta(minutes=10)
    assert parse_window("1h") == timedelta(hours=1)
    with pytest.raises(ConfigError):
        parse_window("soon")
    run = load(str(next((CORPUS / "incidents").glob("43-*.log"))), year=2026)
    assert parse_around("18:00:07", run) == datetime(2026, 5, 11, 18, 0, 7)
    assert parse_around("05-11 18:00:07", run) == datetime(2026, 5, 11, 18, 0, 7)
    with pytest.raises(ConfigError):
        parse_around("noon", run)


def test_to_dict() -> None:
    _, _, tl = _tl(next((CORPUS / "incidents").glob("07-*.log")))
    d = tl[0].to_dict()
    assert set(d) >= {"ts", "kind", "text", "file", "line", "severity", "count", "code"}


def _incidents(path):
    from vllmlog.diagnose import run_diagnosis

    run = load(str(path), year=2026)
    dg = run_diagnosis(run)
    return run, dg, build_timeline(run, dg.findings, incidents=dg.incidents)


def test_incidents_open_in_the_timeline_as_diagnose_names_them() -> None:
    """The timeline, diagnose and analyze share one diagnosis: each incident opens at its onset with its
    id, category and confidence; an incident still going on where the log ends gets no close entry."""
    _, dg, tl = _incidents(next((CORPUS / "incidents").glob("19-*.log")))
    inc = [e for e in tl if e.kind == "incident"]
    assert [e.data["incident"] for e in inc if e.data["phase"] == "open"] == [i.id for i in dg.incidents if i.onset]
    first = dg.incidents[0]
    opened = next(e for e in inc if e.data["incident"] == first.id)
    assert opened.ts == first.onset and first.category in opened.text and first.headline in opened.text
    assert first.trend != "recovered" and not any(e.data["phase"] == "close" for e in inc)
    # an incident entry sorts before a finding and other entries of the same moment
    same = [e for e in tl if e.ts == first.onset]
    assert same[0].kind == "incident"


def test_recovered_incident_closes() -> None:
    _, dg, tl = _incidents(CORPUS / "vllm-cpu" / "02-overload-queueing.log")
    inc = next(i for i in dg.incidents if i.trend == "recovered")
    close = [e for e in tl if e.kind == "incident" and e.data["incident"] == inc.id and e.data["phase"] == "close"]
    assert len(close) == 1 and close[0].ts == inc.end and "recovered after" in close[0].text


def test_timeline_cli_centres_on_an_incident_id(tmp_path) -> None:
    import json
    import subprocess
    import sys

    log = next((CORPUS / "incidents").glob("19-*.log"))
    r = subprocess.run([sys.executable, "-m", "vllmlog", "timeline", str(log), "--year", "2026", "--finding", "I1",
                        "--window", "2m", "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    kinds = [e["kind"] for e in doc["entries"]]
    assert "incident" in kinds and doc["window_s"] == 120
