"""The live OTLP/HTTP receiver, fed by the real OpenTelemetry SDK exporter
(opentelemetry-exporter-otlp-proto-http) on loopback — and what `watch` makes of the spans."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.trace import SpanKind
from prometheus_client import generate_latest

from vllmlog.live.exporter import LiveCollector, make_registry
from vllmlog.live.follow import FileFollower
from vllmlog.live.state import LiveState
from vllmlog.live.watch import Watcher
from vllmlog.traces import read_traces
from vllmlog.traces.otlp import RequestSpan
from vllmlog.traces.receiver import OtlpReceiver

from .test_traces import T1


@pytest.fixture
def receiver():
    r = OtlpReceiver(max_body=1 << 20, max_spans=10_000)
    host, port = r.serve("127.0.0.1:0")
    assert host == "127.0.0.1"
    r.url = f"http://127.0.0.1:{port}/v1/traces"  # type: ignore[attr-defined]
    yield r
    r.close()


def _provider(url: str, pid: str = "15030", batch: bool = False, gzip_: bool = False) -> TracerProvider:
    res = Resource.create({"vllm.process_id": pid, "vllm.instrumenting_module_name": "vllm.llm_engine"})
    tp = TracerProvider(resource=res)
    exp = OTLPSpanExporter(endpoint=url, compression=Compression.Gzip if gzip_ else Compression.NoCompression,
                           timeout=10)
    tp.add_span_processor(BatchSpanProcessor(exp) if batch else SimpleSpanProcessor(exp))
    return tp


def _emit_like_vllm(tp: TracerProvider, rs: RequestSpan) -> None:
    """What vLLM's OutputProcessor does for a finished request: one SERVER span from arrival to now."""
    tracer = tp.get_tracer("vllm.tracing.otel")
    span = tracer.start_span("llm_request", kind=SpanKind.SERVER, start_time=rs.start_ns)
    for k, v in (("gen_ai.latency.time_to_first_token", rs.ttft_s), ("gen_ai.latency.e2e", rs.e2e_s),
                 ("gen_ai.latency.time_in_queue", rs.queue_s), ("gen_ai.usage.prompt_tokens", rs.prompt_tokens),
                 ("gen_ai.usage.completion_tokens", rs.output_tokens),
                 ("gen_ai.latency.time_in_model_prefill", rs.prefill_s),
                 ("gen_ai.latency.time_in_model_decode", rs.decode_s),
                 ("gen_ai.latency.time_in_model_inference", rs.inference_s), ("gen_ai.request.id", rs.request_id),
                 ("gen_ai.request.max_tokens", rs.max_tokens), ("gen_ai.request.n", rs.n)):
        span.set_attribute(k, v)
    span.end(end_time=rs.end_ns)


def test_real_sdk_exporter_protobuf_and_gzip(receiver) -> None:
    captured = read_traces(str(T1[1])).requests[:12]
    for gz, chunk in ((False, captured[:6]), (True, captured[6:])):
        tp = _provider(receiver.url, gzip_=gz, batch=gz)
        for rs in chunk:
            _emit_like_vllm(tp, rs)
        tp.force_flush()
        tp.shutdown()
    got = receiver.drain()
    assert len(got) == 12 and all(isinstance(s, RequestSpan) for s in got)
    by_id = {s.request_id: s for s in got}
    for rs in captured:
        s = by_id[rs.request_id]
        assert (s.start_ns, s.end_ns, s.ttft_s, s.e2e_s, s.queue_s, s.prompt_tokens, s.output_tokens) == \
            (rs.start_ns, rs.end_ns, rs.ttft_s, rs.e2e_s, rs.queue_s, rs.prompt_tokens, rs.output_tokens)
        assert s.pid == "15030" and len(s.trace_id) == 32
    c = receiver.counters()
    assert c["spans"]["llm_request"] == 12 and c["requests"]["ok"] >= 2 and not c["rejected"]
    assert receiver.drain() == []


