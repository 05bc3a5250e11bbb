"""Summarise a time-ordered series of snapshots of one target: gauges, rates, bucket quantiles."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .catalog import role_names
from .exposition import Snapshot
from .rates import bucket_deltas, counter_increase, gauge_values, histogram_mean, histogram_quantile
from .versions import VersionGuess, guess_version

#: Latency histograms reported as quantiles (role → key in the report).
LATENCY_ROLES: tuple[str, ...] = ("ttft", "tpot", "itl", "e2e", "queue_time")
QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.95, 0.99)


def resolve(snap: Snapshot, role: str) -> str | None:
    """The first catalog name for `role` that this snapshot actually exposes."""
    for name in role_names(role):
        if snap.has(name) or snap.has(name + "_bucket") or snap.has(name + "_count"):
            return name
    return None


@dataclass(slots=True)
class TargetReport:
    """Everything `scrape` knows about one target over its samples."""

    target: str
    """The URL or first snapshot file."""
    snapshots: list[Snapshot]
    """The samples, oldest first."""
    version: VersionGuess
    """Release range consistent with the names seen."""
    names: dict[str, str] = field(default_factory=dict)
    """Role → metric name resolved in this scrape."""
    running: float | None = None
    """Requests in model execution batches (latest sample, summed over engines)."""
    waiting: float | None = None
    """Requests waiting (latest sample, summed over engines)."""
    swapped: float | None = None
    """Swapped requests (V0 only)."""
    kv_cache_usage: float | None = None
    """KV-cache usage 0..1 (latest sample, max over engines)."""
    rates: dict[str, float | None] = field(default_factory=dict)
    """Per-second rates over the whole window (needs two samples)."""
    quantiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Latency quantiles estimated from histogram bucket deltas (seconds)."""
    findings: list[dict[str, Any]] = field(default_factory=list)
    """Judged problems, as plain dicts shaped like log findings."""
    notes: list[str] = field(default_factory=list)
    """Diagnostics about how numbers were derived."""
    error: str | None = None
    """Why the target could not be scraped, if it could not."""

    @property
    def window_s(self) -> float:
        """Seconds between the first and last sample."""
        return self.snapshots[-1].time - self.snapshots[0].time if len(self.snapshots) > 1 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: one object per target."""
        return {
            "target": self.target,
            "sources": [s.source for s in self.snapshots] if any(s.from_file for s in self.snapshots) else None,
            "samples": len(self.snapshots),
            "window_s": round(self.window_s, 3),
            "first_sample": self.snapshots[0].time if self.snapshots else None,
            "last_sample": self.snapshots[-1].time if self.snapshots else None,
            "vllm_version_guess": str(self.version),
            "engine": self.version.engine,
            "models": sorted({s.labels["model_name"] for snap in self.snapshots[-1:] for s in snap.samples
                              if s.name.startswith("vllm:") and "model_name" in s.labels}),
            "metric_names": self.names,
            "running": self.running,
            "waiting": self.waiting,
            "swapped": self.swapped,
            "kv_cache_usage": self.kv_cache_usage,
            "rates": self.rates,
            "quantiles": self.quantiles,
            "findings": self.findings,
            "notes": self.notes,
            "error": self.error,
        }


def _sum(vals: list[float]) -> float | None:
    return sum(vals) if vals else None


def summarize(target: str, snaps: list[Snapshot]) -> TargetReport:
    """Build the report numbers (no judging) for one target's snapshots."""
    last = snaps[-1]
    rep = TargetReport(target=target, snapshots=snaps, version=guess_version(last))
    for role in ("running", "waiting", "swapped", "kv_usage", "prompt_tokens", "generation_tokens",
                 "preemptions", "request_success", "http_requests", "admission_rejections",
                 "avg_prompt_throughput", "avg_generation_throughput", *LATENCY_ROLES):
        name = resolve(last, role)
        if name:
            rep.names[role] = name
    if "running" not in rep.names:
        rep.notes.append("no vllm:num_requests_running: not a vLLM /metrics, or --disable-log-stats is set")
    rep.running = _sum(gauge_values(last, rep.names["running"])) if "running" in rep.names else None
    rep.waiting = _sum(gauge_values(last, rep.names["waiting"])) if "waiting" in rep.names else None
    rep.swapped = _sum(gauge_values(last, rep.names["swapped"])) if "swapped" in rep.names else None
    if "kv_usage" in rep.names:
        kv = gauge_values(last, rep.names["kv_usage"])
        rep.kv_cache_usage = max(kv) if kv else None
    bases = {s.time_basis for s in snaps}
    if "interval" in bases and len(snaps) > 1:
        rep.notes.append(f"snapshot times unknown: assumed {snaps[1].time - snaps[0].time:g} s apart (--interval)")
    elif "mtime" in bases:
        rep.notes.append("snapshot times taken from file modification times")
    first = snaps[0] if len(snaps) > 1 else None
    rep.rates = window_rates(first, last, rep.names)
    if first is None:
        rep.notes.append("one sample: rates need two; quantiles cover everything since the process started")
    for role in LATENCY_ROLES:
        name = rep.names.get(role)
        if name:
            rep.quantiles[_QKEY[role]] = latency_quantiles(first, last, name)
    return rep


