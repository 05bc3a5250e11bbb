"""The numbers every renderer shows — computed once, here.

``analyze`` (terminal, ``--json``, HTML), ``summary``, ``diagnose``, ``requests`` and ``watch`` read
request totals, the request rate, latency percentiles, abort and error ratios (with their
denominators), preemptions (including V1's silent ones) and how long Waiting stayed > 0 from this
module, so the same log gives the same numbers in every command.

Conventions (``vllm bench serve``'s ``calculate_metrics``):

* latency distributions (TTFT, TPOT, e2e, queue, prefill, decode) are over **successful** requests
  only; aborted, failed and cancelled requests count in the rates, the error and abort ratios, and a
  separate time-to-abort distribution;
* TPOT only for outputs of more than one token;
* percentiles are numpy's default (linear interpolation), bit for bit;
* a distribution never mixes measured values (``traced``, ``logged``, ``derived``) with ``estimated``
  ones (1-second log timestamps, inference): when a metric has measured values the estimated ones are
  left out and counted in ``excluded``; an all-estimated distribution says so (``basis: estimated``)
  and carries the timestamp resolution, below which a duration is ``< 1 s``, not ``0.0 ms``.
  SLO counters follow the same rule.

``RequestStats`` folds journeys one at a time (bounded memory: the streaming summary keeps no
journey); ``compute`` turns a ``Run`` (and optionally an already-filled ``RequestStats``) into the
shared document.
"""

from __future__ import annotations

import bisect
import math
import re
from array import array
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .errors import ConfigError

if TYPE_CHECKING:
    from .journeys import Journey
    from .run import Run
    from .series import SeriesBuilder, StatsSample

PCTS = (50, 90, 95, 99)
LATENCIES = ("ttft_s", "tpot_s", "e2e_s", "queue_s", "prefill_s", "decode_s")
#: Provenance values that are measurements (a line states it, a trace carries it, or it follows
#: from measured numbers / sub-second timestamps); everything else is an estimate.
MEASURED = frozenset({"traced", "logged", "derived"})
#: Statuses whose outcome is known (``unfinished`` is not: the log ended or the server restarted).
FINISHED = ("success", "aborted", "error", "cancelled")
#: KV-cache level at which V1 preempts without logging it (K202's ``kv_critical`` default).
KV_CRITICAL = 0.95
KV_CAUTION = 0.80


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


# ----------------------------------------------------------------------------- one journey
def basis_of(source: str | None) -> str:
    """``measured`` for traced/logged/derived provenance, else ``estimated``."""
    return "measured" if (source or "derived") in MEASURED else "estimated"


def latency_value(j: Journey, metric: str) -> tuple[float, str] | None:
    """A journey's ``metric`` as it enters the latency distributions, with its basis
    (``measured``/``estimated``) — or None when it does not count (not a successful request, no value,
    or TPOT of a one-token output). The one gate every renderer and ``watch`` use."""
    if j.status != "success":
        return None
    v = getattr(j, metric)
    if v is None:
        return None
    if metric == "tpot_s" and j.output_tokens is not None and j.output_tokens <= 1:
        return None  # vllm bench serve: TPOT only for outputs of more than one token
    return float(v), basis_of(j.sources.get(metric, "derived"))


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


# ----------------------------------------------------------------------------- journeys, folded
_SLO_METRICS = (("ttft", "ttft_s"), ("speed", "tpot_s"), ("queue", "queue_s"), ("e2e", "e2e_s"))


