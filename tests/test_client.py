"""Client-side truth as input (`--client`): the load generator's per-request numbers vs the server's."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from vllmlog.cli import main
from vllmlog.client import compare, read_client
from vllmlog.errors import InputError
from vllmlog.run import load

from .test_traces import T1, T2, TRACED


def test_csv_truth_matched_by_id_and_overheads() -> None:
    run = load(str(T1[0]), year=2026, traces=[str(T1[1])])
    doc = run.add_client(str(TRACED / "T1-client-truth.csv"))
    assert doc["tool"] == "csv" and doc["matched"] == 60 and doc["matched_by"] == "id" and not doc["unmatched"]
    rows = list(csv.DictReader((TRACED / "T1-client-truth.csv").open()))
    js = {j.request_id: j for j in run.journeys}
    over = []
    for row in rows:
        rid = row["response_id"]
        j = js.get(rid + "-0") or js[rid]
        assert j.client_e2e_s == float(row["latency_s"])
        over.append(float(row["latency_s"]) - j.e2e_s)
    assert doc["overhead"]["e2e_s"]["p50"] == float(np.percentile(over, 50))
    # the client sees a little more than the server: HTTP, detokenisation, loopback (ms, never negative)
    assert 0 < doc["overhead"]["e2e_s"]["min"] and doc["overhead"]["ttft_s"]["p50"] < 0.005


def test_estimated_server_numbers_are_not_compared() -> None:
    run = load(str(T2[0]), year=2026)  # no traces: the log alone has no TTFT, e2e only for aborts (estimated)
    doc = run.add_client(str(TRACED / "T2-client-truth-abort.csv"))
    assert doc["matched"] == 40 and doc["overhead"]["e2e_s"]["count"] == 0
    assert doc["not_compared"]["client_failed"] == 39


def test_requests_client_columns(capsys, tmp_path: Path) -> None:
    out = tmp_path / "j.csv"
    assert main(["requests", str(T1[0]), "--traces", str(T1[1]), "--client", str(TRACED / "T1-client-truth.csv"),
                 "--year", "2026", "-o", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 60 and all(r["client_e2e_s"] for r in rows) and all(r["seen_in"] == "log+trace" for r in rows)


def test_bench_serve_detailed_by_index_and_by_time(tmp_path: Path) -> None:
    """vllm bench serve saves no ids: its X-Request-Id <prefix><i> ties record i to the log's cmpl-<prefix><i>-0;
    without such ids, send order and time do."""
    run = load(str(T1[0]), year=2026, traces=[str(T1[1])])
    js = sorted(run.journeys, key=lambda j: j.arrival_ts)
    rows = {r["response_id"]: r for r in csv.DictReader((TRACED / "T1-client-truth.csv").open())}

    def row(j):
        return rows.get(j.request_id[:-2]) or rows[j.request_id]

    t0 = 1000.0  # perf_counter clock: an arbitrary origin
    doc = {"ttfts": [float(row(j)["ttft_s"] or row(j)["latency_s"]) for j in js], "itls": [[0.0] for _ in js],
           "e2els": [float(row(j)["latency_s"]) for j in js], "input_lens": [j.prompt_tokens for j in js],
           "output_lens": [j.output_tokens for j in js], "errors": ["" for _ in js],
           "start_times": [t0 + float(row(j)["send_time"]) - float(row(js[0])["send_time"]) for j in js]}
    p = tmp_path / "bench.json"
    p.write_text(json.dumps(doc))
    recs = read_client(str(p))
    assert len(recs) == 60 and recs[0].tool == "vllm-bench"
    res = compare(recs, run.journeys)
    assert res["matched_by"] == "time" and res["matched"] == 60
    assert all(r["overhead_e2e_s"] is not None and abs(r["overhead_e2e_s"]) < 0.15 for r in res["requests"])


def test_guidellm_report_shapes(tmp_path: Path) -> None:
    run = load(str(T1[0]), year=2026, traces=[str(T1[1])])
    rows = list(csv.DictReader((TRACED / "T1-client-truth.csv").open()))
    new = [{"request_id": f"uuid-{i}", "response_id": r["response_id"],
            "info": {"timings": {"request_start": float(r["send_time"]), "request_end": float(r["end_time"]),
                                 "first_token_iteration": float(r["first_token_time"]) if r["first_token_time"] else None}},
            "prompt_tokens": int(r["prompt_tokens"]), "output_tokens": int(r["completion_tokens"])}
           for i, r in enumerate(rows)]
    old = [{"request_id": r["response_id"], "start_time": float(r["send_time"]), "end_time": float(r["end_time"]),
            "request_latency": float(r["latency_s"])} for r in rows]
    for reqs in (new, old):
        p = tmp_path / "report.json"
        p.write_text(json.dumps({"benchmarks": [{"requests": {"successful": reqs, "errored": [], "incomplete": []}}]}))
        doc = compare(read_client(str(p)), run.journeys)
        assert doc["tool"] == "guidellm" and doc["matched"] == 60 and doc["matched_by"] == "id"
        assert 0 < doc["overhead"]["e2e_s"]["p50"] < 0.02


def test_bad_client_files(tmp_path: Path) -> None:
    for body in ("{\"hello\": 1}", "not,a,truth\n1,2,3\n", "\x00\x01"):
        p = tmp_path / "x"
        p.write_text(body)
        with pytest.raises(InputError):
            read_client(str(p))
    with pytest.raises(InputError):
        read_client(str(tmp_path / "missing.json"))
