"""What the load needs: request rate over time, concurrency, request lengths, KV tokens per running request,
prefix-cache hits — each figure with its basis."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Sequence

from ..numbers import describe, fold
from .figure import DERIVED, ESTIMATED, LOGGED, Figure

if TYPE_CHECKING:  # pragma: no cover
    from ..client import ClientRecord
    from ..state import Interval, ServiceState


@dataclass
class Lengths:
    """Mean prompt and output tokens per request, and where they came from."""

    prompt: float | None = None
    output: float | None = None
    output_p95: float | None = None
    basis: str = ESTIMATED
    source: str = ""
    count: int = 0
    max_tokens_mean: float | None = None
    """Mean ``max_tokens`` the clients asked for (logged in SamplingParams): an upper bound of the output."""
    prompt_p95: float | None = None


@dataclass
class Load:
    """The load one server run carried."""

    figures: list[Figure] = field(default_factory=list)
    rate_series: list[tuple[datetime, float]] = field(default_factory=list)
    """Arrivals per second per bucket (bucket start, rate)."""
    bucket_s: float = 60.0
    lengths: Lengths = field(default_factory=Lengths)
    demand_peak: int = 0
    """Peak Running + Waiting of a stats line: the concurrency the clients offered."""
    running_max: int = 0
    kv_per_running: float | None = None
    """Median KV tokens held per running request (logged usage × capacity ÷ Running)."""
    e2e_mean_s: float | None = None
    e2e_basis: str | None = None
    ttft_p50_s: float | None = None
    requests: int = 0
    rate_per_s: float | None = None

    def get(self, key: str) -> Figure | None:
        return next((f for f in self.figures if f.key == key), None)


def busy(xs: Sequence[Interval]) -> list[Interval]:
    return [x for x in xs if x.running > 0]


def request_numbers(journeys: Sequence[Any]) -> dict[str, Any]:
    """``requests``, ``tokens`` and ``latency`` of some journeys, as ``numbers.compute`` shapes them (its
    ``RequestStats``: the same computation, over one server run's journeys)."""
    rs = fold(journeys)
    return {"requests": rs.requests_dict(), "tokens": rs.tokens_dict(), "latency": rs.latency_dict()}


def token_numbers(journeys: Sequence[Any]) -> dict[str, Any]:
    """``requests`` and ``tokens`` only (no latency, no rate): what the what-ifs read, without folding every
    latency of every journey (the diagnosis's ``sizing`` runs on every ``diagnose``)."""
    p = [j.prompt_tokens for j in journeys if j.prompt_tokens is not None]
    o = [j.output_tokens for j in journeys if j.output_tokens is not None]
    none = describe([])
    return {"requests": {"total": len(journeys), "rate": {"per_s": None}},
            "tokens": {"prompt_total": int(math.fsum(p)), "output_total": int(math.fsum(o)), "prompt": describe(p),
                       "output": describe(o)},
            "latency": {"e2e_s": none, "ttft_s": none}}


def measure(st: ServiceState, client: Sequence[ClientRecord] = (), numbers: dict[str, Any] | None = None,
            prom: dict[str, Any] | None = None, *, light: bool = False) -> Load:
    """The load of one server run from its journeys, stats lines and (optionally) the client's records and the
    ``/metrics`` histograms (``prom.for_state``).

    ``numbers``: ``numbers.compute`` of a run whose journeys are exactly this server run's (not folded again);
    ``light``: request lengths only (no latency or rate figures), as ``sizing`` needs them."""
    ld = Load()
    cfg = st.config
    journeys = st.view.journeys
    doc = numbers if numbers is not None else token_numbers(journeys) if light else request_numbers(journeys)
    ld.requests = doc["requests"]["total"]
    rate = doc["requests"]["rate"]
    ld.rate_per_s = rate["per_s"]
    f = ld.figures
    if rate["per_s"] is not None:
        f.append(Figure("rate_mean", "request rate (mean)", rate["per_s"], "req/s", LOGGED,
                        f"{rate['arrivals']} arrivals over {rate['window_s']:g} s (first → last arrival)"))
    arrivals = sorted(j.arrival_ts for j in journeys if j.arrival_ts is not None)
    if len(arrivals) >= 2:
        span = (arrivals[-1] - arrivals[0]).total_seconds()
        ld.bucket_s = 10.0 if span < 600 else 60.0 if span < 6 * 3600 else 600.0
        ld.rate_series = _buckets(arrivals, ld.bucket_s)
        peak_t, peak = max(ld.rate_series, key=lambda p: p[1])
        f.append(Figure("rate_peak", f"request rate (peak {ld.bucket_s:g} s)", peak, "req/s", LOGGED,
                        f"arrivals in the busiest {ld.bucket_s:g}-second bucket, from {peak_t:%H:%M:%S}"))
    xs = st.intervals
    bx = busy(xs)
    if xs:
        demand = [x.running + x.waiting for x in xs]
        ld.demand_peak = max(demand)
        ld.running_max = max(x.running for x in xs)
        d = describe(x.running + x.waiting for x in bx) if bx else describe([])
        f.append(Figure("concurrency_peak", "concurrency offered (Running + Waiting, peak)", ld.demand_peak, "req",
                        LOGGED, f"stats lines ({len(xs)} intervals)"))
        if bx:
            f.append(Figure("concurrency_p50", "concurrency while busy (median)", d["p50"], "req", LOGGED,
                            f"Running + Waiting of {len(bx)} busy stats intervals"))
        f.append(Figure("running_max", "Running (peak)", ld.running_max, "req", LOGGED, "stats lines"))
        f.append(Figure("waiting_max", "Waiting (peak)", max(x.waiting for x in xs), "req", LOGGED, "stats lines"))
    ld.lengths = lengths(st, doc["tokens"], client, prom or {})
    L = ld.lengths
    if L.prompt is not None:
        f.append(Figure("prompt_tokens_mean", "prompt length (mean)", L.prompt, "tokens", L.basis, L.source))
    if L.output is not None:
        f.append(Figure("output_tokens_mean", "output length (mean)", L.output, "tokens", L.basis, L.source))
    if L.max_tokens_mean is not None:
        f.append(Figure("max_tokens_mean", "max_tokens asked (mean)", L.max_tokens_mean, "tokens", LOGGED,
                        "SamplingParams of the Received request lines (an upper bound of the output)"))
    # KV tokens per running request: logged usage × logged capacity ÷ logged Running
    if cfg.kv_cache_tokens:
        per = sorted(x.kv * cfg.kv_cache_tokens / x.running for x in bx if x.kv is not None)
        if per:
            med = describe(per)["p50"]
            ld.kv_per_running = med
            res = 0.0005 * cfg.kv_cache_tokens / max(1, ld.running_max)  # usage is printed to 0.1 %
            notes = []
            if res >= 1:
                notes.append(f"usage printed to 0.1 %: ±{res:,.0f} tokens per request at Running {ld.running_max}")
            if any(x.kv >= 0.9 for x in bx if x.kv is not None):
                notes.append("the cache was full in some intervals: there requests held less than they wanted")
            f.append(Figure("kv_tokens_per_running", "KV tokens per running request (median)", med, "tokens", DERIVED,
                            f"KV usage × {cfg.kv_cache_tokens:,} tokens ÷ Running, {len(per)} busy intervals",
                            tuple(notes)))
    for role, what in (("request_prompt_tokens", "prompt length"), ("request_generation_tokens", "output length"),
                       ("queue_time", "time in the queue"), ("e2e", "end-to-end latency")):
        h = (prom or {}).get(role)
        if h is None:
            continue
        unit = "s" if role in ("queue_time", "e2e") else "tokens"
        if role == "queue_time" and h.mean is not None:
            f.append(Figure("queue_time_mean", "time in the queue (mean, /metrics)", h.mean, unit, LOGGED,
                            f"_sum ÷ _count of {h.source}"))
        for q, v in (("p50", h.p50), ("p95", h.p95)):
            if v is not None:
                f.append(Figure(f"{role}_{q}", f"{what} ({q}, /metrics histogram)", v, unit, ESTIMATED,
                                f"histogram_quantile({0.5 if q == 'p50' else 0.95}) of {h.source}",
                                ("observations spread evenly within each bucket (Prometheus's interpolation)",)))
    hits = [x.sample.prefix_cache_hit_rate for x in bx if x.sample.prefix_cache_hit_rate is not None]
    if hits:
        f.append(Figure("prefix_cache_hit_rate", "prefix-cache hit rate (median, busy)", describe(hits)["p50"], "%",
                        LOGGED, f"stats lines ({len(hits)} busy intervals)"))
    lat = doc["latency"]
    e2e, ttft = lat["e2e_s"], lat["ttft_s"]
    if e2e["count"]:
        ld.e2e_mean_s, ld.e2e_basis = e2e["mean"], e2e["basis"]
        f.append(Figure("e2e_mean", "end-to-end latency (mean)", e2e["mean"], "s",
                        LOGGED if e2e["basis"] == "measured" else ESTIMATED,
                        f"{e2e['count']} successful requests ({e2e['basis']})"))
    if ttft["count"]:
        ld.ttft_p50_s = ttft["p50"]
    if ld.e2e_mean_s is None and client:
        es = [r.e2e_s for r in client if r.success and r.e2e_s is not None]
        ts = [r.ttft_s for r in client if r.success and r.ttft_s is not None]
        if es:
            ld.e2e_mean_s, ld.e2e_basis = math.fsum(es) / len(es), "client"
            f.append(Figure("e2e_mean", "end-to-end latency (mean)", ld.e2e_mean_s, "s", LOGGED,
                            f"the client's records ({len(es)} successful requests)"))
        if ts:
            ld.ttft_p50_s = describe(ts)["p50"]
    h = (prom or {}).get("e2e")
    if h is not None and h.mean is not None and (ld.e2e_mean_s is None or ld.e2e_basis == "estimated"):
        # the server's own histogram beats latencies from 1-second log timestamps (and none at all)
        ld.e2e_mean_s, ld.e2e_basis = h.mean, "/metrics"
        ld.figures = f = [x for x in f if x.key != "e2e_mean"]
        f.append(Figure("e2e_mean", "end-to-end latency (mean)", h.mean, "s", LOGGED, f"_sum ÷ _count of {h.source}"))
    return ld


def _buckets(ts: list[datetime], width: float) -> list[tuple[datetime, float]]:
    t0 = ts[0]
    n = int((ts[-1] - t0).total_seconds() // width) + 1
    counts = [0] * n
    for t in ts:
        counts[min(n - 1, int((t - t0).total_seconds() // width))] += 1
    return [(t0 + timedelta(seconds=i * width), c / width) for i, c in enumerate(counts)]


def lengths(st: ServiceState, tok: dict[str, Any], client: Sequence[ClientRecord],
            prom: dict[str, Any] | None = None) -> Lengths:
    """Mean prompt/output tokens: the journeys' own counts (logged or traced), else the client's records, else the
    ``/metrics`` histograms (``_sum`` ÷ ``_count``), else the stats lines' throughput integrated over their
    intervals ÷ the requests that reached the engine."""
    L = Lengths()
    mt = [j.max_tokens for j in st.view.journeys if j.max_tokens]
    if mt:
        L.max_tokens_mean = math.fsum(mt) / len(mt)
    if tok["prompt"]["count"] and tok["output"]["count"]:
        L.prompt, L.output = tok["prompt"]["mean"], tok["output"]["mean"]
        L.output_p95, L.prompt_p95 = tok["output"]["p95"], tok["prompt"]["p95"]
        L.count = tok["output"]["count"]
        L.basis, L.source = LOGGED, f"token counts of {L.count} requests (log lines / traces)"
        return L
    cp = [r.prompt_tokens for r in client if r.prompt_tokens is not None and r.success]
    co = [r.output_tokens for r in client if r.output_tokens is not None and r.success]
    if cp and co:
        L.prompt, L.output = math.fsum(cp) / len(cp), math.fsum(co) / len(co)
        L.output_p95, L.prompt_p95 = describe(co)["p95"], describe(cp)["p95"]
        L.count = len(co)
        L.basis, L.source = LOGGED, f"the client's usage counts ({len(co)} successful requests)"
        return L
    hp, ho = (prom or {}).get("request_prompt_tokens"), (prom or {}).get("request_generation_tokens")
    if hp is not None and ho is not None and hp.mean is not None and ho.mean is not None:
        L.prompt, L.output = hp.mean, ho.mean
        L.prompt_p95, L.output_p95 = hp.p95, ho.p95
        L.count = int(ho.count)
        L.basis, L.source = LOGGED, f"/metrics histograms: _sum ÷ _count of {hp.source.split(': ', 1)[1]}"
        return L
    xs = st.intervals
    n = sum(1 for j in st.view.journeys if j.reached_engine or j.status in ("success", "aborted"))
    if xs and n:
        pt = math.fsum(x.prompt_tps * x.dt_s for x in xs if math.isfinite(x.prompt_tps))
        gt = math.fsum(x.gen_tps * x.dt_s for x in xs if math.isfinite(x.gen_tps))
        if gt > 0 and math.isfinite(pt) and math.isfinite(gt):
            L.prompt, L.output = pt / n, gt / n
            L.count = n
            L.basis = ESTIMATED
            L.source = (f"stats lines: throughput × interval summed ({pt:,.0f} prompt, {gt:,.0f} generated tokens) "
                        f"÷ {n} requests that reached the engine")
    return L