class RequestStats:
    """Folds journeys (as they complete) into counts and compact per-metric arrays (8 bytes a value).

    Latency values are kept apart by basis (measured / estimated) and only for successful requests
    (``latency_value``); aborted requests' arrival → abort times go to ``time_to_abort``."""

    def __init__(self, slo: SloTargets | None = None) -> None:
        self.slo = slo or SloTargets()
        self.total = 0
        self.by_status: Counter[str] = Counter()
        self.by_reason: Counter[str] = Counter()
        self.by_http: Counter[int] = Counter()
        self.status_sources: Counter[str] = Counter()
        self.values: dict[str, dict[str, array]] = {b: {k: array("d") for k in LATENCIES} for b in ("measured", "estimated")}
        self.sources: dict[str, Counter[str]] = {k: Counter() for k in LATENCIES}
        self.not_successful: Counter[str] = Counter()
        """Per metric: values of aborted/failed/unfinished requests left out of the distributions."""
        self.resolution: dict[str, float] = {}
        """Per metric: the coarsest timestamp resolution among its estimated values."""
        self.abort_times: dict[str, array] = {"measured": array("d"), "estimated": array("d")}
        self.prompt_tokens = array("d")
        self.output_tokens = array("d")
        self.preemptions = 0
        self.preempted_requests = 0
        self.queue_wait_exceeded = 0
        self.retries = 0
        self.first_arrival: datetime | None = None
        self.last_arrival: datetime | None = None
        self.arrivals = 0
        self.arrival_resolution_s = 0.0
        self.arrival_times: dict[str, array] = {}
        """Per file: arrival times (epoch seconds) — the silent-preemption test needs them."""
        self.slo_counts: Counter[str] = Counter()

    # -- folding
    def add(self, j: Journey) -> None:
        """Fold one finished journey in."""
        # each metric's ``latency_value`` is read once and shared with the SLO counters (the same gate, inlined:
        # this runs once per request, and once more per server run in the capacity plan)
        self.total += 1
        st = j.status
        self.by_status[st] += 1
        src = j.sources
        self.status_sources[src.get("status", "none")] += 1
        if j.reason:
            self.by_reason[f"{st}: {j.reason}"] += 1
        if j.http_status is not None:
            self.by_http[j.http_status] += 1
        ok = st == "success"
        one_token = j.output_tokens is not None and j.output_tokens <= 1
        lat: dict[str, tuple[float, str]] = {}
        for k in LATENCIES:
            v = getattr(j, k)
            if v is None:
                continue
            if not ok:
                self.not_successful[k] += 1
                continue
            if k == "tpot_s" and one_token:
                continue  # vllm bench serve: TPOT only for outputs of more than one token
            s = src.get(k, "derived")
            b = "measured" if (s or "derived") in MEASURED else "estimated"
            v = float(v)
            lat[k] = (v, b)
            self.values[b][k].append(v)
            self.sources[k][s] += 1
            if b == "estimated":
                r = j.ts_resolution_s or 1.0
                if r > self.resolution.get(k, 0.0):
                    self.resolution[k] = r
        if st == "aborted" and j.e2e_s is not None:
            self.abort_times[basis_of(src.get("e2e_s", "derived"))].append(j.e2e_s)
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
            self.arrivals += 1
            if self.first_arrival is None or a < self.first_arrival:
                self.first_arrival = a
            if self.last_arrival is None or a > self.last_arrival:
                self.last_arrival = a
            r = j.ts_resolution_s or 1.0
            if r > self.arrival_resolution_s:
                self.arrival_resolution_s = r
            arr = self.arrival_times.get(j.file)
            if arr is None:
                arr = self.arrival_times[j.file] = array("d")
            arr.append(a.timestamp())
        self._slo(j, lat)

    def _slo(self, j: Journey, lat: dict[str, tuple[float, str]] | None = None) -> None:
        """SLO counters: per metric over successful requests, measured and estimated kept apart; ``all``
        counts a failed request as missing its SLO (goodput). ``lat``: the journey's ``latency_value`` per metric
        (computed here when not given)."""
        s = self.slo
        c = self.slo_counts
        if j.status in ("error", "cancelled"):
            c["all_failed"] += 1
            return
        if j.status != "success":
            return
        if lat is None:
            lat = {k: vb for k in ("ttft_s", "tpot_s", "queue_s", "e2e_s") if (vb := latency_value(j, k)) is not None}
        ok_all = True
        known = ""
        for name, metric in _SLO_METRICS:
            if name == "e2e" and s.e2e_s is None:
                continue
            vb = lat.get(metric)
            if name == "queue" and j.queue_wait_exceeded and (vb is None or vb[1] == "estimated"):
                vb = (math.inf, "measured")  # the handbook's "waiting time exceeds 30s" line is a measurement
            if vb is None or (name == "speed" and vb[0] <= 0):
                continue
            v, b = vb
            c[f"{name}_{b}_total"] += 1
            if (v < s.ttft_s if name == "ttft" else 1.0 / v >= s.tokens_per_s if name == "speed"
                    else v < s.queue_s if name == "queue" else v < s.e2e_s):  # type: ignore[operator]
                c[f"{name}_{b}_ok"] += 1
            else:
                ok_all = False
            if b == "measured" or not known:
                known = b
        if known:
            c[f"all_{known}_total"] += 1
            if ok_all:
                c[f"all_{known}_ok"] += 1

    def merge(self, other: RequestStats) -> None:
        """Fold another ``RequestStats`` in: the same document as if its journeys had been added here (the
        distributions sort their values and sums are exact, so the order of folding does not matter)."""
        self.total += other.total
        for mine, theirs in ((self.by_status, other.by_status), (self.by_reason, other.by_reason),
                             (self.by_http, other.by_http), (self.status_sources, other.status_sources),
                             (self.not_successful, other.not_successful), (self.slo_counts, other.slo_counts)):
            mine.update(theirs)
        for b, per in other.values.items():
            for k, arr in per.items():
                self.values[b][k].extend(arr)
        for k, c in other.sources.items():
            self.sources[k].update(c)
        for k, r in other.resolution.items():
            if r > self.resolution.get(k, 0.0):
                self.resolution[k] = r
        for b, arr in other.abort_times.items():
            self.abort_times[b].extend(arr)
        self.prompt_tokens.extend(other.prompt_tokens)
        self.output_tokens.extend(other.output_tokens)
        self.preemptions += other.preemptions
        self.preempted_requests += other.preempted_requests
        self.queue_wait_exceeded += other.queue_wait_exceeded
        self.retries += other.retries
        self.arrivals += other.arrivals
        a = other.first_arrival
        if a is not None and (self.first_arrival is None or a < self.first_arrival):
            self.first_arrival = a
        a = other.last_arrival
        if a is not None and (self.last_arrival is None or a > self.last_arrival):
            self.last_arrival = a
        if other.arrival_resolution_s > self.arrival_resolution_s:
            self.arrival_resolution_s = other.arrival_resolution_s
        for f, arr in other.arrival_times.items():
            mine_arr = self.arrival_times.get(f)
            if mine_arr is None:
                mine_arr = self.arrival_times[f] = array("d")
            mine_arr.extend(arr)

    # -- documents
    @property
    def finished(self) -> int:
        """Requests whose outcome is known (everything but ``unfinished``)."""
        return sum(self.by_status.get(k, 0) for k in FINISHED)

    def rate(self) -> dict[str, Any]:
        """Arrival rate: requests arrived ÷ the arrival window (first → last arrival, plus one
        timestamp resolution: N arrivals logged at 1-second resolution cover last − first + 1 s)."""
        out: dict[str, Any] = {"per_s": None, "window_s": None, "arrivals": self.arrivals, "basis": "arrivals",
                               "first": _iso(self.first_arrival), "last": _iso(self.last_arrival)}
        if self.arrivals >= 2 and self.first_arrival is not None and self.last_arrival is not None:
            w = (self.last_arrival - self.first_arrival).total_seconds() + (self.arrival_resolution_s or 1.0)
            out["window_s"] = w
            out["per_s"] = self.arrivals / w
        return out

    def requests_dict(self, duration_s: float | None = None) -> dict[str, Any]:
        """The ``requests`` block: totals, outcomes, ratios with their denominators, the arrival rate.

        ``duration_s`` (a digest bucket's length) gives a per-bucket rate instead of the arrival rate."""
        tot = self.total
        fin = self.finished
        bad = self.by_status.get("error", 0) + self.by_status.get("cancelled", 0)
        ab = self.by_status.get("aborted", 0)
        rate = self.rate()
        per_s = rate["per_s"] if duration_s is None else ((tot / duration_s) if duration_s else None)
        return {
            "total": tot,
            "by_status": {k: self.by_status.get(k, 0) for k in ("success", "aborted", "error", "cancelled", "unfinished")},
            "finished": fin,
            "failed": bad,
            "aborted": ab,
            "status_sources": dict(self.status_sources),
            "by_reason": dict(self.by_reason.most_common()),
            "by_http_status": {str(k): v for k, v in sorted(self.by_http.items())},
            "rate_per_s": per_s,
            "rate": rate if duration_s is None else {"per_s": per_s, "window_s": duration_s, "basis": "bucket"},
            "error_rate": (bad / fin) if fin else None,
            "abort_rate": (ab / fin) if fin else None,
            "ratio_denominator": "finished",
            "retries": self.retries,
            "first_arrival": _iso(self.first_arrival),
            "last_arrival": _iso(self.last_arrival),
        }

    def latency_dict(self) -> dict[str, Any]:
        """The ``latency`` block: per metric, the distribution over successful requests' measured values
        (or, when there are none, their estimated values: ``basis: estimated`` with the resolution)."""
        out: dict[str, Any] = {}
        for k in LATENCIES:
            meas = self.values["measured"][k]
            est = self.values["estimated"][k]
            if meas:
                d = describe(meas)
                d["basis"] = "measured"
                d["resolution_s"] = None
                d["sources"] = {s: n for s, n in self.sources[k].items() if s in MEASURED}
            else:
                d = describe(est)
                d["basis"] = "estimated" if est else None
                d["resolution_s"] = self.resolution.get(k) if est else None
                d["sources"] = {s: n for s, n in self.sources[k].items() if s not in MEASURED}
            d["excluded"] = {"estimated": len(est) if meas else 0, "not_successful": self.not_successful.get(k, 0)}
            out[k] = d
        return out

    def time_to_abort(self) -> dict[str, Any]:
        """Arrival → abort of aborted requests (measured values, else estimated ones; never mixed)."""
        b = "measured" if self.abort_times["measured"] else "estimated"
        d = describe(self.abort_times[b])
        d["basis"] = b if d["count"] else None
        d["resolution_s"] = 1.0 if b == "estimated" and d["count"] else None
        return d

    def tokens_dict(self) -> dict[str, Any]:
        """Prompt and output token totals and distributions."""
        return {
            "prompt_total": int(math.fsum(self.prompt_tokens)),
            "output_total": int(math.fsum(self.output_tokens)),
            "prompt": describe(self.prompt_tokens),
            "output": describe(self.output_tokens),
        }

    def slo_dict(self) -> dict[str, Any]:
        """SLO attainment against the targets, over successful requests whose number is known (measured
        values when a metric has any, else estimated ones, flagged); ``all`` also counts failed requests."""
        c = self.slo_counts

        def ratio(name: str, failed: int = 0) -> dict[str, Any]:
            for b in ("measured", "estimated"):
                tot = c.get(f"{name}_{b}_total", 0)
                if tot:
                    ok = c.get(f"{name}_{b}_ok", 0)
                    tot += failed
                    return {"met": ok, "total": tot, "attainment": ok / tot, "basis": b}
            return {"met": 0, "total": failed, "attainment": 0.0 if failed else None, "basis": None}

        out = {"targets": asdict(self.slo), "ttft": ratio("ttft"), "generation_speed": ratio("speed"),
               "queue": ratio("queue"), "all": ratio("all", c.get("all_failed", 0))}
        if self.slo.e2e_s is not None:
            out["e2e"] = ratio("e2e")
        return out


