"""vLLM's periodic engine stats lines, every generation (V0 `metrics.py`, V1 `loggers.py`)."""

from __future__ import annotations

from typing import Any

from .registry import MESSAGES, LinePattern
from .segments import parse_pairs, parse_stats


def _stats(f: dict[str, Any]) -> None:
    f.update(parse_stats(f.pop("body")))


def _pairs(f: dict[str, Any]) -> None:
    f.update(parse_pairs(f.pop("body")))


for _p in [
    LinePattern(
        id="engine.stats",
        kind="engine_stats",
        prefix="Avg prompt throughput:",
        regex=r"^(?P<body>Avg prompt throughput: .*)$",
        post=_stats,
        dynamic_fields=True,
        examples=[
            "Avg prompt throughput: 488.1 tokens/s, Avg generation throughput: 3.9 tokens/s, Running: 256 reqs, Swapped: 0 reqs, Pending: 744 reqs, GPU KV cache usage: 3.4%, CPU KV cache usage: 0.0%",
            "Avg prompt throughput: 220.6 tokens/s, Avg generation throughput: 23.1 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.4%, CPU KV cache usage: 0.0%.",
            "Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 40.1 tokens/s, Running: 2 reqs, Waiting: 0 reqs GPU KV cache usage: 1.5%.",
            "Avg prompt throughput: 12.0 tokens/s, Avg generation throughput: 40.1 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.5%, Prefix cache hit rate: 0.0%",
        ],
        doc="Periodic engine stats (V0 ≤0.10 with Swapped/Pending, V1 0.7.1–0.8.2 without engine prefix).",
        source="v0/v1",
    ),
    LinePattern(
        id="engine.stats_v1",
        kind="engine_stats",
        prefix="Engine ",
        regex=r"^Engine (?P<engine>\d+): (?P<body>Avg prompt throughput: .*)$",
        post=_stats,
        dynamic_fields=True,
        examples=[
            "Engine 000: Avg prompt throughput: 35.0 tokens/s, Avg generation throughput: 120.3 tokens/s, Running: 4 reqs, Waiting: 60 reqs, CPU KV cache usage: 1.9%, Prefix cache hit rate: 0.0%",
            "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 2002.1 tokens/s, Running: 16 reqs, Waiting: 3 reqs, Deferred: 1 reqs, KV fetch: 0 waiting to start, 1 in progress, 0 completed waiting, Preemptions: 12, GPU KV cache usage: 99.2%, Prefix cache hit rate: 45.0%, External prefix cache hit rate: 0.0%, MM cache hit rate: 10.0%",
        ],
        doc="Periodic V1 engine stats (0.8.3+), one line per engine; optional parts come and go by version.",
        source="v1",
    ),
    LinePattern(
        id="engine.stats_aggregated",
        kind="engine_stats",
        prefix="",
        contains=" Engines Aggregated: ",
        regex=r"^(?P<engines_aggregated>\d+) Engines Aggregated: (?P<body>Avg prompt throughput: .*)$",
        post=_stats,
        dynamic_fields=True,
        examples=["2 Engines Aggregated: Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 80.0 tokens/s, Running: 8 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.0%, Prefix cache hit rate: 0.0%"],
        doc="V1 stats aggregated over data-parallel engines (--aggregate-engine-logging).",
        source="v1",
    ),
    LinePattern(
        id="engine.stats_v1_alpha",
        kind="engine_stats",
        prefix="Running: ",
        regex=r"^Running: (?P<running>\d+) reqs, Waiting: (?P<waiting>\d+) reqs\s*$",
        examples=["Running: 3 reqs, Waiting: 0 reqs "],
        doc="V1 alpha (0.7.0) stats line.",
        source="v1",
    ),
    LinePattern(
        id="v0.prefix_cache_stats",
        kind="prefix_cache_stats",
        prefix="Prefix cache hit rate: ",
        regex=r"^Prefix cache hit rate: GPU: (?P<prefix_cache_hit_rate>[\d.]+)%, CPU: (?P<cpu_prefix_cache_hit_rate>[\d.]+)%$",
        examples=["Prefix cache hit rate: GPU: 12.50%, CPU: 0.00%"],
        doc="V0 prefix-cache hit rate (separate line after the stats line).",
        source="v0",
    ),
    LinePattern(
        id="v1.spec_decode_stats",
        kind="spec_decode_stats",
        prefix="SpecDecoding metrics: ",
        regex=r"^SpecDecoding metrics: (?P<body>.*)$",
        post=_pairs,
        dynamic_fields=True,
        examples=["SpecDecoding metrics: Mean acceptance length: 2.31, Accepted throughput: 40.10 tokens/s, Drafted throughput: 90.00 tokens/s, Accepted: 401 tokens, Drafted: 900 tokens, Per-position acceptance rate: 0.812, 0.655, 0.498, Avg Draft acceptance rate: 44.6%"],
        doc="Speculative-decoding stats (V1).",
        source="v1",
    ),
    LinePattern(
        id="v0.spec_decode_stats",
        kind="spec_decode_stats",
        prefix="Speculative metrics: ",
        regex=r"^Speculative metrics: (?P<body>.*)$",
        post=_pairs,
        dynamic_fields=True,
        examples=["Speculative metrics: Draft acceptance rate: 0.651, System efficiency: 0.570, Number of speculative tokens: 4, Number of accepted tokens: 1000, Number of draft tokens: 1536, Number of emitted tokens: 1200."],
        doc="Speculative-decoding stats (V0).",
        source="v0",
    ),
    LinePattern(
        id="v1.kv_transfer_stats",
        kind="kv_transfer_stats",
        prefix="KV Transfer metrics: ",
        regex=r"^KV Transfer metrics: (?P<body>.*)$",
        post=_pairs,
        dynamic_fields=True,
        examples=["KV Transfer metrics: Num successful transfers=10, Avg xfer time (ms)=3.2, Num failed transfers=0"],
        doc="Disaggregated-prefill KV transfer stats.",
        source="v1",
    ),
    LinePattern(
        id="v1.iteration_details",
        kind="iteration_stats",
        prefix="",
        contains="Iteration(",
        regex=r"^(?:Engine \d+: )?Iteration\((?P<step>\d+)\): (?P<context_requests>\d+) context requests, (?P<context_tokens>\d+) context tokens, (?P<generation_requests>\d+) generation requests, (?P<generation_tokens>\d+) generation tokens, iteration elapsed time: (?P<elapsed_ms>[\d.]+) ms",
        examples=["Iteration(12): 1 context requests, 512 context tokens, 7 generation requests, 7 generation tokens, iteration elapsed time: 35.20 ms"],
        doc="Per-step iteration details (--enable-logging-iteration-details).",
        source="v1",
    ),
]:
    MESSAGES.add(_p)