def test_json_body_bad_bodies_and_limits(receiver) -> None:
    line = T1[1].read_bytes().splitlines()[8]  # a file-exporter line is a valid OTLP/JSON body
    r = httpx.post(receiver.url, content=line, headers={"Content-Type": "application/json"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json" and json.loads(r.text) == {}
    n = len(receiver.drain())
    assert n == len(json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"])
    bad = [
        (b"\x08\x96\x01garbage\xff\xff", "application/x-protobuf", "malformed"),
        (b"{\"resourceSpans\": [", "application/json", "malformed"),
        (b"{\"hello\": 1}", "application/json", "malformed"),
        (line, "text/plain", "content_type"),
        (b"x" * ((1 << 20) + 1), "application/json", "too_large"),
        (gzip.compress(b"{" + b" " * (2 << 20) + b"}"), "application/json", "too_large"),  # a small zip bomb
    ]
    for body, ctype, reason in bad:
        hdr = {"Content-Type": ctype}
        if body[:2] == b"\x1f\x8b":
            hdr["Content-Encoding"] = "gzip"
        r = httpx.post(receiver.url, content=body, headers=hdr)
        assert r.status_code == 400, (reason, r.status_code)
    c = receiver.counters()
    assert c["rejected"] == {"malformed": 3, "content_type": 1, "too_large": 2} and c["requests"]["rejected"] == 6
    assert httpx.post(receiver.url.replace("/v1/traces", "/v1/metrics"), content=line).status_code == 404
    assert httpx.get(receiver.url).status_code == 405
    # still serving after all that
    assert httpx.post(receiver.url, content=line, headers={"Content-Type": "application/json"}).status_code == 200


def test_queue_bound_reports_partial_success() -> None:
    r = OtlpReceiver(max_spans=5)
    _, port = r.serve("127.0.0.1:0")
    try:
        line = T1[1].read_bytes().splitlines()[8]
        body = json.dumps(json.loads(line)).encode()
        resp = httpx.post(f"http://127.0.0.1:{port}/v1/traces", content=body,
                          headers={"Content-Type": "application/json"})
        assert resp.status_code == 200
        msg = json.loads(resp.text)
        total = len(json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"])
        assert int(msg["partialSuccess"]["rejectedSpans"]) == total - 5
        assert len(r.drain()) == 5 and r.counters()["spans"]["dropped"] == total - 5
        # protobuf responses are ExportTraceServiceResponse messages
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
        from vllmlog.traces.otlp import decode_json

        pb = ExportTraceServiceRequest(resource_spans=decode_json(line).resource_spans).SerializeToString()
        resp = httpx.post(f"http://127.0.0.1:{port}/v1/traces", content=pb,
                          headers={"Content-Type": "application/x-protobuf"})
        assert ExportTraceServiceResponse.FromString(resp.content).partial_success.rejected_spans == total - 5
    finally:
        r.close()


def test_watch_ends_v1_journeys_with_received_spans(receiver, tmp_path: Path) -> None:
    """`watch LOG --otlp-listen`: the log's V1 completions have no finish line; the spans end them with
    exact numbers, the latency histograms count them, the exporter shows the receiver's counters."""
    log = tmp_path / "server.log"
    lines = T1[0].read_bytes().splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines) if b"[shutdown]" in x)
    log.write_bytes(b"".join(lines[:cut]))  # the server is still up
    state = LiveState(str(log), year=2026)
    w = Watcher(FileFollower(str(log)), state, spans=receiver, poll_interval=0.01)
    for _ in range(5):
        w.step()
    assert state.inflight >= 50  # no finish lines: in flight until their spans come
    captured = read_traces(str(T1[1])).requests
    tp = _provider(receiver.url, batch=True)
    for rs in captured:
        _emit_like_vllm(tp, rs)
    tp.force_flush()
    tp.shutdown()
    deadline = time.monotonic() + 10
    while sum(receiver.counters()["spans"].values()) < 60 and time.monotonic() < deadline:
        time.sleep(0.05)
    w.step()
    state.release_ended(now=time.monotonic() + 60)
    assert state.inflight == 0
    ttft = state.hist[("time_to_first_token_seconds", "models/tiny")]
    assert ttft.count == 60 and ttft.sum == pytest.approx(sum(r.ttft_s for r in captured))
    assert state.requests[("models/tiny", "success")] == 60 and state.traced_journeys == 60
    joined = [j for j in state.recent if j.seen_in == "log+trace"]
    assert len(joined) == 60 and all(j.sources["e2e_s"] == "traced" for j in joined)
    text = generate_latest(make_registry(LiveCollector(state, instance="t", otlp=receiver.counters))).decode()
    assert 'vllmlog_otlp_spans_total{instance="t",type="llm_request"} 60.0' in text
    assert 'vllmlog_traced_requests_total{instance="t"} 60.0' in text
    assert 'vllmlog_otlp_rejected_total{instance="t",reason="malformed"} 0.0' in text


def test_span_without_log_line_stands_alone_after_grace(receiver, tmp_path: Path) -> None:
    log = tmp_path / "quiet.log"
    log.write_text("")
    state = LiveState(str(log), year=2026)
    state.span_grace_s = 0.2
    w = Watcher(FileFollower(str(log)), state, spans=receiver, poll_interval=0.01)
    tp = _provider(receiver.url)
    _emit_like_vllm(tp, read_traces(str(T1[1])).requests[0])
    tp.shutdown()
    w.step()
    assert state.requests.get(("", "success"), 0) == 0  # waiting for its log line
    time.sleep(0.3)
    w.step()
    state.release_ended(now=time.monotonic() + 60)
    assert state.requests[("", "success")] == 1 and state.recent[-1].seen_in == "trace"


def test_idle_connection_is_closed_after_the_timeout(monkeypatch) -> None:
    """A half-open client (half a request line, then nothing) is hung up on instead of holding its thread forever."""
    import socket

    import vllmlog.traces.receiver as rx

    monkeypatch.setattr(rx, "IDLE_TIMEOUT_S", 0.3)  # the recv below waits up to 30 s: a loaded machine is slow
    r = OtlpReceiver()
    _, port = r.serve("127.0.0.1:0")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"POST /v1/tr")
            assert s.recv(100) == b""  # closed by the server (a recv timeout here would raise instead)
    finally:
        r.close()