# ----------------------------------------------------------------------------- engine series
def held(points: list[tuple[datetime, float]]) -> list[tuple[datetime, float, float]]:
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


def usage(groups: dict[Any, list[tuple[datetime, float]]], thresholds: Sequence[float] = ()) -> dict[str, Any]:
    """Distribution plus time-weighted mean and time above thresholds, over per-engine series."""
    vals: list[float] = []
    tw = 0.0
    tt = 0.0
    above = [0.0] * len(thresholds)
    for pts in groups.values():
        for _ts, v, d in held(pts):
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


def series_groups(series: SeriesBuilder, attr: str, when: Callable[[datetime], bool] | None = None,
                  kinds: tuple[str, ...] = ("engine_stats",)) -> dict[Any, list[tuple[datetime, float]]]:
    """Per (file, server run, engine): ``(ts, value)`` points of one stats field."""
    g: dict[Any, list[tuple[datetime, float]]] = {}
    for s in series.stats:
        if s.source_kind not in kinds or s.ts is None:
            continue
        v = getattr(s, attr)
        if v is None or (when is not None and not when(s.ts)):
            continue
        g.setdefault((s.file, s.server, s.engine), []).append((s.ts, float(v)))
    return g


def decode_groups(series: SeriesBuilder, attr: str, when: Callable[[datetime], bool] | None = None) -> dict[Any, list]:
    """Per (file, server run): ``(ts, value)`` points of the per-second decode aggregates."""
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
        kv = usage(series_groups(series, "kv_cache_usage", when), (KV_CAUTION, KV_CRITICAL))
        kv["source"] = "engine_stats"
    else:
        kv = usage(decode_groups(series, "kv_mean", when), (KV_CAUTION, KV_CRITICAL))
        kv["source"] = "decode_steps"
    qkinds = ("engine_stats",) if has_stats else ("request_scheduled",)
    running = usage(series_groups(series, "running", when, qkinds))
    waiting = usage(series_groups(series, "waiting", when, qkinds), (0,))
    swapped = usage(series_groups(series, "swapped", when, qkinds), (0,))
    queue: dict[str, Any] = {
        "source": qkinds[0],
        "running": running,
        "waiting": waiting,
        "swapped": swapped,
        "max_num_seqs": max_num_seqs,
    }
    if max_num_seqs:
        at_cap = usage(series_groups(series, "running", when, qkinds), (max_num_seqs - 0.5,))
        queue["time_running_at_max_num_seqs_s"] = at_cap.get(f"time_above_{max_num_seqs - 0.5:g}_s")
        queue["running_max_over_max_num_seqs"] = (running["max"] / max_num_seqs) if running["max"] is not None else None
    thr = {
        "prompt_tokens_per_s": usage(series_groups(series, "prompt_throughput", when)),
        "generation_tokens_per_s": usage(series_groups(series, "generation_throughput", when)),
    }
    prefix = describe(v for pts in series_groups(series, "prefix_cache_hit_rate", when).values() for _t, v in pts)
    batch = usage(decode_groups(series, "batch_size_mean", when))
    pre = [s.preemptions for s in series.stats if s.preemptions is not None and (when is None or (s.ts and when(s.ts)))]
    return {"kv_cache_usage": kv, "queue": queue, "throughput": thr, "prefix_cache_hit_rate": prefix,
            "batch_size": batch, "stats_preemptions": sum(pre) if pre else None}


