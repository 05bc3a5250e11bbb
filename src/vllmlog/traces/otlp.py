"""OTLP traces in: the OpenTelemetry Collector ``file`` exporter's JSON lines and OTLP/HTTP bodies.

Decoding is the OpenTelemetry protobuf definitions' own (``opentelemetry-proto``): a JSON line goes
through protobuf's ``json_format`` into a ``TracesData`` message, an OTLP/HTTP protobuf body through
``ExportTraceServiceRequest.FromString``. The one adaptation is the one the OTLP/JSON spec makes to the
proto3 JSON mapping: trace and span ids are hex strings, not base64 (a base64 id is accepted too).

Spans then become small Python objects: ``RequestSpan`` for vLLM's per-request ``llm_request`` span (the
numbers the join needs, in compact slots: a file of a million requests stays in memory) and ``Span`` for
everything else (start-up spans keep their attributes). A line that does not decode is a counted,
reported skip (``TraceStats``), never a crash.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import os
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterable, Iterator, Sequence

import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from ..errors import InputError

#: vLLM's per-request span (one per finished request; aborted requests get none).
REQUEST_SPAN = "llm_request"
#: Longest JSON line read (one OTLP export request); a longer one is skipped and counted.
MAX_LINE = 256 << 20
#: How many distinct decode errors a ``TraceStats`` keeps as examples.
MAX_ERRORS = 10
_ID_KEYS = ("traceId", "spanId", "parentSpanId")
_STATUS = {0: "unset", 1: "ok", 2: "error"}

# vLLM's attribute names (vllm/tracing.py SpanAttributes)
A_ID = "gen_ai.request.id"
A_TTFT = "gen_ai.latency.time_to_first_token"
A_E2E = "gen_ai.latency.e2e"
A_QUEUE = "gen_ai.latency.time_in_queue"
A_PREFILL = "gen_ai.latency.time_in_model_prefill"
A_DECODE = "gen_ai.latency.time_in_model_decode"
A_INFERENCE = "gen_ai.latency.time_in_model_inference"
A_PROMPT = "gen_ai.usage.prompt_tokens"
A_COMPLETION = "gen_ai.usage.completion_tokens"
A_MAX_TOKENS = "gen_ai.request.max_tokens"
A_N = "gen_ai.request.n"
A_TEMPERATURE = "gen_ai.request.temperature"
A_TOP_P = "gen_ai.request.top_p"
A_MODEL = "gen_ai.response.model"
A_FINISH = "gen_ai.response.finish_reasons"
#: Resource attributes that tell one server process from another.
R_PID = "vllm.process_id"
R_INSTANCE = "service.instance.id"


@dataclass(slots=True)
class Span:
    """One span (any name) with its attributes and its resource's attributes."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    scope: str
    attrs: dict[str, Any]
    resource: dict[str, Any]
    kind: int = 0
    status: str = "unset"
    file: str = ""
    line: int = 0

    @property
    def duration_s(self) -> float:
        """End − start, in seconds."""
        return max(0, self.end_ns - self.start_ns) / 1e9

    @property
    def pid(self) -> str | None:
        """``vllm.process_id`` of the emitting process."""
        v = self.resource.get(R_PID)
        return None if v is None else str(v)


@dataclass(slots=True)
class RequestSpan:
    """vLLM's ``llm_request`` span: the request's exact latencies (seconds) and token counts."""

    request_id: str
    trace_id: str
    span_id: str
    start_ns: int
    """The request's arrival (the span runs from arrival to the request's end)."""
    end_ns: int
    ttft_s: float | None = None
    e2e_s: float | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    decode_s: float | None = None
    """vLLM's ``time_in_model_decode`` (first → last token in the engine)."""
    inference_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    max_tokens: int | None = None
    n: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    model: str | None = None
    finish_reason: str | None = None
    status: str = "unset"
    pid: str | None = None
    """``vllm.process_id`` of the API server that exported it."""
    instance: str | None = None
    """``service.instance.id`` of the exporting process."""
    file: str = ""
    line: int = 0

    @property
    def server_key(self) -> tuple[str | None, str | None]:
        """Which server process sent it: (``service.instance.id``, ``vllm.process_id``)."""
        return (self.instance, self.pid)


