"""Trace spans as ``Event`` records, so log exporters (``vllmlog export --traces``) ship them next to the log.

``trace_request`` (one per ``llm_request`` span: the request's traced latencies and token counts) and
``trace_span`` (every other span: name, duration, process). Their timestamps are the spans' exact UTC
start times expressed in the log's clock (``utc_offset_s`` ahead of UTC), so an exporter that maps log
time to UTC with the same offset writes the span's own instant.
"""

from __future__ import annotations

from typing import Iterator

from ..model import Event
from .join import utc_naive
from .otlp import TraceSet

_REQ_FIELDS = ("ttft_s", "e2e_s", "queue_s", "prefill_s", "decode_s", "inference_s", "prompt_tokens",
               "output_tokens", "max_tokens", "n", "temperature", "top_p", "model", "finish_reason", "status",
               "pid", "instance")


def span_events(ts: TraceSet, utc_offset_s: float = 0.0) -> Iterator[Event]:
    """Every span of ``ts`` as an Event (request spans first, then the others, each in file order)."""
    for rs in ts.requests:
        fields = {k: getattr(rs, k) for k in _REQ_FIELDS if getattr(rs, k) is not None}
        fields.update(trace_id=rs.trace_id, span_id=rs.span_id, source="traced")
        text = (f"llm_request {rs.request_id}: ttft {_s(rs.ttft_s)}, e2e {_s(rs.e2e_s)}, queue {_s(rs.queue_s)}, "
                f"prompt {rs.prompt_tokens} / output {rs.output_tokens} tokens")
        yield Event(rs.file, rs.line, rs.line, utc_naive(rs.start_ns, utc_offset_s), "INFO",
                    f"APIServer pid={rs.pid}" if rs.pid else None, None, "trace_request", rs.request_id, fields, text,
                    "otlp.llm_request")
    for s in ts.spans:
        proc = s.resource.get("vllm.process_name") or s.resource.get("vllm.process_kind")
        fields = {"name": s.name, "duration_s": s.duration_s, "trace_id": s.trace_id, "span_id": s.span_id,
                  "parent_id": s.parent_id, "scope": s.scope, "status": s.status, "pid": s.pid, "source": "traced"}
        yield Event(s.file, s.line, s.line, utc_naive(s.start_ns, utc_offset_s), "INFO",
                    f"{proc} pid={s.pid}" if proc and s.pid else None, None, "trace_span", None, fields,
                    f"span {s.name}: {s.duration_s:.3f} s", "otlp.span")


def _s(v: float | None) -> str:
    return "?" if v is None else f"{v:.3f} s"
