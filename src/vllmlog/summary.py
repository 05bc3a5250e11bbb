"""The service summary: RED (rate, errors, duration) over journeys, USE (KV cache, queue, preemptions)
over the engine series, warnings/errors by template, SLO attainment, and a by-day/by-hour digest.

Percentiles use linear interpolation exactly as numpy's default (``method="linear"``), implemented
here so the library does not need numpy. The JSON keys are stable (see ``summarize``).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .errors import ConfigError
from .journeys import Journey
from .parsing.templates import template

if TYPE_CHECKING:
    from .run import Run
    from .series import SeriesBuilder

PCTS = (50, 90, 95, 99)
LATENCIES = ("ttft_s", "tpot_s", "e2e_s", "queue_s", "prefill_s", "decode_s")
BUCKETS = ("day", "hour")


# ----------------------------------------------------------------------------- statistics
def percentile(sorted_values: Sequence[float], p: float) -> float | None:
    """The ``p``-th percentile of already sorted values, bit-for-bit as ``numpy.percentile`` (linear)."""
    n = len(sorted_values)
    if n == 0:
        return None
    q = p / 100
    v = (n - 1) * q
    if v >= n - 1:
        return float(sorted_values[-1])
    if v <= 0:
        return float(sorted_values[0])
    lo = math.floor(v)
    g = v - lo
    a = sorted_values[lo]
    b = sorted_values[lo + 1]
    d = b - a
    if g >= 0.5:
        return float(b - d * (1 - g))
    return float(a + d * g)


def describe(values: Iterable[float]) -> dict[str, Any]:
    """``count, p50, p90, p95, p99, mean, min, max`` (None when there are no values)."""
    xs = sorted(values)
    n = len(xs)
    out: dict[str, Any] = {"count": n}
    for p in PCTS:
        out[f"p{p}"] = percentile(xs, p)
    out["mean"] = math.fsum(xs) / n if n else None
    out["min"] = float(xs[0]) if n else None
    out["max"] = float(xs[-1]) if n else None
    return out


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts is not None else None


# ----------------------------------------------------------------------------- SLO
@dataclass
class SloTargets:
    """SLO targets (handbook defaults): TTFT < 1 s, generation ≥ 20 tokens/s, queue wait < 30 s."""

    ttft_s: float = 1.0
    tokens_per_s: float = 20.0
    queue_s: float = 30.0
    e2e_s: float | None = None

    @classmethod
    def parse(cls, specs: Sequence[str] | None) -> SloTargets:
        """From ``name=value`` strings (``ttft_s=0.5``, ``tokens_per_s=30``, ``queue_s=10``, ``e2e_s=20``)."""
        t = cls()
        for spec in specs or ():
            name, sep, val = spec.partition("=")
            name = name.strip().replace("-", "_")
            if not sep or name not in cls.__dataclass_fields__:
                raise ConfigError(f"bad SLO target {spec!r}",
                                  hint="use NAME=VALUE with NAME one of ttft_s, tokens_per_s, queue_s, e2e_s")
            try:
                setattr(t, name, float(val.rstrip("s")) if name != "tokens_per_s" else float(val))
            except ValueError:
                raise ConfigError(f"bad SLO value in {spec!r}", hint="the value must be a number") from None
        return t


# ----------------------------------------------------------------------------- journeys
class JourneyStats:
    """Folds journeys (as they complete) into compact per-metric arrays: bounded by 8 bytes a value."""

    def __init__(self, slo: SloTargets | None = None) -> None:
        self.slo = slo or SloTargets()
        self.total = 0
        self.by_status: Counter[str] = Counter()
        self.by_reason: Counter[str] = Counter()
        self.by_http: Counter[int] = Counter()
        self.status_sources: Counter[str] = Counter()
        self.values: dict[str, array] = {k: array("d") for k in LATENCIES}
        self.sources: dict[str, Counter[str]] = {k: Counter() for k in LATENCIES}
        self.prompt_tokens = array("d")
        self.output_tokens = array("d")
        self.preemptions = 0
        self.preempted_requests = 0
        self.queue_wait_exceeded = 0
        self.retries = 0
        self.first_arrival: datetime | None = None
        self.last_arrival: datetime | None = None
        self.slo_counts: Counter[str] = Counter()

    def add(self, j: Journey) -> None:
        """Fold one finished journey in."""
        self.total += 1
        self.by_status[j.status] += 1
        self.status_sources[j.sources.get("status", "none")] += 1
        if j.reason:
            self.by_reason[f"{j.status}: {j.reason}"] += 1
        if j.http_status is not None:
            self.by_http[j.http_status] += 1
        one_token = j.output_tokens is not None and j.output_tokens <= 1
        for k in LATENCIES:
            v = getattr(j, k)
            if k == "tpot_s" and one_token:
                continue  # vllm bench serve: TPOT only for outputs of more than one token
            if v is not None:
                self.values[k].append(v)
                self.sources[k][j.sources.get(k, "derived")] += 1
        if j.prompt_tokens is not None:
            self.prompt_tokens.append(j.prompt_tokens)
        if j.output_tokens is not None:
            self.output_tokens.append(j.output_tokens)
        self.preemptions += j.preemptions
        if j.preemptions:
            self.preempted_requests += 1
        if j.queue_wait_exceeded:
            self.queue_wait_exceeded += 1
        if j.attempt > 1:
            self.retries += 1
        a = j.arrival_ts
        if a is not None:
            if self.first_arrival is None or a < self.first_arrival:
                self.first_arrival = a
            if self.last_arrival is None or a > self.last_arrival:
                self.last_arrival = a
        self._slo(j)

    def _slo(self, j: Journey) -> None:
        s = self.slo
        c = self.slo_counts
        ok_all = True
        known = False
        if j.ttft_s is not None:
            known = True
            c["ttft_total"] += 1
            if j.ttft_s < s.ttft_s:
                c["ttft_ok"] += 1
            else:
                ok_all = False
        if j.tpot_s is not None and j.tpot_s > 0 and not (j.output_tokens is not None and j.output_tokens <= 1):
            known = True
            c["speed_total"] += 1
            if 1.0 / j.tpot_s >= s.tokens_per_s:
                c["speed_ok"] += 1
            else:
                ok_all = False
        if j.queue_s is not None or j.queue_wait_exceeded:
            known = True
            c["queue_total"] += 1
            if not j.queue_wait_exceeded and (j.queue_s is None or j.queue_s < s.queue_s):
                c["queue_ok"] += 1
            else:
                ok_all = False
        if s.e2e_s is not None and j.e2e_s is not None:
            known = True
            c["e2e_total"] += 1
            if j.e2e_s < s.e2e_s:
                c["e2e_ok"] += 1
            else:
                ok_all = False
        if j.status in ("success",) and known:
            c["all_total"] += 1
            if ok_all:
                c["all_ok"] += 1
        elif j.status in ("error", "cancelled"):
            c["all_total"] += 1

    def requests_dict(self, duration_s: float | None) -> dict[str, Any]:
        """The ``requests`` block (RED rate and errors)."""
        tot = self.total
        bad = self.by_status.get("error", 0) + self.by_status.get("cancelled", 0)
        ab = self.by_status.get("aborted", 0)
        return {
            "total": tot,
            "by_status": {k: self.by_status.get(k, 0) for k in ("success", "aborted", "error", "cancelled", "unfinished")},
            "status_sources": dict(self.status_sources),
            "by_reason": dict(self.by_reason.most_common()),
            "by_http_status": {str(k): v for k, v in sorted(self.by_http.items())},
            "rate_per_s": (tot / duration_s) if duration_s else None,
            "error_rate": (bad / tot) if tot else None,
            "abort_rate": (ab / tot) if tot else None,
            "retries": self.retries,
            "first_arrival": _iso(self.first_arrival),
            "last_arrival": _iso(self.last_arrival),
        }

    def latency_dict(self) -> dict[str, Any]:
        """The ``latency`` block: percentiles, mean, max and provenance counts per metric."""
        out: dict[str, Any] = {}
        for k in LATENCIES:
            d = describe(self.values[k])
            d["sources"] = dict(self.sources[k])
            out[k] = d
        return out

    def tokens_dict(self) -> dict[str, Any]:
        """Prompt and output token totals and distributions."""
        return {
            "prompt_total": int(math.fsum(self.prompt_tokens)),
            "output_total": int(math.fsum(self.output_tokens)),
            "prompt": describe(self.prompt_tokens),
            "output": describe(self.output_tokens),
        }

    def slo_dict(self) -> dict[str, Any]:
        """SLO attainment against the targets (only requests whose number is known count)."""
        c = self.slo_counts

        def ratio(name: str) -> dict[str, Any]:
            tot = c.get(f"{name}_total", 0)
            ok = c.get(f"{name}_ok", 0)
            return {"met": ok, "total": tot, "attainment": (ok / tot) if tot else None}

        out = {"targets": asdict(self.slo), "ttft": ratio("ttft"), "generation_speed": ratio("speed"),
               "queue": ratio("queue"), "all": ratio("all")}
        if self.slo.e2e_s is not None:
            out["e2e"] = ratio("e2e")
        return out


# ----------------------------------------------------------------------------- engine series
def _held(points: list[tuple[datetime, float]]) -> list[tuple[datetime, float, float]]:
    """Sample-and-hold: (ts, value, seconds held); gaps over 3× the median interval are capped to it."""
    points.sort(key=lambda p: p[0])
    if not points:
        return []
    gaps = sorted((b[0] - a[0]).total_seconds() for a, b in zip(points, points[1:]) if b[0] > a[0])
    med = percentile(gaps, 50) if gaps else 1.0
    med = med or 1.0
    out = []
    for i, (ts, v) in enumerate(points):
        if i + 1 < len(points):
            d = (points[i + 1][0] - ts).total_seconds()
            if d > 3 * med:
                d = med
        else:
            d = med
        out.append((ts, v, d))
    return out


def _usage(groups: dict[Any, list[tuple[datetime, float]]], thresholds: Sequence[float] = ()) -> dict[str, Any]:
    """Distribution plus time-weighted mean and time above thresholds, over per-engine series."""
    vals: list[float] = []
    tw = 0.0
    tt = 0.0
    above = [0.0] * len(thresholds)
    for pts in groups.values():
        for _ts, v, d in _held(pts):
            vals.append(v)
            tw += v * d
            tt += d
            for i, th in enumerate(thresholds):
                if v > th:
                    above[i] += d
    d = describe(vals)
    d["time_weighted_mean"] = (tw / tt) if tt else None
    d["observed_s"] = tt
    for i, th in enumerate(thresholds):
        key = f"{round(th * 100)}" if th < 1 else f"{th:g}"
        d[f"time_above_{key}_s"] = above[i]
        d[f"fraction_above_{key}"] = (above[i] / tt) if tt else None
    return d


def _series_groups(series: SeriesBuilder, attr: str, when: Callable[[datetime], bool] | None = None,
                   kinds: tuple[str, ...] = ("engine_stats",)) -> dict[Any, list[tuple[datetime, float]]]:
    g: dict[Any, list[tuple[datetime, float]]] = {}
    for s in series.stats:
        if s.source_kind not in kinds or s.ts is None:
            continue
        v = getattr(s, attr)
        if v is None or (when is not None and not when(s.ts)):
            continue
        g.setdefault((s.file, s.server, s.engine), []).append((s.ts, float(v)))
    return g


def _decode_groups(series: SeriesBuilder, attr: str, when: Callable[[datetime], bool] | None = None) -> dict[Any, list]:
    g: dict[Any, list[tuple[datetime, float]]] = {}
    for d in series.decode:
        if when is not None and not when(d.ts):
            continue
        g.setdefault((d.file, d.server), []).append((d.ts, float(getattr(d, attr))))
    return g


def engine_use(series: SeriesBuilder, max_num_seqs: int | None = None,
               when: Callable[[datetime], bool] | None = None) -> dict[str, Any]:
    """USE from the engine series: KV cache, queue (running/waiting/swapped), throughput, batch size."""
    has_stats = any(s.source_kind == "engine_stats" for s in series.stats)
    if has_stats:
        kv = _usage(_series_groups(series, "kv_cache_usage", when), (0.8, 0.95))
        kv["source"] = "engine_stats"
    else:
        kv = _usage(_decode_groups(series, "kv_mean", when), (0.8, 0.95))
        kv["source"] = "decode_steps"
    qkinds = ("engine_stats",) if has_stats else ("request_scheduled",)
    running = _usage(_series_groups(series, "running", when, qkinds))
    waiting = _usage(_series_groups(series, "waiting", when, qkinds), (0,))
    swapped = _usage(_series_groups(series, "swapped", when, qkinds), (0,))
    queue: dict[str, Any] = {
        "source": qkinds[0],
        "running": running,
        "waiting": waiting,
        "swapped": swapped,
        "max_num_seqs": max_num_seqs,
    }
    if max_num_seqs:
        at_cap = _usage(_series_groups(series, "running", when, qkinds), (max_num_seqs - 0.5,))
        queue["time_running_at_max_num_seqs_s"] = at_cap.get(f"time_above_{max_num_seqs - 0.5:g}_s")
        queue["running_max_over_max_num_seqs"] = (running["max"] / max_num_seqs) if running["max"] is not None else None
    thr = {
        "prompt_tokens_per_s": _usage(_series_groups(series, "prompt_throughput", when)),
        "generation_tokens_per_s": _usage(_series_groups(series, "generation_throughput", when)),
    }
    prefix = describe(v for pts in _series_groups(series, "prefix_cache_hit_rate", when).values() for _t, v in pts)
    batch = _usage(_decode_groups(series, "batch_size_mean", when))
    pre = [s.preemptions for s in series.stats if s.preemptions is not None and (when is None or (s.ts and when(s.ts)))]
    return {"kv_cache_usage": kv, "queue": queue, "throughput": thr, "prefix_cache_hit_rate": prefix,
            "batch_size": batch, "stats_preemptions": sum(pre) if pre else None}


def per_engine(series: SeriesBuilder) -> list[dict[str, Any]]:
    """One line per (file, server run, engine): the series' extremes and time-weighted means."""
    keys: dict[tuple, dict[str, Any]] = {}
    for s in series.stats:
        if s.ts is None:
            continue
        k = (s.file, s.server, s.engine if s.source_kind == "engine_stats" else None)
        d = keys.get(k)
        if d is None:
            d = keys[k] = {"file": s.file, "server": s.server, "engine": k[2], "source": s.source_kind, "samples": 0,
                           "first_ts": _iso(s.ts), "last_ts": _iso(s.ts)}
        d["samples"] += 1
        d["last_ts"] = _iso(s.ts)
    out = []
    # each series grouped once per (attribute, kind) and bucketed by (file, server run), in group order:
    # per_engine stays linear in server runs
    by_run: dict[tuple[str, tuple], dict[tuple, list[tuple[tuple, list]]]] = {}

    def runs_of(attr: str, kinds: tuple) -> dict[tuple, list[tuple[tuple, list]]]:
        b = by_run.get((attr, kinds))
        if b is None:
            b = by_run[(attr, kinds)] = {}
            for k, v in _series_groups(series, attr, None, kinds).items():
                b.setdefault((k[0], k[1]), []).append((k, v))
        return b

    for (f, srv, eng), d in sorted(keys.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] if kv[0][2] is not None else -1)):
        kinds = (d["source"],)

        def one(attr: str, f: str = f, srv: int = srv, eng: Any = eng, kinds: tuple = kinds) -> dict[str, Any]:
            g = {k: v for k, v in runs_of(attr, kinds).get((f, srv), ()) if k[2] == eng or eng is None}
            return _usage(g)

        for attr in ("running", "waiting", "swapped", "kv_cache_usage", "generation_throughput", "prompt_throughput"):
            u = one(attr)
            d[attr] = {"max": u["max"], "mean": u["time_weighted_mean"]}
        out.append(d)
    dec: dict[tuple, dict[str, Any]] = {}
    for x in series.decode:
        k = (x.file, x.server)
        d = dec.get(k)
        if d is None:
            d = dec[k] = {"file": x.file, "server": x.server, "engine": None, "source": "decode_steps", "samples": 0,
                          "first_ts": _iso(x.ts), "last_ts": _iso(x.ts), "_bs": 0.0, "_kv": 0.0,
                          "batch_size": {"max": 0, "mean": None}, "kv_cache_usage": {"max": 0.0, "mean": None}}
        d["samples"] += 1
        d["last_ts"] = _iso(x.ts)
        d["_bs"] += x.batch_size_mean
        d["_kv"] += x.kv_mean
        d["batch_size"]["max"] = max(d["batch_size"]["max"], x.batch_size_max)
        d["kv_cache_usage"]["max"] = max(d["kv_cache_usage"]["max"], x.kv_max)
    for d in dec.values():
        d["batch_size"]["mean"] = d.pop("_bs") / d["samples"]
        d["kv_cache_usage"]["mean"] = d.pop("_kv") / d["samples"]
        out.append(d)
    return out