def waiting_span(series: SeriesBuilder, source: str) -> dict[str, Any]:
    """When Waiting was > 0 (first → last sample) and how much of the log had no stats line at all:
    ``time_above_0_s`` counts only observed time (sample-and-hold, a gap over 3× the interval is not held
    across), so a 68-minute span with a 64-minute hole in the stats is 4.5 minutes of observed Waiting."""
    first = last = None
    gaps = 0
    unobserved = 0.0
    for pts in series_groups(series, "waiting", None, (source,)).values():
        pts.sort(key=lambda p: p[0])
        steps = sorted((b[0] - a[0]).total_seconds() for a, b in zip(pts, pts[1:]) if b[0] > a[0])
        med = (percentile(steps, 50) if steps else None) or 1.0
        for (ta, _va), (tb, _vb) in zip(pts, pts[1:]):
            d = (tb - ta).total_seconds()
            if d > 3 * med:
                gaps += 1
                unobserved += d - med
        for ts, v in pts:
            if v > 0:
                first = ts if first is None or ts < first else first
                last = ts if last is None or ts > last else last
    return {"first_ts": _iso(first), "last_ts": _iso(last),
            "span_s": (last - first).total_seconds() if first is not None and last is not None else None,
            "stats_gaps": gaps, "unobserved_s": unobserved}


