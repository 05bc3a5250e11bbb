"""Engine time series: running / waiting / swapped / KV usage / throughput from stats lines, and
batch size / KV usage from the handbook's per-step decode lines (aggregated per second)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .model import Event


@dataclass(slots=True)
class StatsSample:
    """One periodic stats line (V0 or V1), or one handbook scheduling line."""

    ts: datetime | None
    file: str
    line: int
    process: str | None
    engine: int | None
    running: int | None
    waiting: int | None
    swapped: int | None
    kv_cache_usage: float | None
    prompt_throughput: float | None
    generation_throughput: float | None
    prefix_cache_hit_rate: float | None
    preemptions: int | None
    level: str | None
    source_kind: str
    """``engine_stats`` (periodic stats line) or ``request_scheduled`` (handbook)."""
    server: int = 0
    """Index of the server run (restart) within the file."""


@dataclass(slots=True)
class DecodeSecond:
    """Handbook decode-step lines aggregated over one second."""

    ts: datetime
    file: str
    first_line: int
    steps: int = 0
    batch_size_sum: int = 0
    batch_size_max: int = 0
    kv_sum: float = 0.0
    kv_max: float = 0.0
    requests: set[str] = field(default_factory=set)
    server: int = 0
    """Index of the server run (restart) within the file."""

    @property
    def batch_size_mean(self) -> float:
        """Mean batch size over the second's decode lines."""
        return self.batch_size_sum / self.steps if self.steps else 0.0

    @property
    def kv_mean(self) -> float:
        """Mean KV usage over the second's decode lines."""
        return self.kv_sum / self.steps if self.steps else 0.0


class SeriesBuilder:
    """Accumulates engine series incrementally (bounded: stats lines are few; decode lines are
    folded into one ``DecodeSecond`` per second)."""

    def __init__(self, max_stats: int = 500_000, max_decode_seconds: int = 500_000) -> None:
        self.stats: list[StatsSample] = []
        self.decode: list[DecodeSecond] = []
        self._max_stats = max_stats
        self._max_decode = max_decode_seconds
        self.dropped = 0
        self.server = 0

    def add(self, e: Event) -> None:
        """Fold one event in (ignores kinds that carry no engine state)."""
        k = e.kind
        if k == "decode_step":
            self._decode(e)
        elif k == "engine_stats" or k == "request_scheduled":
            f = e.fields
            if len(self.stats) >= self._max_stats:
                self.dropped += 1
                return
            self.stats.append(
                StatsSample(
                    e.ts, e.file, e.line, e.process, f.get("engine"), f.get("running"), f.get("waiting"),
                    f.get("swapped"), f.get("kv_cache_usage"), f.get("prompt_throughput"),
                    f.get("generation_throughput"), f.get("prefix_cache_hit_rate"), f.get("preemptions"),
                    e.level, k, self.server,
                )
            )

    def _decode(self, e: Event) -> None:
        if e.ts is None:
            return
        f = e.fields
        d = self.decode[-1] if self.decode else None
        if d is None or d.ts != e.ts or d.file != e.file or d.server != self.server:
            if len(self.decode) >= self._max_decode:
                self.dropped += 1
                return
            d = DecodeSecond(e.ts, e.file, e.line, server=self.server)
            self.decode.append(d)
        d.steps += 1
        bs = f.get("batch_size") or 0
        d.batch_size_sum += bs
        if bs > d.batch_size_max:
            d.batch_size_max = bs
        kv = f.get("kv_cache_usage") or 0.0
        d.kv_sum += kv
        if kv > d.kv_max:
            d.kv_max = kv
        if e.request_id is not None and len(d.requests) < 4096:
            d.requests.add(e.request_id)

    def stats_rows(self) -> list[dict[str, Any]]:
        """Stats samples as plain dicts (for tables, JSON, frames)."""
        return [
            {
                "ts": s.ts.isoformat() if s.ts else None, "file": s.file, "line": s.line, "engine": s.engine,
                "server": s.server, "running": s.running, "waiting": s.waiting, "swapped": s.swapped,
                "kv_cache_usage": s.kv_cache_usage, "prompt_throughput": s.prompt_throughput,
                "generation_throughput": s.generation_throughput, "prefix_cache_hit_rate": s.prefix_cache_hit_rate,
                "preemptions": s.preemptions, "source_kind": s.source_kind,
            }
            for s in self.stats
        ]

    def decode_rows(self) -> list[dict[str, Any]]:
        """Per-second decode aggregates as plain dicts."""
        return [
            {
                "ts": d.ts.isoformat(), "file": d.file, "server": d.server, "steps": d.steps, "batch_size_mean": d.batch_size_mean,
                "batch_size_max": d.batch_size_max, "kv_cache_usage_mean": d.kv_mean, "kv_cache_usage_max": d.kv_max,
                "active_requests": len(d.requests),
            }
            for d in self.decode
        ]
