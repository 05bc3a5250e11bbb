"""Chart data for the HTML report: plain lists and dicts, drawn in the page by uPlot (``report.js``).

No numpy and no plotting library on the Python side: series are sorted, split where data is
missing (a gap is ``null`` in the data, so the line stops there), and thinned to at most
``max_points`` per series by keeping each bucket's minimum and maximum (spikes survive).

Every time chart shares one x range (the run's first to last timestamp) and the incident windows
of ``incident_windows``. Times are the log's own wall clock, encoded as if UTC (the page formats
them in UTC), so a chart shows the times the log prints whatever the viewer's time zone.

Numbers shown beside the charts (percentile markers, counts) come from the ``Analysis``
(``red_use``); this module only arranges values for drawing.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from datetime import datetime
from statistics import median
from typing import Any, Callable, Iterable, Sequence

from ..analyze import Analysis, finding_view, severity_name
from ..collapse import as_datetime
from ..numbers import latency_value

MAX_POINTS = 2000
"""Points per series after thinning."""
MAX_SOURCES = 4
"""Engines / files drawn as separate lines of one metric (the rest are named in a note)."""

# colours per metric (source 2.. of the same metric get a dash pattern, not a new colour)
C = {"kv": "#d62728", "kv_decode": "#ff9896", "running": "#2ca02c", "waiting": "#ff7f0e", "swapped": "#9467bd",
     "batch": "#1f77b4", "batch_max": "#9ecae1", "prompt": "#8c564b", "generation": "#17becf",
     "arrivals": "#1f77b4", "failed": "#d62728", "http": "#ff7f0e"}
DASHES: list[list[int] | None] = [None, [6, 3], [2, 2], [8, 3, 2, 3]]

# ok statuses (the requests table and Gantt colour the others)
OK_STATUSES = ("success", "finished", "stop", "length")


def wall(ts: datetime) -> float:
    """The timestamp's wall-clock reading as epoch seconds in UTC (the log's clock, not the viewer's)."""
    # calendar.timegm(ts.timetuple()) without building a struct_time (the same integer: days since 1970-01-01)
    return ((ts.toordinal() - 719163) * 86400 + ts.hour * 3600 + ts.minute * 60 + ts.second) + ts.microsecond / 1e6


# --------------------------------------------------------------------------- incident windows

def incident_windows(a: Analysis) -> list[dict[str, Any]]:
    """The windows every time chart shades, each ``{start, end, onset, label, severity}`` (wall epoch s).

    One per incident (onset → end, its headline) when the analysis carries incidents; otherwise one
    per finding with a first-seen time (end = last seen, or the onset when it has none)."""
    out = []
    incidents = getattr(a, "incidents", None)  # Analysis.incidents: the lead's incident model (vllmlog.incidents)
    if incidents is not None:
        for i in incidents:
            t0 = as_datetime(i.get("onset"))
            if t0 is None:
                continue
            t1 = as_datetime(i.get("end")) or t0
            code = (i.get("cause") or {}).get("code") or ""
            out.append(_window(t0, max(t0, t1), t0, f"{code} {i.get('headline') or ''}".strip(), i.get("severity")))
    else:
        for f in a.findings or []:
            v = finding_view(f)
            t0 = as_datetime(v["first_seen"])
            if t0 is None:
                continue
            t1 = as_datetime(v["last_seen"]) or t0
            out.append(_window(t0, max(t0, t1), t0, f"{v['code']} {v['title']}".strip(), v["severity"]))
    out.sort(key=lambda w: (w["start"], -_SEV_RANK.get(w["severity"], 0)))
    return out


_SEV_RANK = {"info": 0, "warning": 1, "error": 2, "critical": 3}


def _window(start: datetime, end: datetime, onset: datetime, label: str, severity: Any) -> dict[str, Any]:
    return {"start": wall(start), "end": wall(end), "onset": wall(onset), "label": label,
            "severity": severity_name(severity)}


# --------------------------------------------------------------------------- series: gaps and thinning

Point = tuple[float, float]


def split_gaps(points: Sequence[Point], max_dt: float) -> list[list[Point]]:
    """Sorted points cut into runs wherever two neighbours are more than ``max_dt`` seconds apart."""
    runs: list[list[Point]] = []
    cur: list[Point] = []
    prev = None
    for p in points:
        if prev is not None and p[0] - prev > max_dt:
            runs.append(cur)
            cur = []
        cur.append(p)
        prev = p[0]
    if cur:
        runs.append(cur)
    return runs