# ----------------------------------------------------------------------------- preemptions
def silent_preemption_intervals(samples: Sequence[StatsSample], arrivals: Sequence[float] = (),
                                critical: float = KV_CRITICAL, caution: float = KV_CAUTION
                                ) -> list[tuple[StatsSample, StatsSample]]:
    """Consecutive stats samples of one engine between which V1 preempted without logging it.

    The signature (K202's): at a critical KV level in both samples, Running drops while Waiting > 0;
    or, with the cache at the caution level and then critical, prompt throughput in an interval in
    which no request arrived (preempted requests re-prefill). ``arrivals`` are sorted epoch seconds
    (empty when request logging is off: then only the first test applies)."""
    out = []
    for a, b in zip(samples, samples[1:]):
        ka, kb = a.kv_cache_usage or 0.0, b.kv_cache_usage or 0.0
        if ka >= critical and kb >= critical and a.running is not None and b.running is not None \
                and b.running < a.running and (b.waiting or 0) > 0:
            out.append((a, b))
            continue
        if arrivals and ka >= caution and kb >= critical and (b.prompt_throughput or 0) > 0 \
                and a.ts is not None and b.ts is not None:
            ta, tb = a.ts.timestamp(), b.ts.timestamp()
            if arrivals[0] <= ta and bisect.bisect_right(arrivals, ta) == bisect.bisect_right(arrivals, tb):
                out.append((a, b))
    return out