@dataclass
class TraceStats:
    """What reading traces found: lines, spans by type, skipped lines with example errors."""

    files: list[str] = field(default_factory=list)
    lines: int = 0
    blank_lines: int = 0
    skipped_lines: int = 0
    spans: int = 0
    request_spans: int = 0
    other_spans: int = 0
    resources: int = 0
    errors: list[str] = field(default_factory=list)

    def skip(self, where: str, why: str) -> None:
        """Count one line (or payload) that could not be decoded."""
        self.skipped_lines += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(f"{where}: {why}"[:300])

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        return {"files": list(self.files), "lines": self.lines, "blank_lines": self.blank_lines,
                "skipped_lines": self.skipped_lines, "spans": self.spans, "request_spans": self.request_spans,
                "other_spans": self.other_spans, "resources": self.resources, "errors": list(self.errors)}


@dataclass
class TraceSet:
    """Spans read from trace files (or received live): request spans, everything else, the counts."""

    requests: list[RequestSpan] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    """Spans other than ``llm_request`` (start-up spans, anything else a process exported)."""
    stats: TraceStats = field(default_factory=TraceStats)

    def add(self, items: Iterable[Span | RequestSpan]) -> None:
        """Add decoded spans."""
        for s in items:
            if isinstance(s, RequestSpan):
                self.requests.append(s)
            else:
                self.spans.append(s)


# ----------------------------------------------------------------------------- values
def any_value(v: Any) -> Any:
    """An OTLP ``AnyValue`` message as a Python value (int64 as int, arrays as lists, kvlists as dicts)."""
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which)


def attributes(kvs: Iterable[Any]) -> dict[str, Any]:
    """Repeated ``KeyValue`` → dict."""
    return {kv.key: any_value(kv.value) for kv in kvs}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


def _str(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, list):
        return ",".join(str(x) for x in v) if v else None
    return str(v)


# ----------------------------------------------------------------------------- messages → spans
def spans_of(msg: TracesData | ExportTraceServiceRequest, file: str = "", line: int = 0,
             stats: TraceStats | None = None) -> list[Span | RequestSpan]:
    """The spans of a decoded ``TracesData`` / ``ExportTraceServiceRequest`` message."""
    out: list[Span | RequestSpan] = []
    for rs in msg.resource_spans:
        res = attributes(rs.resource.attributes)
        if stats is not None:
            stats.resources += 1
        pid = _str(res.get(R_PID))
        inst = _str(res.get(R_INSTANCE))
        for ss in rs.scope_spans:
            scope = ss.scope.name
            for s in ss.spans:
                a = attributes(s.attributes)
                status = _STATUS.get(s.status.code, "unset")
                if s.name == REQUEST_SPAN and isinstance(a.get(A_ID), str):
                    out.append(RequestSpan(
                        request_id=a[A_ID], trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                        start_ns=s.start_time_unix_nano, end_ns=s.end_time_unix_nano,
                        ttft_s=_num(a.get(A_TTFT)), e2e_s=_num(a.get(A_E2E)), queue_s=_num(a.get(A_QUEUE)),
                        prefill_s=_num(a.get(A_PREFILL)), decode_s=_num(a.get(A_DECODE)),
                        inference_s=_num(a.get(A_INFERENCE)), prompt_tokens=_int(a.get(A_PROMPT)),
                        output_tokens=_int(a.get(A_COMPLETION)), max_tokens=_int(a.get(A_MAX_TOKENS)),
                        n=_int(a.get(A_N)), temperature=_num(a.get(A_TEMPERATURE)), top_p=_num(a.get(A_TOP_P)),
                        model=_str(a.get(A_MODEL)), finish_reason=_str(a.get(A_FINISH)), status=status,
                        pid=pid, instance=inst, file=file, line=line,
                    ))
                    if stats is not None:
                        stats.request_spans += 1
                else:
                    out.append(Span(
                        trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                        parent_id=s.parent_span_id.hex() or None, name=s.name, start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano, scope=scope, attrs=a, resource=res, kind=s.kind,
                        status=status, file=file, line=line,
                    ))
                    if stats is not None:
                        stats.other_spans += 1
    if stats is not None:
        stats.spans += len(out)
    return out


