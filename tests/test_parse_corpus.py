"""Every line of every real log becomes exactly one event; key lines get their typed kinds."""

from __future__ import annotations

from collections import Counter

import pytest

from vllmlog.reader import ParseStats, parse

from .conftest import CORPUS, corpus_logs


def _wc_l(path) -> int:
    data = path.read_bytes()
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


@pytest.mark.parametrize("path", corpus_logs(), ids=lambda p: p.name)
def test_every_line_is_accounted_for(path):
    st = ParseStats()
    events = list(parse(str(path), year=2026, stats=st))
    assert st.lines == _wc_l(path)
    covered = []
    for e in events:
        assert 1 <= e.line <= e.line_end
        covered.extend(range(e.line, e.line_end + 1))
    assert sorted(covered) == list(range(1, st.lines + 1)), "a line is lost or counted twice"
    assert st.lines_in_events == st.lines


def _kinds(rel: str) -> Counter:
    return Counter(e.kind for e in parse(str(CORPUS / rel), year=2026))


def test_v1_light_load_kinds():
    k = _kinds("vllm-cpu/01-startup-and-light-load.log")
    assert k["request_received"] == 50
    assert k["request_added"] == 50
    assert k["engine_stats"] >= 3
    assert k["server_ready"] == 1
    assert k["engine_config"] == 1
    assert k["http_access"] >= 50


def test_v1_stats_fields():
    evs = [e for e in parse(str(CORPUS / "vllm-cpu/02-overload-queueing.log"), year=2026) if e.kind == "engine_stats"]
    assert evs
    f = evs[1].fields
    assert f["engine"] == 0
    assert f["running"] == 4
    assert 0.0 <= f["kv_cache_usage"] <= 1.0
    assert f["kv_device"] == "CPU"
    assert "swapped" not in f
    assert evs[1].process.startswith("APIServer pid=")
    assert evs[1].source == "loggers.py:271" or evs[1].source.endswith(".py:" + evs[1].source.split(":")[-1])


def test_v0_stats_pending_is_waiting():
    evs = [e for e in parse(str(CORPUS / "incidents/14-v0-1000-concurrent-preemption-thrash.log"), year=2026) if e.kind == "engine_stats"]
    assert evs[0].fields["waiting"] == 744
    assert evs[0].fields["swapped"] == 0
    assert evs[0].fields["kv_cache_usage"] == pytest.approx(0.034)
    assert evs[0].fields["cpu_kv_cache_usage"] == 0.0


def test_traceback_grouped_with_exception():
    evs = list(parse(str(CORPUS / "vllm-cpu/06b-startup-fail-kv-cache-too-small.log"), year=2026))
    start = [e for e in evs if e.kind == "engine_start_failed" and e.source and e.source.startswith("core.py")]
    assert start, "EngineCore failed to start record"
    e = start[0]
    assert e.line_end > e.line + 10
    assert e.fields["exc_type"] == "ValueError"
    assert e.fields["exc_kind"] == "kv_cache_insufficient"
    assert e.fields["max_seq_len"] == 512
    assert e.fields["estimated_max_model_len"] == 128


def test_raw_traceback_kind_from_exception():
    evs = list(parse(str(CORPUS / "incidents/07-v0-maxlen-exceeds-kv-capacity.log"), year=2026))
    kv = [e for e in evs if e.kind == "kv_cache_insufficient"]
    assert len(kv) == 1
    assert kv[0].fields["max_seq_len"] == 4096
    assert kv[0].fields["kv_cache_tokens"] == 3520
    assert kv[0].text.startswith("Traceback")


def test_json_logs_carry_year_and_ms():
    evs = list(parse(str(CORPUS / "vllm-cpu/07b-json-logging-builtin-formatter.log"), year=1999))
    js = [e for e in evs if e.kind == "server_version"]
    assert js and js[0].ts.year == 2026 and js[0].fields["version"] == "0.32.0"
    assert any(e.kind == "request_received" for e in evs)
    assert any(e.ts is not None and e.ts.microsecond for e in evs)


def test_uvicorn_inherits_timestamp():
    evs = list(parse(str(CORPUS / "vllm-cpu/01-startup-and-light-load.log"), year=2026))
    acc = [e for e in evs if e.kind == "http_access"]
    assert all(e.ts is not None and e.ts_inherited for e in acc)
    assert acc[0].fields["http_status"] == 200 and acc[0].fields["method"] == "GET"


def test_debug_level_relative_paths():
    evs = [e for e in parse(str(CORPUS / "vllm-cpu/08-debug-level-light-load.log"), year=2026) if e.kind == "request_added"]
    assert evs and "/" in evs[0].source
