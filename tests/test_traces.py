"""OTLP trace input: decoding (opentelemetry-proto), the span ↔ journey join against the client's own
timings, provenance, span-only and log-only requests, several servers, clocks, the start-up waterfall."""

from __future__ import annotations

import base64
import csv
import gzip
import json
import re
from datetime import timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from vllmlog.run import load
from vllmlog.summary import summarize
from vllmlog.traces import read_traces
from vllmlog.traces.otlp import decode_json
from vllmlog.traces.startup import waterfalls

from .conftest import CORPUS

TRACED = CORPUS / "vllm-cpu-traced"
T1 = (TRACED / "T1-traced-light.log", TRACED / "T1-traced-light-traces.otlp.jsonl", ["T1-client-truth.csv"])
T2 = (TRACED / "T2-traced-overload-aborts.log", TRACED / "T2-traced-overload-aborts-traces.otlp.jsonl",
      ["T2-client-truth-burst.csv", "T2-client-truth-abort.csv"])
RUNS = [T1, T2]
#: The issue's bar: TTFT and e2e within this of the client's own measurement for ≥ 95 % of requests.
TOLERANCE_S = 0.15


def _log_id(row: dict[str, str]) -> str:
    x = row["x_request_id_sent"]
    return f"chatcmpl-{x}" if row["kind"].startswith("chat") else f"cmpl-{x}-0"