_VERSION = re.compile(r"^(\d{1,9})\.(\d{1,9})(?:\.(\d{1,9}))?")


def _version(v: str | None) -> tuple[int, int, int] | None:
    m = _VERSION.match(v or "")
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


def v1_logs_preemptions(version: str | None) -> bool:
    """Whether a V1 stats line of this release can carry ``Preemptions: N`` (printed when > 0):
    0.11.2 – 0.31. In 0.32 the counter is reset before the line is written, so it never appears."""
    v = _version(version)
    return v is not None and (0, 11, 2) <= v < (0, 32, 0)


def preemptions(run: Run, rs: RequestStats, stats_sum: int | None) -> dict[str, Any]:
    """Preemptions from every source the log has, and whether the count is known at all.

    ``total`` is None when the log cannot tell: a V1 server whose stats line has no ``Preemptions``
    field (0.32 never prints it) and no preemption lines. ``silent`` reports V1's unlogged preemption
    where the stats show its signature (``silent_preemption_intervals``)."""
    pre_events = [e for e in run.notable if e.kind == "preemption"]
    cum = [c for e in pre_events if (c := e.fields.get("cumulative_preemptions")) is not None]
    total: int | None = rs.preemptions
    source = "requests" if rs.preemptions else None
    if cum and max(cum) > (total or 0):
        total, source = max(cum), "v0_cumulative"
    elif pre_events and len(pre_events) > (total or 0):
        total, source = len(pre_events), "warning_lines"
    if stats_sum and stats_sum > (total or 0):
        total, source = stats_sum, "stats"
    # silent V1 preemption (per file, server run and engine, as the rules group them)
    groups: dict[Any, list[StatsSample]] = {}
    for s in run.series.stats:
        if s.source_kind in ("engine_stats", "prometheus"):
            groups.setdefault((s.file, s.server, s.engine, s.process if s.engine is None else None), []).append(s)
    pairs: list[tuple[StatsSample, StatsSample]] = []
    arrivals: dict[str, list[float]] = {}  # per file, sorted once (not once per server run: linear in runs)
    for key, samples in groups.items():
        arr = arrivals.get(key[0])
        if arr is None:
            a = rs.arrival_times.get(key[0])
            arr = arrivals[key[0]] = sorted(a) if a is not None else []
        pairs += silent_preemption_intervals(samples, arr)
    served = {(s.file, s.server) for s in run.series.stats} | {(j.file, j.server) for j in run.journeys}
    if rs.total:
        served |= {(s.file, s.index) for s in run.servers}  # streaming: journeys were folded, not kept
    # a V1 server that never served (start-up failure) preempted nothing: its count is not unknown
    v1_servers = [s for s in run.servers if s.generation == "v1" and (s.file, s.index) in served]
    counted_by_log = bool(total) or any(s.generation in ("v0", "handbook") for s in run.servers) \
        or any(v1_logs_preemptions(s.version) for s in v1_servers)
    if not total and v1_servers and not counted_by_log:
        total, source = None, None  # the log cannot tell how many
    elif not total:
        total, source = 0, source or ("stats" if v1_servers else "warning_lines")
    times = [b.ts for _a, b in pairs if b.ts is not None]
    return {
        "total": total, "source": source, "requests_preempted": rs.preempted_requests,
        "per_request_sum": rs.preemptions, "warning_lines": len(pre_events),
        "v0_cumulative_max": max(cum) if cum else None, "stats_sum": stats_sum,
        "silent": {"inferred": bool(pairs), "intervals": len(pairs),
                   "first_ts": _iso(min(times)) if times else None, "last_ts": _iso(max(times)) if times else None,
                   "lines": sorted({b.line for _a, b in pairs})[:20]},
    }


