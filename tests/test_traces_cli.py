"""`--traces` on every command that reads journeys: requests, summary, analyze, timeline, diagnose, export."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from vllmlog.cli import main

from .test_traces import T1, T2, TOLERANCE_S, TRACED, _log_id


def _json(capsys, argv: list[str]) -> object:
    rc = main(argv)
    out = capsys.readouterr().out
    assert rc in (0, 1), out[-500:]
    return json.loads(out)


def test_requests_json_finds_every_client_request(capsys) -> None:
    """The issue's acceptance command: `vllmlog requests --json LOG --traces TRACES`."""
    for log, traces, truth in (T1, T2):
        rows = [r for n in truth for r in csv.DictReader((TRACED / n).open())]
        doc = _json(capsys, ["requests", "--json", str(log), "--traces", str(traces), "--year", "2026"])
        by_id = {d["request_id"]: d for d in doc}
        ok = n = 0
        for row in rows:
            d = by_id[_log_id(row)]
            if row["aborted_by_client"]:
                assert d["status"] == "aborted"
                continue
            n += 1
            ttft_ok = not row["ttft_s"] or abs(d["ttft_s"] - float(row["ttft_s"])) <= TOLERANCE_S
            ok += ttft_ok and abs(d["e2e_s"] - float(row["latency_s"])) <= TOLERANCE_S
            assert d["sources"]["ttft_s"] == "traced" and d["seen_in"] == "log+trace" and d["trace_id"]
        assert ok / n >= 0.95


@pytest.mark.parametrize("run", [T1, T2], ids=["T1", "T2"])
def test_summary_json_percentiles_from_traced_values(capsys, run) -> None:
    """The issue's second bar: `summary --json` latency percentiles come from the traced values and equal
    numpy over them — the values read straight from the OTLP file, not through vllmlog."""
    log, traces, _ = run
    doc = _json(capsys, ["summary", "--json", str(log), "--traces", str(traces), "--year", "2026"])
    spans = [{a["key"]: a["value"] for a in s["attributes"]} for line in traces.read_text().splitlines()
             for rs in json.loads(line)["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
             if s["name"] == "llm_request"]
    n = len(spans)
    for metric, attr in (("ttft_s", "time_to_first_token"), ("e2e_s", "e2e"), ("queue_s", "time_in_queue"),
                         ("prefill_s", "time_in_model_prefill")):
        vals = np.array([s[f"gen_ai.latency.{attr}"]["doubleValue"] for s in spans])
        lat = doc["latency"][metric]
        assert lat["sources"] == {"traced": n} and lat["count"] == n and lat["basis"] == "measured"
        for p in (50, 90, 95, 99):
            assert lat[f"p{p}"] == float(np.percentile(vals, p)), (metric, p)
        assert lat["max"] == float(vals.max()) and lat["min"] == float(vals.min())
    assert doc["traces"]["join"]["joined"] == n and doc["startup"][0]["complete"] is True


def test_analyze_json_has_the_waterfall_and_trace_counts(capsys, tmp_path: Path) -> None:
    log, traces, _ = T2
    doc = _json(capsys, ["analyze", "--json", "--no-html", "--fail-on", "never", str(log), "--traces", str(traces),
                         "--year", "2026"])
    assert doc["traces"]["request_spans"] == 121 and doc["traces"]["join"]["log_without_span"] == 39
    (w,) = doc["startup"]
    assert w["dominant_phase"] == "compile / warm-up" and w["steps"][0]["name"] == "Overall Loading"
    assert any("start-up took" in e["text"] for e in doc["timeline"])
    plain = _json(capsys, ["analyze", "--json", "--no-html", "--fail-on", "never", str(log), "--year", "2026"])
    assert plain["traces"] is None and plain["startup"] == []


def test_timeline_and_diagnose_take_traces(capsys) -> None:
    log, traces, _ = T1
    assert main(["timeline", str(log), "--traces", str(traces), "--year", "2026"]) == 0
    out = capsys.readouterr().out
    assert "start-up took 53.5 s (traced)" in out and "Warmup (CPU): 32.29 s" in out
    rc = main(["diagnose", "--json", str(log), "--traces", str(traces), "--year", "2026", "--fail-on", "never"])
    assert rc == 0 and "findings" in json.loads(capsys.readouterr().out)


def test_export_ndjson_with_spans(capsys) -> None:
    log, traces, _ = T1
    assert main(["export", str(log), "--traces", str(traces), "--year", "2026"]) == 0
    recs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    lines = len(log.read_text().splitlines())
    reqs = [r for r in recs if r["kind"] == "trace_request"]
    spans = [r for r in recs if r["kind"] == "trace_span"]
    assert len(reqs) == 60 and len(spans) == 13 and len(recs) - 73 <= lines
    r = next(x for x in reqs if x["request_id"] == "cmpl-client-0001-f2ed66ff-0")
    assert r["@timestamp"] == "2026-12-01T18:31:27.455Z" and r["fields"]["ttft_s"] == 0.017907381057739258


def test_missing_trace_file_is_a_one_line_error(capsys) -> None:
    rc = main(["requests", "--json", str(T1[0]), "--traces", "/nonexistent/t.jsonl"])
    err = capsys.readouterr().err
    assert rc == 2 and "no such file" in err


def test_requests_client_vs_server(capsys, monkeypatch) -> None:
    """`requests --client`: the client's own TTFT/e2e beside the traced server numbers, and client − server."""
    log, traces, truth = T1
    rows = {_log_id(r): r for r in csv.DictReader((TRACED / truth[0]).open())}
    argv = ["requests", str(log), "--traces", str(traces), "--client", str(TRACED / truth[0]), "--year", "2026"]
    doc = _json(capsys, argv[:1] + ["--json"] + argv[1:])
    assert len(doc) == 60
    for d in doc:
        t = rows[d["request_id"]]
        assert d["client_e2e_s"] == float(t["latency_s"])
        assert d["client_overhead_e2e_s"] == float(t["latency_s"]) - d["e2e_s"]
        assert d["sources"]["client_overhead_e2e_s"] == "derived" and d["sources"]["e2e_s"] == "traced"
        if t["ttft_s"]:
            assert d["client_overhead_ttft_s"] == float(t["ttft_s"]) - d["ttft_s"]
        else:
            assert d["client_overhead_ttft_s"] is None and "client_overhead_ttft_s" not in d["sources"]
    monkeypatch.setenv("COLUMNS", "200")
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert "Δ = client − server" in out[0]
    head = out[1].split()
    assert head[:8] == ["request", "status", "arrival", "e2e", "client", "e2e", "Δ", "e2e"]
    first = next(x for x in out if x.startswith("cmpl-client-0000-"))
    assert "+104ms" in first.split() and "+102ms" in first.split()  # the first request: 0.10 s in the frontend
