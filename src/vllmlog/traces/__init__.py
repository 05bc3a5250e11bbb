"""OpenTelemetry traces next to the log: OTLP JSON files and the live OTLP/HTTP receiver (``otlp``,
``receiver``), spans joined with request journeys (``join``), the start-up waterfall (``startup``).

vLLM started with ``--otlp-traces-endpoint`` exports one ``llm_request`` span per finished request with
its exact latencies (TTFT, e2e, queue, prefill, decode) and token counts, plus start-up spans
(``Overall Loading`` > ``EngineCoreProc init`` > ``Load weights``, ``Allocate KV cache``, ``Warmup`` …).
"""

from __future__ import annotations

from .otlp import REQUEST_SPAN, Span, TraceSet, TraceStats, read_traces

__all__ = ["REQUEST_SPAN", "Span", "TraceSet", "TraceStats", "read_traces"]