def _truth(names: list[str]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for n in names:
        rows += list(csv.DictReader((TRACED / n).open()))
    return rows


# ----------------------------------------------------------------------------- decoding
def test_reads_every_span_of_the_captures() -> None:
    ts = read_traces([str(T1[1]), str(T2[1])])
    st = ts.stats
    assert st.skipped_lines == 0 and st.lines == 30
    assert st.request_spans == 60 + 121  # every finished request; T2's 39 aborted requests have none
    assert len(ts.requests) == 181 and len(ts.spans) == 26  # 13 start-up spans per server start
    raw = [json.loads(x) for x in T1[1].read_text().splitlines()]
    ids = {s["spanId"] for d in raw for rs in d["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]}
    assert {s.span_id for s in ts.spans} | {r.span_id for r in ts.requests} >= ids & {r.span_id for r in ts.requests}
    first = json.loads(T1[1].read_text().splitlines()[6])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    rs = next(r for r in ts.requests if r.span_id == first["spanId"])
    attrs = {a["key"]: a["value"] for a in first["attributes"]}
    assert rs.trace_id == first["traceId"] and rs.start_ns == int(first["startTimeUnixNano"])
    assert rs.ttft_s == attrs["gen_ai.latency.time_to_first_token"]["doubleValue"]
    assert rs.prompt_tokens == int(attrs["gen_ai.usage.prompt_tokens"]["intValue"])
    assert rs.request_id == attrs["gen_ai.request.id"]["stringValue"] and rs.pid == "15030"


def test_decode_agrees_with_protobuf_round_trip() -> None:
    """Our hex-id OTLP/JSON decode gives the message protobuf's own JSON mapping (base64 ids) gives."""
    line = T1[1].read_text().splitlines()[0]
    msg = decode_json(line)
    again = json_format.Parse(json_format.MessageToJson(msg), TracesData())
    assert again == msg
    assert decode_json(json_format.MessageToJson(msg)) == msg  # base64 ids are accepted as well
    span = msg.resource_spans[0].scope_spans[0].spans[0]
    assert span.trace_id.hex() == json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]


def test_gzip_and_bad_lines_are_counted_not_fatal(tmp_path: Path) -> None:
    lines = T2[1].read_bytes().splitlines(keepends=True)
    bad = [b"not json\n", b"{\"resourceSpans\": 5}\n", b"[1, 2]\n", b"\n", b"{\"foo\": 1}\n",
           b"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"startTimeUnixNano\":\"x\"}]}]}]}\n"]
    mixed = lines[:3] + bad + lines[3:]
    p = tmp_path / "t.otlp.jsonl.gz"
    with gzip.open(p, "wb") as fp:
        fp.writelines(mixed)
    ts = read_traces(str(p))
    ref = read_traces(str(T2[1]))
    assert [r.span_id for r in ts.requests] == [r.span_id for r in ref.requests]
    assert ts.stats.skipped_lines == 5 and ts.stats.blank_lines == 1 and len(ts.stats.errors) == 5
    trunc = tmp_path / "cut.gz"
    trunc.write_bytes(gzip.compress(T2[1].read_bytes())[:-200])
    cut = read_traces(str(trunc))
    assert cut.stats.skipped_lines == 1 and "ended early" in cut.stats.errors[0]


# ----------------------------------------------------------------------------- the join vs client truth
@pytest.mark.parametrize("log,traces,truth", RUNS, ids=["T1", "T2"])
def test_every_client_request_within_tolerance(log: Path, traces: Path, truth: list[str]) -> None:
    run = load(str(log), year=2026, traces=[str(traces)])
    js = {j.request_id: j for j in run.journeys}
    assert len(js) == len(run.journeys)
    rows = _truth(truth)
    ok = total = 0
    for row in rows:
        j = js.get(_log_id(row))
        assert j is not None, f"client request {row['x_request_id_sent']} missing"
        if row["aborted_by_client"]:
            assert j.status == "aborted" and j.seen_in == "log" and j.sources["status"] == "logged"
            continue
        total += 1
        assert j.status == "success" and j.sources["status"] == "traced" and j.seen_in == "log+trace"
        assert j.sources["e2e_s"] == "traced" and j.sources["ttft_s"] == "traced"
        good = abs(j.e2e_s - float(row["latency_s"])) <= TOLERANCE_S
        if row["ttft_s"]:  # streaming requests: the client saw its first token
            good &= abs(j.ttft_s - float(row["ttft_s"])) <= TOLERANCE_S
        ok += good
        # arrival: the span starts when the server got the request, just after the client sent it
        arrival = j.arrival_ts.replace(tzinfo=timezone.utc).timestamp()
        assert -0.005 <= arrival - float(row["send_time"]) <= TOLERANCE_S
        assert j.prompt_tokens == int(row["prompt_tokens"]) and j.output_tokens == int(row["completion_tokens"])
    assert total and ok / total >= 0.95
    assert ok == total  # on the public captures: every one


@pytest.mark.parametrize("log,traces,truth", RUNS, ids=["T1", "T2"])
def test_summary_percentiles_are_numpy_over_traced_values(log: Path, traces: Path, truth: list[str]) -> None:
    run = load(str(log), year=2026, traces=[str(traces)])
    doc = summarize(run)
    spans = read_traces(str(traces)).requests
    for metric, attr in (("ttft_s", "ttft_s"), ("e2e_s", "e2e_s"), ("queue_s", "queue_s"), ("prefill_s", "prefill_s")):
        vals = np.array([getattr(s, attr) for s in spans])
        lat = doc["latency"][metric]
        assert lat["basis"] == "measured" and lat["excluded"]["estimated"] == 0
        assert lat["count"] == len(vals) and lat["sources"] == {"traced": len(vals)}
        for p in (50, 90, 95, 99):
            assert lat[f"p{p}"] == float(np.percentile(vals, p)), (metric, p)
        assert lat["max"] == float(vals.max())
    # TPOT from the traced numbers, as vllm bench serve defines it
    tp = np.array([(s.e2e_s - s.ttft_s) / (s.output_tokens - 1) for s in spans if s.output_tokens > 1])
    assert doc["latency"]["tpot_s"]["p50"] == pytest.approx(float(np.percentile(tp, 50)), rel=1e-12)
    assert doc["latency"]["tpot_s"]["sources"] == {"derived": len(tp)}
    assert doc["traces"]["join"]["joined"] == len(spans) and doc["traces"]["request_spans"] == len(spans)


def test_provenance_of_a_joined_journey() -> None:
    run = load(str(T1[0]), year=2026, traces=[str(T1[1])])
    j = run.journeys[0]
    src = j.sources
    for k in ("arrival_ts", "ttft_s", "e2e_s", "queue_s", "prefill_s", "inference_s", "prompt_tokens", "output_tokens",
              "status"):
        assert src[k] == "traced", k
    assert src["decode_s"] == "derived" and src["tpot_s"] == "derived" and src["first_token_ts"] == "derived"
    assert j.decode_s == pytest.approx(j.e2e_s - j.ttft_s)
    assert j.trace_id and len(j.trace_id) == 32 and j.ts_resolution_s < 1e-3
    assert j.first_token_ts == j.arrival_ts + timedelta(seconds=j.ttft_s)
    d = j.to_dict()
    assert d["seen_in"] == "log+trace" and d["trace_id"] == j.trace_id
    without = {x.request_id: x for x in load(str(T1[0]), year=2026).journeys}[j.request_id]
    assert without.ttft_s is None and without.seen_in == "log" and without.trace_id is None


# ----------------------------------------------------------------------------- span-only, log-only
def test_span_without_log_line_and_log_without_span(tmp_path: Path) -> None:
    log_lines = T1[0].read_text().splitlines(keepends=True)
    drop = {"cmpl-client-0003-21bade02-0", "cmpl-client-0004-07489671-0"}
    log = tmp_path / "server.log"
    log.write_text("".join(x for x in log_lines if not any(d in x for d in drop)))
    keep_out = "cmpl-client-0007-6102dd70-0"
    tr = tmp_path / "t.jsonl"
    out = []
    for line in T1[1].read_text().splitlines():
        d = json.loads(line)
        for rs in d["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                ss["spans"] = [s for s in ss["spans"] if keep_out not in json.dumps(s)]
        out.append(json.dumps(d))
    tr.write_text("\n".join(out) + "\n")
    run = load(str(log), year=2026, traces=[str(tr)])
    js = {j.request_id: j for j in run.journeys}
    assert len(js) == 60
    for rid in drop:
        j = js[rid]
        assert j.seen_in == "trace" and j.status == "success" and j.sources["status"] == "traced"
        assert j.file == str(log) and j.server == 0  # the span's API-server pid is the log's server
        assert j.ttft_s is not None and j.first_line == 0 or j.first_line > 0
    lone = js[keep_out]
    assert lone.seen_in == "log" and lone.ttft_s is None and "no llm_request span" in (lone.reason or "")
    assert lone.status == "success" and lone.sources["status"] == "estimated"
    assert run.traces["join"] == {"joined": 57, "span_only": 2, "log_without_span": 1, "rejected_candidates": 0,
                                  "pending": 0, "clock_offset_s": 0.0, "clock": "joined requests"}


def test_traces_alone_without_request_lines(tmp_path: Path) -> None:
    """A server without --enable-log-requests: the journeys come from the spans, placed by the start-up spans."""
    log = tmp_path / "quiet.log"
    log.write_text("".join(x for x in T2[0].read_text().splitlines(keepends=True) if "request" not in x.lower()))
    run = load(str(log), year=2026, traces=[str(T2[1])])
    assert len(run.journeys) == 121 and {j.seen_in for j in run.journeys} == {"trace"}
    assert run.traces["join"]["clock"] == "start-up spans" and run.traces["join"]["clock_offset_s"] == 0.0


# ----------------------------------------------------------------------------- clocks and several servers
_TS = re.compile(r"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


def _shift_log(text: str, hours: int, pid_from: str | None = None, pid_to: str | None = None) -> str:
    from datetime import datetime

    def sub(m: re.Match[str]) -> str:
        t = datetime(2026, int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5])) + timedelta(hours=hours)
        return t.strftime("%m-%d %H:%M:%S")

    out = _TS.sub(sub, text)
    if pid_from:
        out = out.replace(f"pid={pid_from})", f"pid={pid_to})")
    return out


def _shift_traces(text: str, hours: int, pid_map: dict[str, str]) -> str:
    out = []
    for line in text.splitlines():
        d = json.loads(line)
        for rs in d["resourceSpans"]:
            for a in rs["resource"]["attributes"]:
                if a["key"] == "vllm.process_id":
                    a["value"]["stringValue"] = pid_map.get(a["value"]["stringValue"], a["value"]["stringValue"])
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    for k in ("startTimeUnixNano", "endTimeUnixNano"):
                        s[k] = str(int(s[k]) + hours * 3600 * 10**9)
        out.append(json.dumps(d))
    return "\n".join(out) + "\n"


def test_log_in_local_time_ahead_of_utc(tmp_path: Path) -> None:
    log = tmp_path / "cest.log"
    log.write_text(_shift_log(T1[0].read_text(), 2))  # the server's local time was UTC+2
    run = load(str(log), year=2026, traces=[str(T1[1])])
    ref = {j.request_id: j for j in load(str(T1[0]), year=2026, traces=[str(T1[1])]).journeys}
    assert run.traces["join"]["clock_offset_s"] == 7200.0 and run.traces["join"]["joined"] == 60
    for j in run.journeys:
        r = ref[j.request_id]
        assert j.ttft_s == r.ttft_s and j.arrival_ts == r.arrival_ts + timedelta(hours=2)
    w = run.startup[0]
    assert w.start_ts == load(str(T1[0]), year=2026, traces=[str(T1[1])]).startup[0].start_ts + timedelta(hours=2)


def test_two_servers_with_the_same_request_ids(tmp_path: Path) -> None:
    """A second server (other pid, an hour later) served the very same X-Request-Ids: resource + time tell
    the spans apart, and every journey gets its own server's numbers."""
    a = tmp_path / "a.log"
    b = tmp_path / "b.log"
    a.write_text(T1[0].read_text())
    b.write_text(_shift_log(T1[0].read_text(), 1, "15030", "25030"))
    traces = tmp_path / "both.jsonl"
    second = _shift_traces(T1[1].read_text(), 1, {"15030": "25030", "15449": "25449", "15620": "25620"})
    # the second server's spans came with different numbers: make them recognisable
    second = second.replace('"gen_ai.latency.e2e", "value": {"doubleValue": ', '"gen_ai.latency.e2e", "value": {"doubleValue": 10')
    traces.write_text(second + T1[1].read_text())  # interleaved order does not matter
    run = load([str(a), str(b)], year=2026, traces=[str(traces)])
    assert run.traces["join"]["joined"] == 120 and run.traces["join"]["span_only"] == 0
    assert [s.api_pid for s in run.servers] == ["15030", "25030"]
    for j in run.journeys:
        assert (j.e2e_s >= 10) == (j.file == str(b)), (j.file, j.request_id, j.e2e_s)
    assert len(run.startup) == 2 and {w.api_pid for w in run.startup} == {"15030", "25030"}


# ----------------------------------------------------------------------------- start-up waterfall
@pytest.mark.parametrize("log,traces,truth", RUNS, ids=["T1", "T2"])
def test_startup_waterfall(log: Path, traces: Path, truth: list[str]) -> None:
    run = load(str(log), year=2026, traces=[str(traces)])
    (w,) = run.startup
    assert w.complete and w.api_pid == run.servers[0].api_pid
    assert sum(w.phases.values()) == pytest.approx(w.total_s, abs=1e-6)
    assert w.dominant[0] == "compile / warm-up"
    names = [s.name for s in w.steps]
    assert names[0] == "Overall Loading" and "Load weights" in names and "Allocate KV cache" in names
    step = {s.name: s for s in w.steps}
    assert step["Warmup (CPU)"].depth == step["Prepare model"].depth + 1  # nested by time, not by the RPC link
    assert w.phases["weights"] == pytest.approx(step["Load weights"].duration_s)
    # the log's own line agrees with the traced weight loading (1-s timestamps, 2-digit seconds)
    assert abs(step["Load weights"].duration_s - 0.03) < 0.01
    # spans end before the server's ready line, in the log's clock
    assert w.end_ts <= run.servers[0].ready_ts + timedelta(seconds=1)
    d = w.to_dict()
    assert d["source"] == "traced" and d["dominant_phase"] == "compile / warm-up"


def test_incomplete_startup(tmp_path: Path) -> None:
    lines = [ln for ln in T1[1].read_text().splitlines()[:6]]  # the first export requests: inner spans only
    kept = []
    for line in lines:
        d = json.loads(line)
        for rs in d["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                ss["spans"] = [s for s in ss["spans"] if s["name"] not in ("Overall Loading", "AsyncMPClient init",
                                                                             "EngineCoreProc init", "Prepare model")]
        kept.append(json.dumps(d))
    p = tmp_path / "t.jsonl"
    p.write_text("\n".join(kept) + "\n")
    (w,) = waterfalls(read_traces(str(p)).spans)
    assert not w.complete and "incomplete" in w.headline() and w.last_step is not None
