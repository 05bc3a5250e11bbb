"""The request-journey lines of the vLLM monitoring handbook (chapter 3): queue → prefill → decode → finish."""

from __future__ import annotations

import re
from typing import Any

from .fields import to_float, to_int, to_seconds
from .registry import MESSAGES, LinePattern

_RID = r"(?P<request_id>\S+?)"
_FIN_REST = re.compile(
    r"(?:\s*Reason: (?P<reason>.*?)\.?(?=\s+Total tokens:|$))?"
    r"(?:\s*Total tokens: (?P<total_tokens>[\d,]+), Total latency: (?P<e2e_s>[\d.]+)s, "
    r"TTFT: (?P<ttft_s>[\d.]+)s, TPOT: (?P<tpot_s>[\d.]+)s)?\s*$"
)
_AFTER = re.compile(r"(?:after|of) (\d+(?:\.\d+)?\s*s)\b")


def _finished(f: dict[str, Any]) -> None:
    rest = f.pop("rest", "") or ""
    f["status"] = f.get("status", "").lower()
    m = _FIN_REST.match(rest)
    if m:
        if m["reason"]:
            f["reason"] = m["reason"].strip()
            t = _AFTER.search(m["reason"])
            if t:
                f["timeout_s"] = to_seconds(t.group(1))
        if m["total_tokens"]:
            f["total_tokens"] = to_int(m["total_tokens"])
            f["e2e_s"] = to_float(m["e2e_s"])  # [\d.]+ may be '1.2.3': None, not a crash
            f["ttft_s"] = to_float(m["ttft_s"])
            f["tpot_s"] = to_float(m["tpot_s"])


HB = [
    LinePattern(
        id="handbook.request_queued",
        kind="request_queued",
        prefix="Added request ",
        regex=rf"^Added request {_RID} to waiting queue\. Queue size: (?P<queue_size>\d+)$",
        fast='Added request {request_id:id} to waiting queue. Queue size: {queue_size:digits}',
        examples=["Added request req_001 to waiting queue. Queue size: 12"],
        doc="A request entered the scheduler's waiting queue.",
        source="handbook",
    ),
    LinePattern(
        id="handbook.request_scheduled",
        kind="request_scheduled",
        prefix="Scheduling request ",
        regex=rf"^Scheduling request {_RID}\. Running: (?P<running>\d+), Waiting: (?P<waiting>\d+), Swapped: (?P<swapped>\d+)$",
        fast='Scheduling request {request_id:id}. Running: {running:digits}, Waiting: {waiting:digits}, Swapped: {swapped:digits}',
        examples=["Scheduling request req_001. Running: 8, Waiting: 11, Swapped: 0"],
        doc="The scheduler picked the request; engine state at that moment.",
        source="handbook",
    ),
    LinePattern(
        id="handbook.queue_wait_exceeded",
        kind="queue_wait_exceeded",
        prefix="Request ",
        contains=" waiting time exceeds ",
        regex=rf"^Request {_RID} waiting time exceeds (?P<waiting_threshold_s>[\d.]+\s*s)\.?(?: (?P<advice>.*))?$",
        examples=["Request req_002 waiting time exceeds 30s. Consider reducing load."],
        doc="A request waited in the queue longer than the threshold.",
        source="handbook",
    ),
    LinePattern(
        id="handbook.prefill_started",
        kind="prefill_started",
        prefix="Prefill started ",
        regex=rf"^Prefill started for {_RID}\. Input tokens: (?P<prompt_tokens>[\d,]+), Block tables: (?P<blocks>\d+)$",
        fast='Prefill started for {request_id:id}. Input tokens: {prompt_tokens:numc}, Block tables: {blocks:digits}',
        examples=["Prefill started for req_001. Input tokens: 2048, Block tables: 32"],
        doc="Prefill began: prompt length and KV blocks allocated.",
        source="handbook",
    ),
    LinePattern(
        id="handbook.prefill_completed",
        kind="prefill_completed",
        prefix="Prefill completed ",
        regex=rf"^Prefill completed for {_RID}\. Latency: (?P<prefill_s>[\d.]+\s*m?s), Throughput: (?P<prefill_throughput>[\d.,]+) tokens/s$",
        fast='Prefill completed for {request_id:id}. Latency: {prefill_s:sec}, Throughput: {prefill_throughput:numcd} tokens/s',
        examples=["Prefill completed for req_001. Latency: 0.342s, Throughput: 5994 tokens/s"],
        doc="Prefill finished: its latency and throughput (the first token follows).",
        source="handbook",
    ),
    LinePattern(
        id="handbook.block_allocation_failed",
        kind="block_allocation_failed",
        prefix="Failed to allocate blocks ",
        regex=rf"^Failed to allocate blocks for {_RID}\.\s*(?P<reason>.*)$",
        examples=["Failed to allocate blocks for req_001. Out of memory."],
        doc="KV-cache blocks could not be allocated for the request (out of KV memory).",
        source="handbook",
    ),
    LinePattern(
        id="handbook.decode_step",
        kind="decode_step",
        prefix="Decode step ",
        regex=rf"^Decode step (?P<step>\d+) for {_RID}\. Batch size: (?P<batch_size>\d+), KV cache usage: (?P<kv_cache_usage>[\d.]+)%$",
        fast='Decode step {step:digits} for {request_id:id}. Batch size: {batch_size:digits}, KV cache usage: {kv_cache_usage:num}%',
        examples=["Decode step 1 for req_001. Batch size: 8, KV cache usage: 45%"],
        doc="One decode step (one generated token) of a request, with batch size and KV usage.",
        source="handbook",
    ),
    LinePattern(
        id="handbook.slow_generation",
        kind="slow_generation",
        prefix="Decode step ",
        regex=rf"^Decode step (?P<step>\d+) for {_RID}\. Token generation speed: (?P<generation_speed>[\d.]+) tokens/s \(below threshold (?P<threshold>[\d.]+) tokens/s\)$",
        fast='Decode step {step:digits} for {request_id:id}. Token generation speed: {generation_speed:num} tokens/s (below threshold {threshold:num} tokens/s)',
        examples=["Decode step 50 for req_001. Token generation speed: 12.5 tokens/s (below threshold 20 tokens/s)"],
        doc="A request generates tokens slower than the threshold.",
        source="handbook",
    ),
    LinePattern(
        id="handbook.request_finished",
        kind="request_finished",
        prefix="Request ",
        regex=rf"^Request {_RID} finished\. Status: (?P<status>[A-Za-z_]+)\.?(?P<rest>.*)$",
        fast='Request {request_id:id} finished. Status: {status:word}. Total tokens: {total_tokens:numc}, Total latency: {e2e_s:num}s, TTFT: {ttft_s:num}s, TPOT: {tpot_s:num}s',
        fast_conv={"status": str.lower, "e2e_s": to_float, "ttft_s": to_float, "tpot_s": to_float},
        examples=[
            "Request req_001 finished. Status: SUCCESS. Total tokens: 2050, Total latency: 3.2s, TTFT: 0.35s, TPOT: 0.058s",
            "Request req_003 finished. Status: ERROR. Reason: Client disconnected.",
            "Request req_004 finished. Status: CANCELLED. Reason: Timeout after 60s.",
        ],
        post=_finished,
        doc="A request finished: status, reason, and the logged TTFT / TPOT / total latency.",
        source="handbook",
    ),
]

for _p in HB:
    MESSAGES.add(_p)