def thin(points: Sequence[Point], n_out: int) -> list[Point]:
    """At most ~``n_out`` points: per time bucket the minimum and the maximum, in time order
    (first and last point always kept, so the run keeps its extent)."""
    n = len(points)
    if n <= n_out or n_out < 4:
        return list(points)
    buckets = max(1, n_out // 2)
    t0, t1 = points[0][0], points[-1][0]
    span = (t1 - t0) or 1.0
    out: list[Point] = [points[0]]
    lo_i = hi_i = -1
    cur = -1
    for i in range(1, n - 1):
        b = min(buckets - 1, int((points[i][0] - t0) / span * buckets))
        if b != cur:
            if cur >= 0:
                out.extend(points[k] for k in sorted({lo_i, hi_i}))
            cur, lo_i, hi_i = b, i, i
        else:
            y = points[i][1]
            if y < points[lo_i][1]:
                lo_i = i
            if y > points[hi_i][1]:
                hi_i = i
    if cur >= 0:
        out.extend(points[k] for k in sorted({lo_i, hi_i}))
    out.append(points[-1])
    return out


def gapped_series(points: Iterable[Point], max_dt: float, max_points: int) -> tuple[list[float], list[float | None]]:
    """x, y arrays for one line: sorted, split at gaps (a ``None`` between runs breaks the line), thinned."""
    pts = sorted(p for p in points if p[1] is not None and not (isinstance(p[1], float) and math.isnan(p[1])))
    if not pts:
        return [], []
    runs = split_gaps(pts, max_dt)
    total = len(pts)
    xs: list[float] = []
    ys: list[float | None] = []
    for i, run in enumerate(runs):
        if i:
            xs.append(round((xs[-1] + run[0][0]) / 2, 3))
            ys.append(None)
        for x, y in thin(run, max(4, round(max_points * len(run) / total))):
            xs.append(round(x, 3))
            ys.append(round(float(y), 4))
    return xs, ys


def _max_gap(dts: list[float], periodic: bool) -> float:
    """The longest step a line may bridge. Periodic samples (stats lines, decode seconds): 1.5 × the
    usual interval + 1 s, so one missing stats line is a gap; the usual interval is the lower quartile
    of the steps, which missing intervals do not inflate. Event-driven samples (scheduling lines): the
    value holds until the next event, so only 10 × the median step (at least 60 s) is a gap."""
    if not dts:
        return 60.0
    s = sorted(dts)
    if periodic:
        return 1.5 * max(s[len(s) // 4], 1e-3) + 1.0
    return max(60.0, 10 * median(s))


def _sources(samples: Iterable[Any], key: Callable[[Any], Any]) -> dict[Any, list[Any]]:
    groups: dict[Any, list[Any]] = defaultdict(list)
    for s in samples:
        if s.ts is not None:
            groups[key(s)].append(s)
    return dict(groups)


def _source_label(src: Any, multi_files: bool) -> str:
    file, engine = src
    parts = []
    if engine is not None:
        parts.append(f"engine {engine}")
    if multi_files:
        parts.append(file.rsplit("/", 1)[-1])
    return " · ".join(parts)


def _metric_lines(samples: list[Any], attr: str | Callable[[Any], Any], label: str, color: str, scale: str,
                  max_points: int, *, periodic: bool, step: bool = False, note: list[str]) -> list[dict[str, Any]]:
    """One line per source (file, engine) of ``attr``; server restarts and missing intervals are gaps."""
    get = attr if callable(attr) else (lambda s, a=attr: getattr(s, a))
    srcs = _sources(samples, lambda s: (s.file, getattr(s, "engine", None)))
    multi_files = len({f for f, _ in srcs}) > 1
    lines = []
    for n, (src, ss) in enumerate(sorted(srcs.items(), key=lambda kv: (kv[0][0], kv[0][1] if kv[0][1] is not None else -1))):
        if n >= MAX_SOURCES:
            note.append(f"{len(srcs) - MAX_SOURCES} more engines/files of {label!r} not drawn")
            break
        ss.sort(key=lambda s: (s.server, s.ts))
        ts = [wall(s.ts) for s in ss]
        dts = [b - a for a, b in zip(ts, ts[1:]) if b > a]
        max_dt = _max_gap(dts, periodic)
        pts: list[Point] = []
        prev_server = None
        for s, t in zip(ss, ts):
            v = get(s)
            if prev_server is not None and s.server != prev_server and pts:
                # a restart: force a gap between the two server runs
                pts.append((t - 1e-3, math.nan))
            prev_server = s.server
            if v is not None:
                pts.append((t, float(v)))
        xs, ys = _with_forced_gaps(pts, max_dt, max_points)
        if not xs:
            continue
        sl = _source_label(src, multi_files) if len(srcs) > 1 else ""
        lines.append({"label": label + (f" ({sl})" if sl else ""), "color": color, "dash": DASHES[n % len(DASHES)],
                      "scale": scale, "step": step, "x": xs, "y": ys})
    return lines


def _with_forced_gaps(pts: list[Point], max_dt: float, max_points: int) -> tuple[list[float], list[float | None]]:
    """``gapped_series`` where a NaN point also cuts the line (restart boundaries)."""
    runs: list[list[Point]] = [[]]
    for p in pts:
        if math.isnan(p[1]):
            runs.append([])
        else:
            runs[-1].append(p)
    xs: list[float] = []
    ys: list[float | None] = []
    total = sum(len(r) for r in runs) or 1
    for r in runs:
        if not r:
            continue
        x, y = gapped_series(r, max_dt, max(4, round(max_points * len(r) / total)))
        if xs:
            xs.append(round((xs[-1] + x[0]) / 2, 3))
            ys.append(None)
        xs += x
        ys += y
    return xs, ys


# --------------------------------------------------------------------------- time charts

def _kv_thresholds() -> tuple[float, float]:
    """The KV-cache caution / critical levels the diagnosis uses (shared threshold names)."""
    from ..rules.config import HANDBOOK_THRESHOLDS

    return float(HANDBOOK_THRESHOLDS["kv_caution"]), float(HANDBOOK_THRESHOLDS["kv_critical"])


def _time_chart(cid: str, title: str, series: list[dict[str, Any]], scales: dict[str, dict[str, Any]],
                note: list[str], **extra: Any) -> dict[str, Any]:
    return {"id": cid, "kind": "time", "title": title, "height": 240, "series": series, "scales": scales,
            "note": "; ".join(note), **extra}


def chart_kv(a: Analysis, mp: int) -> dict[str, Any] | None:
    """KV-cache usage 0–100 % from stats lines and (handbook) decode steps, caution/critical lines labelled."""
    note: list[str] = []
    st = [s for s in a.run.series.stats if s.kv_cache_usage is not None]
    series = _metric_lines(st, lambda s: s.kv_cache_usage * 100, "KV-cache usage % (stats lines)", C["kv"], "pct", mp,
                           periodic=True, note=note)
    dec = a.run.series.decode
    if dec:
        series += _metric_lines(dec, lambda d: d.kv_max * 100, "KV-cache usage % (decode steps, max per second)",
                                C["kv_decode"] if series else C["kv"], "pct", mp, periodic=True, note=note)
    if not series:
        return None
    caution, critical = _kv_thresholds()
    return _time_chart("chart-kv", "KV-cache usage", series, {"pct": {"label": "KV-cache usage %", "min": 0, "max": 100}},
                       note, thresholds=[
                           {"scale": "pct", "value": round(caution * 100, 2), "label": f"caution {caution * 100:g} %",
                            "color": "#b26a00"},
                           {"scale": "pct", "value": round(critical * 100, 2), "label": f"critical {critical * 100:g} %",
                            "color": "#c62828"}])


def chart_queue(a: Analysis, mp: int) -> dict[str, Any] | None:
    """Running / waiting / swapped (stats lines, step lines) and the decode batch size (handbook)."""
    note: list[str] = []
    series: list[dict[str, Any]] = []
    for kind, periodic in (("engine_stats", True), ("request_scheduled", False)):
        st = [s for s in a.run.series.stats if s.source_kind == kind]
        if not st:
            continue
        suffix = "" if kind == "engine_stats" else " (at scheduling)"
        for name in ("running", "waiting", "swapped"):
            vals = [s for s in st if getattr(s, name) is not None]
            if not vals or (name == "swapped" and not any(s.swapped for s in vals)):
                continue
            lines = _metric_lines(vals, name, name + suffix, C[name], "y", mp, periodic=periodic, step=True, note=note)
            if not periodic:
                for ln in lines:  # event-driven samples beside the periodic ones: same colour, dashed
                    ln["dash"] = [4, 3]
            series += lines
    dec = a.run.series.decode
    if dec:
        series += _metric_lines(dec, lambda d: d.batch_size_mean, "decode batch size (mean per second)", C["batch"], "y",
                                mp, periodic=True, note=note)
        series += _metric_lines(dec, "batch_size_max", "decode batch size (max per second)", C["batch_max"], "y", mp,
                                periodic=True, note=note)
    if not series:
        return None
    return _time_chart("chart-queue", "Requests running / waiting / swapped", series,
                       {"y": {"label": "requests", "min": 0, "integer": True}}, note)


def chart_throughput(a: Analysis, mp: int) -> dict[str, Any] | None:
    """Prompt and generation throughput from the periodic stats lines."""
    note: list[str] = []
    st = [s for s in a.run.series.stats if s.source_kind == "engine_stats"]
    series = []
    for label, attr, color in (("prompt tokens/s", "prompt_throughput", C["prompt"]),
                               ("generation tokens/s", "generation_throughput", C["generation"])):
        vals = [s for s in st if getattr(s, attr) is not None]
        if vals:
            series += _metric_lines(vals, attr, label, color, "y", mp, periodic=True, note=note)
    if not series:
        return None
    return _time_chart("chart-throughput", "Prompt and generation throughput", series,
                       {"y": {"label": "tokens/s", "min": 0}}, note)


def bucket_seconds(span_s: float, target: int = 400) -> int:
    """A round bucket width giving at most ``target`` buckets over ``span_s``."""
    for b in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400):
        if span_s / b <= target:
            return b
    return 86400


def chart_requests(a: Analysis) -> dict[str, Any] | None:
    """Arrivals, failed/aborted requests and HTTP errors per bucket (bars on the shared time axis)."""
    run = a.run
    arrivals = [wall(j.arrival_ts) for j in run.journeys if j.arrival_ts is not None]
    bad = [wall(t) for j in run.journeys
           if j.status not in OK_STATUSES + ("unfinished",) and (t := (j.finish_ts or j.arrival_ts)) is not None]
    http_err = [wall(e.ts) for e in run.events_of("http_access")
                if e.ts is not None and (e.fields.get("http_status") or 0) >= 400]
    allts = arrivals + bad + http_err
    if not allts:
        return None
    lo = min(allts)
    hi = max(allts)
    if run.start_ts is not None and run.end_ts is not None:
        lo, hi = min(lo, wall(run.start_ts)), max(hi, wall(run.end_ts))
    b = bucket_seconds(hi - lo)
    base = lo // b * b
    n = int((hi - base) // b) + 1
    xs = [base + i * b + b / 2 for i in range(n)]

    def per_s(ts: list[float]) -> list[float]:
        c = Counter(int((t - base) // b) for t in ts)
        return [round(c.get(i, 0) / b, 4) for i in range(n)]

    series = []
    for label, ts, color in (("requests/s (arrivals)", arrivals, C["arrivals"]),
                             ("failed or aborted /s", bad, C["failed"]), ("HTTP 4xx/5xx /s", http_err, C["http"])):
        if ts:
            series.append({"label": label, "color": color, "scale": "y", "x": xs, "y": per_s(ts), "bars": True})
    return _time_chart("chart-requests", f"Request rate and errors (per {b} s bucket)", series,
                       {"y": {"label": "per second", "min": 0}}, [], bucket_s=b)


# --------------------------------------------------------------------------- distributions

def _nice_step(raw: float) -> float:
    """1, 2 or 5 × 10^k at or above ``raw``."""
    if raw <= 0 or not math.isfinite(raw):
        return 1.0
    e = math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        s = m * 10 ** e
        if s >= raw * (1 - 1e-9):
            return float(s)
    return float(10 ** (e + 1))


def histogram(values: Sequence[float], resolution: float | None = None, max_bins: int = 60) -> dict[str, Any]:
    """Bins with round edges over ``values`` (the top 0.1 % folded into the last bin, said in ``clipped``).

    Degenerate inputs draw sensibly: one value or all values equal give one bar centred on the value
    with a width of a tenth of it (at least the resolution, or 1 ms); estimated durations at a
    1-second timestamp resolution get bins no narrower than that resolution."""
    v = sorted(float(x) for x in values)
    n = len(v)
    if n == 0:
        return {"edges": [], "counts": [], "clipped": 0}
    lo = v[0]
    hi = v[min(n - 1, int(math.ceil(0.999 * n)) - 1)] if n > 20 else v[-1]
    if hi <= lo:
        w = max(abs(lo) * 0.1, resolution or 0.0, 1e-3)
        return {"edges": [lo - w / 2, lo + w / 2], "counts": [n], "clipped": 0, "single": True}
    bins = min(max_bins, max(5, int(math.sqrt(n)) + 1))
    step = _nice_step((hi - lo) / bins)
    if resolution:
        step = max(step, _nice_step(resolution))
    start = math.floor(lo / step) * step
    if resolution and resolution >= 1:
        start -= resolution / 2  # whole-second values never sit on a bar's edge
    nb = max(1, int(math.floor((hi - start) / step)) + 1)
    counts = [0] * nb
    clipped = 0
    for x in v:
        i = int((x - start) // step)
        if i >= nb:
            i = nb - 1
            clipped += 1
        counts[max(0, i)] += 1
    edges = [round(start + i * step, 9) for i in range(nb + 1)]
    return {"edges": edges, "counts": counts, "clipped": clipped}


def latency_values(a: Analysis, metric: str) -> list[float]:
    """The values behind the distribution analyze reports for ``metric``: the same gate
    (``numbers.latency_value``: successful requests) and the same basis (measured, or estimated when
    nothing was measured) — never a second selection."""
    d = a.red_use.get("durations", {}).get(metric) or {}
    basis = d.get("basis")
    if not d.get("count") or basis is None:
        return []
    return [vb[0] for j in a.run.journeys if (vb := latency_value(j, metric)) is not None and vb[1] == basis]


def chart_distribution(a: Analysis, metric: str, label: str, color: str) -> dict[str, Any] | None:
    """Histogram of one latency with the p50/p90/p99 that ``analyze`` computed marked on it."""
    vals = latency_values(a, metric)
    if not vals:
        return None
    d = a.red_use.get("durations", {}).get(metric) or {}
    res = d.get("resolution_s") if d.get("basis") == "estimated" else None
    h = histogram(vals, res)
    markers = [{"label": q, "value": d[q]} for q in ("p50", "p90", "p99") if d.get(q) is not None]
    note = []
    if h.get("single"):
        note.append(f"all {len(vals):,} values equal" if len(vals) > 1 else "one value")
    if h["clipped"]:
        note.append(f"the last bar includes the {h['clipped']:,} slowest values (up to {max(vals):.3f} s)")
    if res:
        note.append(f"estimated from {res:g}-second log timestamps")
    return {"id": f"chart-dist-{metric}", "kind": "hist", "title": f"{label} (n={d.get('count', len(vals)):,})",
            "height": 220, "color": color, "edges": h["edges"], "counts": h["counts"], "markers": markers,
            "note": "; ".join(note), "n": len(vals)}


def build_charts(a: Analysis, max_points: int = MAX_POINTS) -> dict[str, Any]:
    """Chart specs by report section; a missing chart is ``(id, reason)`` so the page can say why."""
    over: list[Any] = []
    for fn, cid, why in ((chart_kv, "chart-kv", "no KV-cache usage in this log (no stats or decode-step lines)"),
                         (chart_queue, "chart-queue", "no engine stats lines (running/waiting) in this log"),
                         (chart_throughput, "chart-throughput", "no throughput stats lines in this log")):
        fig = fn(a, max_points)
        over.append(fig if fig else (cid, why))
    fig = chart_requests(a)
    over.append(fig if fig else ("chart-requests", "no requests in this log"))
    dist: list[Any] = []
    for metric, label, color in (("ttft_s", "TTFT", "#1f77b4"), ("tpot_s", "TPOT", "#2ca02c"),
                                 ("e2e_s", "End-to-end latency", "#9467bd")):
        fig = chart_distribution(a, metric, label, color)
        dist.append(fig if fig else (f"chart-dist-{metric}", f"no {label} values in this log"))
    return {"over_time": over, "distributions": dist}


def time_range(a: Analysis) -> dict[str, float] | None:
    """The shared x range of the time charts (the run's first to last timestamp)."""
    run = a.run
    if run.start_ts is None or run.end_ts is None:
        return None
    lo, hi = wall(run.start_ts), wall(run.end_ts)
    return {"min": lo, "max": hi if hi > lo else lo + 1}
