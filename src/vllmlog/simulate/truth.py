"""Ground truth of a run as JSON: every request's true times and numbers, the injected incidents, counts."""

from __future__ import annotations

import json
from collections import Counter
from typing import IO, Any

from .config import SimConfig
from .formats.base import Clock
from .scheduler import SimResult


def _iso(clock: Clock, t: float | None) -> str | None:
    return None if t is None else clock.iso(t)


def build_truth(
    cfg: SimConfig, result: SimResult, clock: Clock, lines: int, category: str, vllm_version: str = "",
) -> dict[str, Any]:
    """The truth document (`--truth FILE`); times are ISO 8601 local times, durations full-precision seconds."""
    reqs: list[dict[str, Any]] = []
    for r in result.requests:
        queue_s = None if r.scheduled is None else r.scheduled - r.arrival
        ttft_s = None if r.first_token is None else r.first_token - r.arrival
        e2e_s = None if r.finish is None else r.finish - r.arrival
        tpot_s = None
        if r.status == "success" and e2e_s is not None and ttft_s is not None:
            tpot_s = (e2e_s - ttft_s) / (r.out - 1) if r.out > 1 else 0.0
        reqs.append({
            "request_id": r.rid,
            "engine_request_id": r.engine_rid,
            "arrival_ts": _iso(clock, r.arrival),
            "scheduled_ts": _iso(clock, r.scheduled),
            "first_token_ts": _iso(clock, r.first_token),
            "finish_ts": _iso(clock, r.finish),
            "queue_s": queue_s,
            "ttft_s": ttft_s,
            "tpot_s": tpot_s,
            "e2e_s": e2e_s,
            "prompt_tokens": r.prompt,
            "output_tokens": r.out,
            "max_tokens": r.max_tokens,
            "preemptions": r.preemptions,
            "status": r.status,
            "reason": r.reason or None,
            "finish_reason": r.finish_reason,
            "http_status": r.http_status,
            "stream": r.stream,
            "endpoint": r.endpoint,
        })
    status = Counter(r["status"] for r in reqs)
    counts: dict[str, Any] = {
        "lines": lines,
        "requests": len(reqs),
        "status": {k: status.get(k, 0) for k in ("success", "aborted", "cancelled", "error", "unfinished")},
        "preemptions": result.preemptions,
        "prompt_tokens": sum(r.prompt for r in result.requests),
        "output_tokens": sum(r.out for r in result.requests),
        "http_status": {str(k): v for k, v in sorted(Counter(
            r["http_status"] for r in reqs if r["http_status"] is not None).items())},
        "incidents": len(result.incidents),
    }
    return {
        "scenario": cfg.scenario,
        "format": cfg.fmt,
        "seed": cfg.seed,
        "category": category,
        "vllm_version": vllm_version,
        "engine": "v1" if cfg.fmt.startswith("v1") else "v0",
        "start_ts": clock.iso(0.0),
        "ready_ts": _iso(clock, result.ready),
        "end_ts": clock.iso(result.end),
        "config": cfg.to_dict(),
        "incidents": [
            {"category": i.category, "start": clock.iso(i.start), "end": clock.iso(i.end),
             "description": i.description, "primary": i.category == category}
            for i in result.incidents
        ],
        "requests": reqs,
        "counts": counts,
    }


def write_truth(truth: dict[str, Any], fp: IO[str]) -> None:
    """Write the truth document as indented JSON."""
    json.dump(truth, fp, indent=1, ensure_ascii=False)
    fp.write("\n")