# ----------------------------------------------------------------------------- warnings / errors
def _message(e: Any) -> str:
    """The first line of an event's message, without the process/level/time/source prefix."""
    m = e.fields.get("_message")
    if m:
        return m
    first = e.text.split("\n", 1)[0]
    if e.source:
        i = first.find(e.source + "]")
        if i >= 0:
            return first[i + len(e.source) + 1:].strip()
    return first

def grouped_events(run: Run, levels: tuple[str, ...], when: Callable[[datetime], bool] | None = None,
                   top: int = 50) -> list[dict[str, Any]]:
    """Notable events of the given levels grouped by message template: count, first/last seen."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for e in run.notable:
        lvl = e.level
        if e.kind == "http_access":
            st = e.fields.get("http_status") or 0
            lvl = "ERROR" if st >= 500 else ("WARNING" if st >= 400 else lvl)
        if lvl not in levels:
            continue
        if when is not None and (e.ts is None or not when(e.ts)):
            continue
        tmpl = e.template or template(_message(e))
        key = (e.kind, tmpl)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"kind": e.kind, "template": tmpl, "level": lvl, "count": 0, "first_seen": _iso(e.ts),
                               "last_seen": _iso(e.ts), "file": e.file, "first_line": e.line}
        g["count"] += 1
        if e.ts is not None:
            if g["first_seen"] is None or _iso(e.ts) < g["first_seen"]:  # type: ignore[operator]
                g["first_seen"] = _iso(e.ts)
            if g["last_seen"] is None or _iso(e.ts) > g["last_seen"]:  # type: ignore[operator]
                g["last_seen"] = _iso(e.ts)
    return sorted(groups.values(), key=lambda g: (-g["count"], g["first_seen"] or ""))[:top]


# ----------------------------------------------------------------------------- the summary
def _runs(run: Run) -> list[dict[str, Any]]:
    out = []
    for s in run.servers:
        key_args = {k: s.args[k] for k in ("max_num_seqs", "max_model_len", "max_num_batched_tokens",
                                           "gpu_memory_utilization", "tensor_parallel_size", "enable_prefix_caching",
                                           "enable_chunked_prefill", "dtype", "port") if k in s.args}
        out.append({
            "file": s.file, "index": s.index, "version": s.version, "model": s.model, "generation": s.generation,
            "start_ts": _iso(s.start_ts), "ready_ts": _iso(s.ready_ts), "end_ts": _iso(s.end_ts),
            "ready": s.ready, "shutdown": s.shutdown, "args": key_args,
            "config": {k: v for k, v in s.config.items() if not k.startswith("_")},
            "lines": [s.first_line, s.last_line],
        })
    return out


def _max_num_seqs(run: Run) -> int | None:
    vals = [s.args.get("max_num_seqs") for s in run.servers if s.args.get("max_num_seqs")]
    return int(max(vals)) if vals else None


def _preemptions(run: Run, js: JourneyStats, use: dict[str, Any]) -> dict[str, Any]:
    cum = [e.fields.get("cumulative_preemptions") for e in run.notable if e.kind == "preemption"]
    cum = [c for c in cum if c is not None]
    warnings = sum(1 for e in run.notable if e.kind == "preemption")
    total = js.preemptions
    if cum and max(cum) > total:
        total = max(cum)
    if use.get("stats_preemptions") and use["stats_preemptions"] > total:
        total = use["stats_preemptions"]
    return {"total": total, "requests_preempted": js.preempted_requests, "per_request_sum": js.preemptions,
            "warning_lines": warnings, "v0_cumulative_max": max(cum) if cum else None,
            "stats_sum": use.get("stats_preemptions")}


def _http(run: Run) -> dict[str, Any]:
    tot = sum(run.http_status.values())
    c4 = sum(v for k, v in run.http_status.items() if 400 <= k < 500)
    c5 = sum(v for k, v in run.http_status.items() if k >= 500)
    return {"by_status": {str(k): v for k, v in sorted(run.http_status.items())}, "total": tot,
            "4xx": c4, "5xx": c5, "error_rate": ((c4 + c5) / tot) if tot else None}


def summarize(run: Run, digest: Digest | None = None, slo: SloTargets | None = None,
              by: str | None = None, top: int = 30) -> dict[str, Any]:
    """The summary document. Stable keys: ``time_range, runs, requests, latency, tokens, throughput,
    kv_cache_usage, queue, engines, preemptions, errors, warnings, http, slo`` (+ ``buckets`` with ``by``).

    ``digest`` holds journeys already folded in while streaming; without it ``run.journeys`` is used."""
    if digest is None:
        digest = Digest(slo, by)
        for j in run.journeys:
            digest.add(j)
    js = digest.total
    start, end = run.start_ts, run.end_ts
    dur = (end - start).total_seconds() if start and end else None
    use = engine_use(run.series, _max_num_seqs(run))
    doc: dict[str, Any] = {
        "time_range": {"start": _iso(start), "end": _iso(end), "duration_s": dur},
        "runs": _runs(run),
        "requests": js.requests_dict(dur),
        "latency": js.latency_dict(),
        "tokens": js.tokens_dict(),
        "throughput": dict(use["throughput"], requests_per_s=(js.total / dur) if dur else None,
                           output_tokens_per_s=(js.tokens_dict()["output_total"] / dur)
                           if dur and len(js.output_tokens) else None),
        "kv_cache_usage": use["kv_cache_usage"],
        "queue": dict(use["queue"], queue_wait_exceeded=js.queue_wait_exceeded),
        "batch_size": use["batch_size"],
        "prefix_cache_hit_rate": use["prefix_cache_hit_rate"],
        "engines": per_engine(run.series),
        "preemptions": _preemptions(run, js, use),
        "errors": grouped_events(run, ("ERROR", "CRITICAL"), top=top),
        "warnings": grouped_events(run, ("WARNING",), top=top),
        "http": _http(run),
        "slo": js.slo_dict(),
        "lines": run.parse_stats.lines,
    }
    if run.traces is not None:  # --traces: what the trace input held, how it joined, the start-up waterfall
        doc["traces"] = run.traces
        doc["startup"] = [w.to_dict() for w in run.startup]
    if by is not None:
        doc["buckets"] = buckets(run, by, js.slo, top=top, stats=digest.buckets if digest.by == by else None)
    return doc


def summarize_paths(paths: Sequence[str] | str, *, year: int | None = None, slo: SloTargets | None = None,
                    by: str | None = None, top: int = 30, progress: Callable[[int], None] | None = None,
                    journey_sink: Callable[[Journey], None] | None = None,
                    traces: Sequence[str] | Any = None) -> dict[str, Any]:
    """Stream logs into a summary in bounded memory: journeys are folded in (and passed to
    ``journey_sink``) as they complete, never all kept. ``traces``: OTLP JSON files whose spans join."""
    from .reader import ParseStats, iter_batches
    from .run import Pipeline, bulk_gc, read_trace_input

    digest = Digest(slo, by)

    def both(j: Journey) -> None:
        digest.add(j)
        journey_sink(j)  # type: ignore[misc]

    sink = digest.add if journey_sink is None else both
    st = ParseStats()
    pipe = Pipeline(journey_sink=sink, keep_journeys=False, traces=read_trace_input(traces))
    with bulk_gc():
        for batch in iter_batches(paths, year=year, stats=st, progress=progress):
            pipe.feed(batch)
        run = pipe.finish(st)
    return summarize(run, digest, top=top, by=by)


def _floor(ts: datetime, by: str) -> datetime:
    if by == "day":
        return ts.replace(hour=0, minute=0, second=0, microsecond=0)
    return ts.replace(minute=0, second=0, microsecond=0)


class Digest:
    """A journey sink for streaming summaries: overall ``JourneyStats`` plus one per day/hour bucket."""

    def __init__(self, slo: SloTargets | None = None, by: str | None = None) -> None:
        if by is not None and by not in BUCKETS:
            raise ConfigError(f"--by {by!r} is not supported", hint="use --by day or --by hour")
        self.slo = slo or SloTargets()
        self.by = by
        self.total = JourneyStats(self.slo)
        self.buckets: dict[datetime, JourneyStats] = {}

    def add(self, j: Journey) -> None:
        """Fold one finished journey in (by arrival time for the buckets)."""
        self.total.add(j)
        if self.by is not None:
            ts = j.arrival_ts or j.finish_ts
            if ts is not None:
                k = _floor(ts, self.by)
                b = self.buckets.get(k)
                if b is None:
                    b = self.buckets[k] = JourneyStats(self.slo)
                b.add(j)


def buckets(run: Run, by: str, slo: SloTargets | None = None, top: int = 10,
            stats: dict[datetime, JourneyStats] | None = None) -> list[dict[str, Any]]:
    """The digest: one block per day (or hour) with requests, latency, KV, queue, errors and warnings.

    Journeys are assigned by arrival time, from ``stats`` (a ``Digest``'s buckets) or ``run.journeys``."""
    if by not in BUCKETS:
        raise ConfigError(f"--by {by!r} is not supported", hint="use --by day or --by hour")
    step = timedelta(days=1) if by == "day" else timedelta(hours=1)
    if stats is None:
        d = Digest(slo, by)
        for j in run.journeys:
            d.add(j)
        stats = d.buckets
    keys = set(stats)
    for s in run.series.stats:
        if s.ts is not None:
            keys.add(_floor(s.ts, by))
    for e in run.notable:
        if e.ts is not None and e.level in ("WARNING", "ERROR", "CRITICAL"):
            keys.add(_floor(e.ts, by))
    out = []
    for k in sorted(keys):
        lo, hi = k, k + step

        def when(ts: datetime, lo: datetime = lo, hi: datetime = hi) -> bool:
            return lo <= ts < hi

        js = stats.get(k) or JourneyStats(slo)
        use = engine_use(run.series, _max_num_seqs(run), when)
        lat = js.latency_dict()
        errs = grouped_events(run, ("ERROR", "CRITICAL"), when, top)
        warns = grouped_events(run, ("WARNING",), when, top)
        out.append({
            "start": k.isoformat(), "end": hi.isoformat(),
            "requests": js.requests_dict(step.total_seconds()),
            "latency": {m: {x: lat[m][x] for x in ("count", "p50", "p90", "p95", "p99", "mean", "max")} for m in LATENCIES},
            "kv_cache_usage": use["kv_cache_usage"],
            "queue": use["queue"],
            "throughput": use["throughput"],
            "preemptions": js.preemptions,
            "errors": errs,
            "warnings": warns,
            "error_count": sum(g["count"] for g in errs),
            "warning_count": sum(g["count"] for g in warns),
            "slo": js.slo_dict(),
        })
    return out