# ----------------------------------------------------------------------------- what could not be measured
_HINT = "minimum log level is higher than DEBUG"

REMEDY_LATENCY = (
    "OpenTelemetry traces (`vllm serve --otlp-traces-endpoint URL`, then `--traces FILE`: exact per-request "
    "timings), "
    "`--prometheus URL` (vLLM's TTFT/e2e histograms), or millisecond log timestamps "
    "(`vllmlog logging-config --format text`) with `--enable-log-requests`"
)
REMEDY_REQUESTS = "start vLLM with `--enable-log-requests` (per-request lines), or `--prometheus URL` for counts"
REMEDY_PREEMPTIONS = ("`vllm:num_preemptions_total` on vLLM's /metrics (`--prometheus URL`); vLLM 0.11.2–0.31 "
                      "print `Preemptions: N` in the stats line, 0.32 never does")


def unmeasured(run: Run, rs: RequestStats, latency: dict[str, Any], pre: dict[str, Any],
               use: dict[str, Any]) -> list[dict[str, Any]]:
    """What this log cannot tell, why, and how to get it (shown where the numbers would be)."""
    out: list[dict[str, Any]] = []
    hint = next((e for e in run.notable if _HINT in e.text), None)
    hint_d = {"file": hint.file, "line": hint.line, "text": hint.text.split("\n", 1)[0]} if hint else None
    measured = {m for m in ("ttft_s", "tpot_s", "e2e_s") if latency[m]["basis"] == "measured"}
    if rs.total and not measured:
        v1 = any(s.generation == "v1" for s in run.servers)
        why = ("this V1 log at INFO level states no per-request timings (no finish line for completions; "
               "1-second timestamps)" if v1 else "the log states no per-request timings (no finish lines; "
               "1-second timestamps)")
        out.append({"what": "latency", "metrics": ["ttft_s", "tpot_s", "e2e_s"], "why": why,
                    "remedy": REMEDY_LATENCY, "hint": hint_d})
    if not rs.total:
        gen = use["throughput"]["generation_tokens_per_s"]
        run_max = use["queue"]["running"]["max"]
        if (gen.get("max") or 0) > 0 or (run_max or 0) > 0:
            out.append({"what": "requests", "metrics": ["requests"],
                        "why": "the engine served requests (stats lines) but none was logged",
                        "remedy": REMEDY_REQUESTS, "hint": hint_d})
    if pre["total"] is None:
        out.append({"what": "preemptions", "metrics": ["preemptions"],
                    "why": "this vLLM release logs no preemption count", "remedy": REMEDY_PREEMPTIONS, "hint": None})
    return out