_QKEY = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2e": "e2e", "queue_time": "queue"}


def latency_quantiles(a: Snapshot | None, b: Snapshot, family: str) -> dict[str, Any]:
    """p50/p90/p95/p99 and mean of a latency histogram between two snapshots (bucket estimates)."""
    buckets = bucket_deltas(a, b, family)
    out: dict[str, Any] = {"metric": family, "estimate": "bucket",
                           "basis": "window" if a is not None else "since_start",
                           "count": buckets[-1][1] if buckets else 0.0}
    coarse = []
    finite = [(le, c) for le, c in buckets if le != float("inf")]
    for q in QUANTILES:
        v = histogram_quantile(q, buckets)
        out[f"p{round(q * 100)}"] = None if v is None else round(v, 6)
        if v is not None and finite and q * out["count"] <= finite[0][1]:
            coarse.append(f"p{round(q * 100)}")  # only "≤ first bucket bound" is really known
    out["first_bucket_le"] = finite[0][0] if finite else None
    out["in_first_bucket"] = coarse
    mean = histogram_mean(a, b, family)
    out["mean"] = None if mean is None else round(mean, 6)
    return out


def window_rates(a: Snapshot | None, b: Snapshot, names: dict[str, str]) -> dict[str, float | None]:
    """Per-second rates of the engine counters between a and b (None when not computable)."""
    keys = ("requests_per_s", "prompt_tokens_per_s", "generation_tokens_per_s", "preemptions_per_s",
            "aborts_per_s", "errors_per_s", "http_4xx_per_s", "http_5xx_per_s", "admission_rejections_per_s",
            "abort_ratio", "error_ratio")
    out: dict[str, float | None] = dict.fromkeys(keys)
    if a is None or b.time <= a.time:
        return out
    dt = b.time - a.time

    def inc(role: str, match: dict[str, str] | None = None) -> float | None:
        name = names.get(role)
        return counter_increase(a, b, name, match) if name else None

    def per_s(x: float | None) -> float | None:
        return None if x is None else round(x / dt, 4)

    finished = inc("request_success")
    aborts = inc("request_success", {"finished_reason": "abort"})
    errors = inc("request_success", {"finished_reason": "error"})
    h4 = inc("http_requests", {"status": "4xx"})
    h5 = inc("http_requests", {"status": "5xx"})
    http_all = inc("http_requests")
    out["requests_per_s"] = per_s(finished)
    out["prompt_tokens_per_s"] = per_s(inc("prompt_tokens"))
    out["generation_tokens_per_s"] = per_s(inc("generation_tokens"))
    for key, role in (("prompt_tokens_per_s", "avg_prompt_throughput"),
                      ("generation_tokens_per_s", "avg_generation_throughput")):
        gauge = names.get(role)
        if out[key] is None and gauge:  # ≤0.3.2 had no token counters, only these averaged gauges
            vals = gauge_values(b, gauge)
            out[key] = round(sum(vals), 4) if vals else None
    out["preemptions_per_s"] = per_s(inc("preemptions"))
    est = unfinished_estimate(a, b, names)
    if est is not None and est > (aborts or 0.0):
        aborts = est  # 0.2x+ V1 does not count client aborts in request_success; infer them
    out["aborts_per_s"] = per_s(aborts)
    out["errors_per_s"] = per_s(None if errors is None and h5 is None else (errors or 0.0) + (h5 or 0.0))
    out["http_4xx_per_s"] = per_s(h4)
    out["http_5xx_per_s"] = per_s(h5)
    out["admission_rejections_per_s"] = per_s(inc("admission_rejections"))
    if finished or aborts:
        out["abort_ratio"] = round((aborts or 0.0) / ((finished or 0.0) + (0.0 if est is None else est)), 4)
    denominator = (http_all or 0.0) if http_all else (finished or 0.0)
    if denominator:
        out["error_ratio"] = round(((errors or 0.0) + (h4 or 0.0) + (h5 or 0.0)) / denominator, 4)
    return out


def _is_generation_handler(handler: str) -> bool:
    return handler.startswith("/v1/") and handler != "/v1/models" or handler in ("/generate", "/inference/v1/generate")


def unfinished_estimate(a: Snapshot, b: Snapshot, names: dict[str, str]) -> float | None:
    """Requests answered 2xx but never counted as finished (aborted mid-stream), from a to b.

    Streaming responses are counted by the HTTP instrumentator when the response starts, while
    `vllm:request_success_total` only counts requests that finish: the difference, corrected for the
    change in requests in flight, is the number of requests abandoned by their clients."""
    http, succ = names.get("http_requests"), names.get("request_success")
    if not http or not succ:
        return None
    started = 0.0
    for s in b.series(http):
        if s.labels.get("status") == "2xx" and _is_generation_handler(s.labels.get("handler", "")):
            prev = next((x.value for x in a.series(http) if x.labels == s.labels), 0.0)
            started += s.value - prev if s.value >= prev else s.value
    finished = counter_increase(a, b, succ) or 0.0
    inflight = 0.0
    for role, sign in (("running", 1.0), ("waiting", 1.0)):
        name = names.get(role)
        if name:
            inflight += sign * (sum(gauge_values(b, name)) - sum(gauge_values(a, name)))
    return max(0.0, started - finished - inflight)