def _hex_ids_to_base64(obj: Any) -> None:
    """OTLP/JSON writes ids as hex; protobuf's JSON mapping of ``bytes`` is base64: convert in place."""
    for rs in _list(obj.get("resourceSpans") or obj.get("resource_spans")):
        if not isinstance(rs, dict):
            continue
        for ss in _list(rs.get("scopeSpans") or rs.get("scope_spans")):
            if not isinstance(ss, dict):
                continue
            for s in _list(ss.get("spans")):
                if not isinstance(s, dict):
                    continue
                _fix_ids(s)
                for ev in _list(s.get("links")):
                    if isinstance(ev, dict):
                        _fix_ids(ev)


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []  # anything else is json_format's to reject


def _fix_ids(d: dict[str, Any]) -> None:
    for k in _ID_KEYS:
        v = d.get(k)
        if isinstance(v, str) and v and len(v) in (16, 32):
            try:
                d[k] = base64.b64encode(bytes.fromhex(v)).decode("ascii")
            except ValueError:
                pass  # not hex: taken as base64 (protobuf's own JSON mapping)


def decode_json(data: bytes | str | dict[str, Any]) -> TracesData:
    """One OTLP/JSON document (a file-exporter line or an OTLP/HTTP JSON body) → ``TracesData``.

    Raises ``ValueError`` with the reason when it is not one."""
    if isinstance(data, dict):
        obj = data
    else:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if not ("resourceSpans" in obj or "resource_spans" in obj):
        raise ValueError("no resourceSpans (not OTLP trace data)")
    _hex_ids_to_base64(obj)
    try:
        return json_format.ParseDict(obj, TracesData(), ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError) as exc:
        raise ValueError(f"not OTLP trace data ({str(exc)[:160]})") from None


def decode_protobuf(body: bytes) -> ExportTraceServiceRequest:
    """An OTLP/HTTP protobuf body → ``ExportTraceServiceRequest``; ``ValueError`` when it is not one."""
    try:
        return ExportTraceServiceRequest.FromString(body)
    except (DecodeError, RuntimeWarning, ValueError) as exc:
        raise ValueError(f"not an OTLP protobuf ExportTraceServiceRequest ({exc})") from None


# ----------------------------------------------------------------------------- files
def _open(path: str) -> BinaryIO:
    try:
        raw = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        raise InputError(f"{path}: no such file", hint="--traces takes OTLP JSON files (plain or .gz)") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory", hint="pass the trace files inside it") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror or exc})") from None
    head = raw.peek(2)[:2]
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def iter_lines(path: str, stats: TraceStats) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` of a trace file; over-long lines are skipped whole and counted."""
    fp = _open(path)
    n = 0
    try:
        while True:
            try:
                b = fp.readline(MAX_LINE + 1)
            except (EOFError, OSError, gzip.BadGzipFile, binascii.Error) as exc:  # truncated/corrupt gzip
                stats.skip(f"{path}:{n + 1}", f"input ended early ({exc})")
                return
            if not b:
                return
            n += 1
            if len(b) > MAX_LINE and not b.endswith(b"\n"):
                stats.skip(f"{path}:{n}", f"line longer than {MAX_LINE} bytes")
                while b and not b.endswith(b"\n"):  # drop the rest of the line, in pieces
                    b = fp.readline(MAX_LINE)
                continue
            yield n, b
    finally:
        fp.close()


def read_traces(paths: Sequence[str] | str, into: TraceSet | None = None) -> TraceSet:
    """Read OTLP JSON trace files (one ``{"resourceSpans": …}`` object per line, plain or .gz)."""
    ts = into if into is not None else TraceSet()
    st = ts.stats
    for path in [paths] if isinstance(paths, str) else list(paths):
        if os.path.isdir(path):
            raise InputError(f"{path}: is a directory", hint="pass the trace files inside it")
        st.files.append(path)
        for lineno, b in iter_lines(path, st):
            st.lines += 1
            if not b.strip():
                st.blank_lines += 1
                continue
            try:
                msg = decode_json(b)
            except ValueError as exc:
                st.skip(f"{os.path.basename(path)}:{lineno}", str(exc))
                continue
            ts.add(spans_of(msg, path, lineno, st))
    return ts