# ----------------------------------------------------------------------------- the shared document
def max_num_seqs(run: Run) -> int | None:
    """The largest ``--max-num-seqs`` among the server runs (None when not logged)."""
    vals = [s.args.get("max_num_seqs") for s in run.servers if s.args.get("max_num_seqs")]
    return int(max(vals)) if vals else None


def http_numbers(run: Run) -> dict[str, Any]:
    """HTTP responses by status (uvicorn access lines)."""
    tot = sum(run.http_status.values())
    c4 = sum(v for k, v in run.http_status.items() if 400 <= k < 500)
    c5 = sum(v for k, v in run.http_status.items() if k >= 500)
    return {"by_status": {str(k): v for k, v in sorted(run.http_status.items())}, "total": tot,
            "4xx": c4, "5xx": c5, "errors": c4 + c5, "error_rate": ((c4 + c5) / tot) if tot else None}


def fold(journeys: Iterable[Journey], slo: SloTargets | None = None) -> RequestStats:
    """A ``RequestStats`` over the given journeys."""
    rs = RequestStats(slo)
    for j in journeys:
        rs.add(j)
    return rs


def compute(run: Run, rs: RequestStats | None = None, slo: SloTargets | None = None) -> dict[str, Any]:
    """The numbers every command shows for ``run``. Stable keys: ``requests, latency, time_to_abort_s,
    tokens, throughput, kv_cache_usage, queue, batch_size, prefix_cache_hit_rate, preemptions, http,
    slo, unmeasured`` (+ ``waiting``: how long Waiting stayed > 0).

    ``rs`` holds journeys already folded in while streaming; without it ``run.journeys`` is folded, with the
    open requests the in-flight bound evicted (``run.evicted``: folded into counts, not kept whole).
    ``requests.evicted`` says how many of the ``unfinished`` were evicted from memory (their timings are
    not in the percentiles)."""
    if rs is None:
        rs = fold(run.journeys, slo)
        ev = getattr(run, "evicted", None)
        if ev is not None:
            rs.merge(ev.stats)
    use = engine_use(run.series, max_num_seqs(run))
    lat = rs.latency_dict()
    pre = preemptions(run, rs, use["stats_preemptions"])
    req = rs.requests_dict()
    tokens = rs.tokens_dict()
    w = use["queue"]["waiting"]
    rate = req["rate"]
    wspan = waiting_span(run.series, use["queue"]["source"])
    req["evicted"] = int(getattr(run, "journeys_evicted", 0) or 0)
    return {
        "requests": req,
        "latency": lat,
        "time_to_abort_s": rs.time_to_abort(),
        "tokens": tokens,
        "throughput": dict(use["throughput"], requests_per_s=rate["per_s"],
                           output_tokens_per_s=(tokens["output_total"] / rate["window_s"])
                           if rate["window_s"] and len(rs.output_tokens) else None),
        "kv_cache_usage": use["kv_cache_usage"],
        "queue": dict(use["queue"], queue_wait_exceeded=rs.queue_wait_exceeded),
        "waiting": {"time_above_0_s": w.get("time_above_0_s"), "observed_s": w.get("observed_s"),
                    "max": w.get("max"), "source": use["queue"]["source"], **wspan},
        "batch_size": use["batch_size"],
        "prefix_cache_hit_rate": use["prefix_cache_hit_rate"],
        "preemptions": pre,
        "http": http_numbers(run),
        "slo": rs.slo_dict(),
        "unmeasured": unmeasured(run, rs, lat, pre, use),
    }
