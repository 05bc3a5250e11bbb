"""The self-contained HTML report of an ``Analysis``: one file, works offline, safe to share.

Layout: header (time range, server runs, verdict) → findings with evidence → incident timeline →
charts over time (decode batch size / KV usage, running / waiting / swapped, throughput, request
rate and errors) → latency distributions with percentile markers → waterfall of the slowest
requests → requests table (sortable, filterable) → warnings/errors by template → unknown-line
templates.

Safety: every log-derived string is redacted (``Redactor``) and then HTML-escaped here; chart data
travels as JSON inside ``<script type="application/json">`` with ``<``, ``>`` and ``&`` escaped,
so nothing from a log can close the script element or become markup. Plotly is inlined once
(no CDN); series are downsampled (LTTB) to a few thousand points per trace so a multi-million-line
log still yields a report of a few MB.
"""

from __future__ import annotations

import html
import math
import os
import re
from collections import Counter
from datetime import datetime
from importlib import resources
from typing import Any, Sequence

import orjson

from ..analyze import Analysis, finding_view, server_view
from ..fmt import fmt_number, fmt_seconds
from ..parsing.templates import template as mask_template
from ..redact import DEFAULT as DEFAULT_REDACTOR
from ..redact import Redactor
from ..parsing.fields import dumps_safe

MAX_POINTS = 2000
"""Points per trace after downsampling."""
MAX_REQUEST_ROWS = 2000
"""Rows of the requests table (the worst first when a log has more)."""
WATERFALL_ROWS = 30
KEY_ARGS = ("max_num_seqs", "max_model_len", "max_num_batched_tokens", "gpu_memory_utilization",
            "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "enable_prefix_caching",
            "enable_chunked_prefill", "swap_space", "block_size", "kv_cache_dtype", "dtype", "quantization",
            "num_gpu_blocks_override", "cpu_kvcache_space", "enforce_eager", "preemption_mode")
CONFIG_KEYS = ("kv_cache_tokens", "num_gpu_blocks", "max_concurrency", "max_model_len", "architecture",
               "tensor_parallel_size")


def esc(v: Any) -> str:
    """HTML-escape anything (None → empty)."""
    return "" if v is None else html.escape(str(v), quote=True)


# --------------------------------------------------------------------------- downsampling

def lttb(xs: Sequence[float], ys: Sequence[float], n_out: int) -> list[int]:
    """Indices kept by Largest-Triangle-Three-Buckets (keeps spikes; first and last always kept)."""
    n = len(xs)
    if n <= n_out or n_out < 3:
        return list(range(n))
    import numpy as np

    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    every = (n - 2) / (n_out - 2)
    out = [0]
    a = 0
    for i in range(n_out - 2):
        lo = int(math.floor(i * every)) + 1
        hi = min(int(math.floor((i + 1) * every)) + 1, n - 1)
        nlo = hi
        nhi = min(int(math.floor((i + 2) * every)) + 1, n)
        avg_x = x[nlo:nhi].mean() if nhi > nlo else x[-1]
        avg_y = y[nlo:nhi].mean() if nhi > nlo else y[-1]
        seg_x = x[lo:hi]
        seg_y = y[lo:hi]
        if len(seg_x) == 0:
            continue
        area = np.abs((x[a] - avg_x) * (seg_y - y[a]) - (x[a] - seg_x) * (avg_y - y[a]))
        a = lo + int(area.argmax())
        out.append(a)
    out.append(n - 1)
    return out


def _series(points: list[tuple[datetime, float]], max_points: int) -> tuple[list[str], list[float]]:
    """Sort by time, drop NaN, downsample; x as ISO strings (Plotly date axis)."""
    pts = sorted((p for p in points if p[1] is not None and p[0] is not None), key=lambda p: p[0])
    if not pts:
        return [], []
    xs = [p[0].timestamp() for p in pts]
    ys = [float(p[1]) for p in pts]
    keep = lttb(xs, ys, max_points)
    return [pts[i][0].isoformat(sep=" ") for i in keep], [round(ys[i], 4) for i in keep]


# --------------------------------------------------------------------------- charts

def _layout(title: str, ytitle: str = "", y2title: str | None = None, **extra: Any) -> dict[str, Any]:
    lay: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 14}, "x": 0.01},
        "margin": {"l": 55, "r": 55 if y2title else 20, "t": 36, "b": 40},
        "height": 300, "hovermode": "x unified", "legend": {"orientation": "h", "y": -0.2},
        "yaxis": {"title": {"text": ytitle}, "rangemode": "tozero"},
        "paper_bgcolor": "#ffffff", "plot_bgcolor": "#fbfbfd",
    }
    if y2title is not None:
        lay["yaxis2"] = {"title": {"text": y2title}, "overlaying": "y", "side": "right", "rangemode": "tozero",
                         "showgrid": False}
    lay.update(extra)
    return lay


def _line(name: str, xs: list[str], ys: list[float], *, y2: bool = False, color: str | None = None,
          dash: str | None = None, shape: str = "linear") -> dict[str, Any]:
    tr: dict[str, Any] = {"type": "scatter", "mode": "lines", "name": name, "x": xs, "y": ys,
                          "line": {"width": 1.6, "shape": shape}}
    if color:
        tr["line"]["color"] = color
    if dash:
        tr["line"]["dash"] = dash
    if y2:
        tr["yaxis"] = "y2"
    return tr


def _chart_decode(a: Analysis, mp: int) -> dict[str, Any] | None:
    dec = a.run.series.decode
    if dec:
        bx, by = _series([(d.ts, d.batch_size_mean) for d in dec], mp)
        mx, my = _series([(d.ts, d.batch_size_max) for d in dec], mp)
        kx, ky = _series([(d.ts, d.kv_max * 100) for d in dec], mp)
        traces = [_line("batch size (mean/s)", bx, by, color="#1f77b4"),
                  _line("batch size (max/s)", mx, my, color="#9ecae1", dash="dot"),
                  _line("KV-cache usage % (max/s)", kx, ky, y2=True, color="#d62728")]
        title = "Batch size and KV-cache usage during decode"
    else:
        st = [s for s in a.run.series.stats if s.source_kind == "engine_stats"]
        if not any(s.kv_cache_usage is not None for s in st):
            return None
        bx, by = _series([(s.ts, s.running) for s in st if s.running is not None], mp)
        kx, ky = _series([(s.ts, s.kv_cache_usage * 100) for s in st if s.kv_cache_usage is not None], mp)
        traces = [_line("running requests (batch)", bx, by, color="#1f77b4", shape="hv"),
                  _line("KV-cache usage %", kx, ky, y2=True, color="#d62728")]
        title = "Batch size (running) and KV-cache usage (stats lines)"
    lay = _layout(title, "requests in batch", "KV-cache usage %")
    lay["yaxis2"]["range"] = [0, 105]
    lay["shapes"] = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y2", "y0": 95, "y1": 95,
                      "line": {"color": "#d62728", "width": 1, "dash": "dash"}}]
    return {"id": "chart-decode", "data": traces, "layout": lay}


def _chart_queue(a: Analysis, mp: int) -> dict[str, Any] | None:
    st = a.run.series.stats
    traces = []
    for name, attr, color in (("running", "running", "#2ca02c"), ("waiting", "waiting", "#ff7f0e"),
                              ("swapped", "swapped", "#9467bd")):
        pts = [(s.ts, getattr(s, attr)) for s in st if getattr(s, attr) is not None]
        if pts and (attr != "swapped" or any(p[1] for p in pts)):
            xs, ys = _series(pts, mp)
            traces.append(_line(name, xs, ys, color=color, shape="hv"))
    if not traces:
        return None
    return {"id": "chart-queue", "data": traces, "layout": _layout("Requests running / waiting / swapped", "requests")}


def _chart_throughput(a: Analysis, mp: int) -> dict[str, Any] | None:
    st = a.run.series.stats
    traces = []
    for name, attr, color in (("prompt tokens/s", "prompt_throughput", "#8c564b"),
                              ("generation tokens/s", "generation_throughput", "#17becf")):
        pts = [(s.ts, getattr(s, attr)) for s in st if getattr(s, attr) is not None]
        if pts:
            xs, ys = _series(pts, mp)
            traces.append(_line(name, xs, ys, color=color))
    if not traces:
        return None
    return {"id": "chart-throughput", "data": traces, "layout": _layout("Prompt and generation throughput", "tokens/s")}


def _bucket_seconds(span_s: float, target: int = 400) -> int:
    for b in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400):
        if span_s / b <= target:
            return b
    return 86400


def _chart_requests(a: Analysis) -> dict[str, Any] | None:
    run = a.run
    arrivals = [j.arrival_ts for j in run.journeys if j.arrival_ts is not None]
    bad = [j.finish_ts or j.arrival_ts for j in run.journeys
           if j.status not in ("success", "finished", "stop", "length", "unfinished") and (j.finish_ts or j.arrival_ts)]
    http_err = [e.ts for e in run.events_of("http_access") if e.ts is not None and (e.fields.get("http_status") or 0) >= 400]
    if not arrivals and not http_err:
        return None
    allts = arrivals + bad + http_err
    t0, t1 = min(allts), max(allts)
    b = _bucket_seconds((t1 - t0).total_seconds())
    base = t0.timestamp() // b * b

    def hist(ts: list[datetime]) -> tuple[list[str], list[float]]:
        c: Counter[int] = Counter(int((t.timestamp() - base) // b) for t in ts)
        if not c:
            return [], []
        n = max(c) + 1
        return ([datetime.fromtimestamp(base + i * b).isoformat(sep=" ") for i in range(n)],
                [round(c.get(i, 0) / b, 4) for i in range(n)])

    traces = []
    if arrivals:
        xs, ys = hist(arrivals)
        traces.append({"type": "bar", "name": "requests/s (arrivals)", "x": xs, "y": ys, "marker": {"color": "#1f77b4"}})
    if bad:
        xs, ys = hist(bad)
        traces.append({"type": "bar", "name": "failed or aborted/s", "x": xs, "y": ys, "marker": {"color": "#d62728"}})
    if http_err:
        xs, ys = hist(http_err)
        traces.append({"type": "bar", "name": "HTTP 4xx/5xx /s", "x": xs, "y": ys, "marker": {"color": "#ff7f0e"}})
    lay = _layout(f"Request rate and errors (per {b} s bucket)", "per second", barmode="overlay")
    return {"id": "chart-requests", "data": traces, "layout": lay}


def _chart_distribution(a: Analysis, metric: str, label: str, color: str) -> dict[str, Any] | None:
    vals = [float(v) for j in a.run.journeys if (v := getattr(j, metric, None)) is not None]
    if not vals:
        return None
    import numpy as np

    arr = np.asarray(vals)
    d = a.red_use.get("durations", {}).get(metric) or {}
    hi = float(np.quantile(arr, 0.999)) if len(arr) > 20 else float(arr.max())
    lo = float(arr.min())
    if hi <= lo:
        hi = lo + 1e-3
    counts, edges = np.histogram(np.clip(arr, lo, hi), bins=min(60, max(5, int(math.sqrt(len(arr))) + 1)), range=(lo, hi))
    centers = [round(float((edges[i] + edges[i + 1]) / 2), 5) for i in range(len(counts))]
    width = float(edges[1] - edges[0])
    traces: list[dict[str, Any]] = [{"type": "bar", "name": label, "x": centers, "y": counts.tolist(), "width": width,
                                     "marker": {"color": color}, "hovertemplate": "%{x:.3f} s: %{y} requests<extra></extra>"}]
    shapes, notes = [], []
    for q, dash, y in (("p50", "solid", 1.0), ("p90", "dash", 0.9), ("p99", "dot", 0.8)):
        v = d.get(q)
        if v is None:
            continue
        shapes.append({"type": "line", "x0": v, "x1": v, "yref": "paper", "y0": 0, "y1": 1,
                       "line": {"color": "#333", "width": 1.2, "dash": dash}})
        notes.append({"x": v, "y": y, "yref": "paper", "text": f"{q} {_fmt_s(v)}", "showarrow": False,
                      "xanchor": "left", "yanchor": "top", "font": {"size": 10}, "bgcolor": "rgba(255,255,255,0.7)"})
    lay = _layout(f"{label} distribution (n={len(vals):,})", "requests", shapes=shapes, annotations=notes,
                  hovermode="closest", showlegend=False, height=260)
    lay["xaxis"] = {"title": {"text": "seconds"}}
    return {"id": f"chart-dist-{metric}", "data": traces, "layout": lay}


def _chart_waterfall(a: Analysis, rd: Redactor) -> dict[str, Any] | None:
    js = [j for j in a.run.journeys if j.arrival_ts is not None and (j.e2e_s is not None or j.finish_ts is not None)]
    if not js:
        return None

    def total(j: Any) -> float:
        if j.e2e_s is not None:
            return float(j.e2e_s)
        return (j.finish_ts - j.arrival_ts).total_seconds()

    slow = sorted(js, key=total, reverse=True)[:WATERFALL_ROWS]
    slow.reverse()  # slowest on top of a horizontal bar chart
    t0 = min(j.arrival_ts for j in js)
    names = [esc(rd(j.request_id)) for j in slow]
    segs: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in ("queue", "prefill", "decode", "total")}
    for j in slow:
        start = (j.arrival_ts - t0).total_seconds()
        tot = total(j)
        q = j.queue_s
        p = j.prefill_s
        if q is None and p is None and j.ttft_s is not None:
            p = float(j.ttft_s)  # no breakdown: time to first token as one segment
        parts = {"queue": q or 0.0, "prefill": p or 0.0}
        parts["decode"] = j.decode_s if j.decode_s is not None else max(0.0, tot - parts["queue"] - parts["prefill"])
        if q is None and p is None and j.decode_s is None:
            parts = {"queue": 0.0, "prefill": 0.0, "decode": 0.0, "total": tot}
        else:
            parts["total"] = 0.0
        off = start
        for k in ("queue", "prefill", "decode", "total"):
            segs[k][0].append(round(off, 4))
            segs[k][1].append(round(parts.get(k, 0.0) or 0.0, 4))
            off += parts.get(k, 0.0) or 0.0
    colors = {"queue": "#ff7f0e", "prefill": "#9467bd", "decode": "#2ca02c", "total": "#7f7f7f"}
    labels = {"queue": "queue", "prefill": "prefill (to first token)", "decode": "decode", "total": "end-to-end (no breakdown)"}
    traces = []
    for k, (base, width) in segs.items():
        if not any(width):
            continue
        traces.append({"type": "bar", "orientation": "h", "name": labels[k], "y": names, "x": width, "base": base,
                       "marker": {"color": colors[k]}, "hovertemplate": "%{y}: " + k + " %{x:.3f} s<extra></extra>"})
    lay = _layout(f"Slowest {len(slow)} requests: queue / prefill / decode (seconds since {t0.isoformat(sep=' ')})", "",
                  barmode="overlay", hovermode="closest", height=max(260, 22 * len(slow) + 90))
    lay["xaxis"] = {"title": {"text": "seconds since first request"}}
    lay["yaxis"] = {"automargin": True, "type": "category"}
    lay["margin"]["l"] = 10
    return {"id": "chart-waterfall", "data": traces, "layout": lay}


def build_charts(a: Analysis, rd: Redactor, max_points: int = MAX_POINTS) -> dict[str, list[dict[str, Any] | tuple[str, str]]]:
    """Figures by report section; a missing figure is ``(id, reason)`` so the page can say why."""
    over: list[Any] = []
    for fn, cid, why in ((_chart_decode, "chart-decode", "no decode-step or KV-cache lines in this log"),
                         (_chart_queue, "chart-queue", "no engine stats lines (running/waiting) in this log"),
                         (_chart_throughput, "chart-throughput", "no throughput stats lines in this log")):
        fig = fn(a, max_points)
        over.append(fig if fig else (cid, why))
    fig = _chart_requests(a)
    over.append(fig if fig else ("chart-requests", "no requests in this log"))
    dist: list[Any] = []
    for metric, label, color in (("ttft_s", "TTFT", "#1f77b4"), ("tpot_s", "TPOT", "#2ca02c"), ("e2e_s", "End-to-end latency", "#9467bd")):
        fig = _chart_distribution(a, metric, label, color)
        dist.append(fig if fig else (f"chart-dist-{metric}", f"no {label} values in this log"))
    fig = _chart_waterfall(a, rd)
    wf = [fig if fig else ("chart-waterfall", "no finished requests with timings in this log")]
    return {"over_time": over, "distributions": dist, "waterfall": wf}


# --------------------------------------------------------------------------- HTML sections

_HL_RX = re.compile(r"\b(CRITICAL|ERROR|WARNING|WARN)\b|(\b(?:Traceback|Exception|Error|OOM|out of memory|preempted|"
                    r"Preempt\w*|KV cache|timeout|aborted|failed|killed|dead)\b)", re.IGNORECASE)


def highlight(text: str) -> str:
    """Escaped log text with levels and alarming words wrapped in spans (escape first, then mark in
    one pass, so markup we add is never re-matched)."""

    def mark(m: re.Match[str]) -> str:
        w = m.group(0)
        if m.group(1) and w.isupper():
            return f'<span class="lv lv-{w.lower()}">{w}</span>'
        return f"<mark>{w}</mark>"

    return _HL_RX.sub(mark, esc(text))


_TICKS = re.compile(r"`([^`\n]{1,200})`")


def prose(text: str) -> str:
    """Escaped prose with `backticked` flags shown as inline code (escape first, then mark)."""
    return _TICKS.sub(r"<code class='inline'>\1</code>", esc(text))


def _fmt_s(v: Any) -> str:
    """12.34 s, 340 ms."""
    return fmt_seconds(v, sep=" ")


def _fmt_n(v: Any, pct: bool = False) -> str:
    """1,234 · 1,234.5 · 45.2 % (pct)."""
    return fmt_number(v, pct, pct_digits=1, sep=" ")


def _header(a: Analysis, rd: Redactor, title: str) -> str:
    run = a.run
    v = a.verdict
    tr = "–"
    if run.start_ts and run.end_ts:
        dur = (run.end_ts - run.start_ts).total_seconds()
        tr = f"{run.start_ts.isoformat(sep=' ')} → {run.end_ts.isoformat(sep=' ')} ({_fmt_s(dur)})"
    counts = Counter(f["severity"] for f in a.findings or [])
    fsum = ", ".join(f"{counts[s]} {s}" for s in ("critical", "error", "warning", "info") if counts.get(s)) or "no findings"
    if a.findings is None:
        fsum = "diagnosis unavailable"
    rows = []
    for s in run.servers:
        d = server_view(s.to_dict())
        args = {k: d["args"][k] for k in KEY_ARGS if k in (d.get("args") or {})}
        cfg = {k: d["config"][k] for k in CONFIG_KEYS if k in (d.get("config") or {}) and k not in args}
        kv = "; ".join(f"{k}={rd(str(x))}" for k, x in {**args, **cfg}.items())
        state = "ready" if d["ready"] else "never ready"
        if d["shutdown"]:
            state += ", shut down"
        rows.append(
            f"<tr><td>{esc(rd(d['file']))}#{d['index']}</td><td>{esc(d['version'] or '?')}</td>"
            f"<td>{esc(rd(d['model'] or '?'))}</td><td>{esc(d['generation'] or '')}</td>"
            f"<td>{esc((d['start_ts'] or '')[:19].replace('T', ' '))}</td><td>{esc(state)}</td>"
            f"<td class='args'>{esc(kv)}</td><td>{d['first_line']}–{d['last_line']}</td></tr>")
    servers = ("<table class='servers'><thead><tr><th>run</th><th>vLLM</th><th>model</th><th>log style</th>"
               "<th>started</th><th>state</th><th>key args / config</th><th>lines</th></tr></thead><tbody>"
               + "".join(rows) + "</tbody></table>") if rows else "<p class='muted'>No vLLM server start found.</p>"
    files = ", ".join(esc(rd(f)) for f in run.files)
    return (
        f"<header><div class='titlebar'><h1>{esc(title)}</h1>"
        f"<span class='verdict verdict-{v}' id='verdict'>{v}</span></div>"
        f"<p class='meta'><b>Time range</b> {esc(tr)} · <b>Files</b> {files} · "
        f"<b>Lines</b> {run.parse_stats.lines:,} · <b>Findings</b> {esc(fsum)}</p>"
        f"<h2 class='small'>Server runs</h2>{servers}</header>"
    )


def _red_use(a: Analysis) -> str:
    s = a.red_use
    r = s["requests"]
    d = s["durations"]
    u = s["use"]
    red = [("requests", f"{r['total']:,}"), ("rate", f"{r['rate_per_s']:.2f} req/s" if r["rate_per_s"] else "–"),
           ("failed / aborted", f"{r['failed_or_aborted']:,}"), ("unfinished", f"{r['unfinished']:,}"),
           ("HTTP errors", f"{r['http']['errors']:,} of {r['http']['total']:,}")]
    approx = [m for m in d if (d[m].get("estimated") or 0) > 0.5 and (d[m].get("ts_resolution_s") or 0) >= 1]
    lat = "".join(
        f"<tr><th>{esc(lbl)}{' ≈' if m in approx else ''}</th><td>{d[m].get('count', 0):,}</td><td>{_fmt_s(d[m].get('p50'))}</td>"
        f"<td>{_fmt_s(d[m].get('p90'))}</td><td>{_fmt_s(d[m].get('p99'))}</td><td>{_fmt_s(d[m].get('max'))}</td></tr>"
        for m, lbl in (("queue_s", "queue"), ("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "e2e")))
    if approx:
        lat += "<tr><td colspan='6' class='muted'>≈ estimated from 1-second log timestamps</td></tr>"
    use = []
    for k, lbl, pct in (("running", "running", False), ("waiting", "waiting", False), ("swapped", "swapped", False),
                        ("kv_cache_usage", "KV-cache usage", True), ("batch_size", "decode batch size", False),
                        ("prompt_throughput", "prompt tok/s", False), ("generation_throughput", "generation tok/s", False)):
        m = u.get(k) or {}
        if m.get("count"):
            use.append((lbl, f"mean {_fmt_n(m['mean'], pct)} · max {_fmt_n(m['max'], pct)}"))
    if u.get("preemptions") is not None:
        use.append(("preemptions", _fmt_n(u["preemptions"])))
    if u.get("preempted_requests"):
        use.append(("preempted requests", _fmt_n(u["preempted_requests"])))

    def kv(rows: list[tuple[str, str]]) -> str:
        return "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)

    return (
        "<section id='summary'><h2>Summary (RED / USE)</h2><div class='grid3'>"
        f"<div><h3>Rate &amp; errors</h3><table class='kv'>{kv(red)}</table></div>"
        "<div><h3>Durations</h3><table class='kv lat'><thead><tr><th></th><th>n</th><th>p50</th><th>p90</th>"
        f"<th>p99</th><th>max</th></tr></thead><tbody>{lat}</tbody></table></div>"
        f"<div><h3>Utilisation &amp; saturation</h3><table class='kv'>{kv(use) or '<tr><td>no engine stats</td></tr>'}</table></div>"
        "</div></section>"
    )


def _evidence_html(ev: list[dict[str, Any]], rd: Redactor, limit: int = 8) -> str:
    if not ev:
        return ""
    lines = []
    for e in ev[:limit]:
        loc = f"{e['file']}:{e['line']}" if e.get("file") and e.get("line") else (e.get("file") or "")
        lines.append(f"<span class='loc'>{esc(rd(loc))}</span> {highlight(rd(e['text']))}")
    more = f"<div class='muted'>… {len(ev) - limit} more evidence lines in the JSON output</div>" if len(ev) > limit else ""
    return "<pre class='evidence'>" + "\n".join(lines) + "</pre>" + more


def _findings(a: Analysis, rd: Redactor) -> str:
    if a.findings is None:
        why = a.unavailable.get("diagnosis", "")
        return (f"<section id='findings'><h2>Findings</h2><p class='unavailable'>Diagnosis unavailable: "
                f"{esc(why)}. The verdict is unknown.</p></section>")
    if not a.findings:
        return "<section id='findings'><h2>Findings</h2><p class='ok'>No problems found.</p></section>"
    out = []
    for i, d in enumerate(a.findings):
        f = finding_view(d)
        when = ""
        if f["first_seen"]:
            when = f"first {esc(str(f['first_seen']).replace('T', ' '))}" + (
                f" · last {esc(str(f['last_seen']).replace('T', ' '))}" if f["last_seen"] else "")
        if f["count"]:
            when += f" · {esc(f['count'])}×"
        fix = f["fix"]
        if isinstance(fix, list):
            fix_html = "<ul>" + "".join(f"<li>{prose(rd(str(x)))}</li>" for x in fix) + "</ul>"
        else:
            fix_html = f"<p>{prose(rd(str(fix)))}</p>" if fix else ""
        out.append(
            f"<article class='finding sev-{f['severity']}' id='finding-{i}'>"
            f"<h3><span class='sev'>{f['severity']}</span> {esc(rd(f['title']))} "
            f"<span class='code'>{esc(f['code'])} {esc(f['rule'])}</span></h3>"
            + (f"<p class='when'>{when}</p>" if when else "")
            + (f"<p>{prose(rd(str(f['message'])))}</p>" if f["message"] else "")
            + _evidence_html(f["evidence"], rd)
            + (f"<div class='cause'><b>Root cause</b><p>{prose(rd(str(f['root_cause'])))}</p></div>" if f["root_cause"] else "")
            + (f"<div class='fix'><b>Fix</b>{fix_html}</div>" if fix_html else "")
            + "</article>")
    return "<section id='findings'><h2>Findings</h2>" + "".join(out) + "</section>"


def _timeline(a: Analysis, rd: Redactor, limit: int = 400) -> str:
    if a.timeline is None:
        return (f"<section id='timeline'><h2>Incident timeline</h2><p class='unavailable'>Timeline unavailable: "
                f"{esc(a.unavailable.get('timeline', ''))}</p></section>")
    if not a.timeline:
        return "<section id='timeline'><h2>Incident timeline</h2><p class='muted'>Nothing notable happened.</p></section>"
    rows = []
    for e in a.timeline[:limit]:
        ts = e.get("ts") or e.get("time") or e.get("start") or ""
        sev = severity_or_level(e)
        what = e.get("title") or e.get("text") or e.get("message") or e.get("summary") or e.get("kind") or ""
        kind = e.get("kind") or e.get("type") or ""
        loc = f"{os.path.basename(str(e.get('file')))}:{e.get('line')}" if e.get("file") and e.get("line") else ""
        rows.append(f"<tr class='sev-{esc(sev)}'><td class='ts'>{esc(str(ts).replace('T', ' '))}</td>"
                    f"<td><span class='sev'>{esc(sev)}</span></td><td>{esc(kind)}</td>"
                    f"<td>{highlight(rd(str(what)))}</td><td class='loc'>{esc(rd(loc))}</td></tr>")
    more = f"<p class='muted'>{len(a.timeline) - limit} more entries in the JSON output.</p>" if len(a.timeline) > limit else ""
    return ("<section id='timeline'><h2>Incident timeline</h2><table class='timeline'><thead><tr><th>time</th>"
            "<th>severity</th><th>kind</th><th>what happened</th><th>where</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>" + more + "</section>")


def severity_or_level(e: dict[str, Any]) -> str:
    from ..analyze import severity_name

    v = e.get("severity") or e.get("level")
    if v is None and e.get("kind") in ("error", "warning", "critical"):
        v = e["kind"]
    return severity_name(v) if v is not None else "info"


def _chart_divs(figs: list[Any], cls: str = "chart", none: str | None = None) -> str:
    if none and figs and all(isinstance(f, tuple) for f in figs):
        return f"<p class='muted chart-none'>{esc(none)}</p>"
    out = []
    for f in figs:
        if isinstance(f, tuple):
            out.append(f"<div class='{cls} chart-empty' id='{f[0]}'><p class='muted'>{esc(f[1])}</p></div>")
        else:
            h = int(f["layout"].get("height", 300))
            out.append(f"<div class='{cls} plot' id='{f['id']}' data-chart='{f['id']}' style='height:{h + 2}px'></div>")
    return "".join(out)


_OK = ("success", "finished", "stop", "length")


def _requests(a: Analysis, rd: Redactor, max_rows: int) -> str:
    js = a.run.journeys
    if not js:
        return "<section id='requests'><h2>Requests</h2><p class='muted'>No requests in this log.</p></section>"

    def slowness(j: Any) -> float:
        return float(j.e2e_s if j.e2e_s is not None else (j.ttft_s or 0.0))

    if len(js) > max_rows:
        bad = [j for j in js if j.status not in _OK]
        good = sorted((j for j in js if j.status in _OK), key=slowness, reverse=True)
        chosen = (bad[: max_rows // 2] + good)[:max_rows]
        note = (f"Showing {len(chosen):,} of {len(js):,} requests: failed/aborted/unfinished first, then the slowest. "
                "All requests: <code>vllmlog requests --json</code>.")
    else:
        chosen = list(js)
        note = f"{len(js):,} requests."
    cols = [("request", "s"), ("status", "s"), ("arrival", "s"), ("queue", "n"), ("TTFT", "n"), ("TPOT", "n"),
            ("e2e", "n"), ("prompt tok", "n"), ("output tok", "n"), ("preempt", "n"), ("HTTP", "n"), ("line", "s")]
    head = "".join(f"<th data-type='{t}' tabindex='0'>{esc(c)}</th>" for c, t in cols)
    rows = []
    for j in chosen:
        def num(v: Any, fmt: Any = _fmt_s) -> str:
            return f"<td data-v='{'' if v is None else v}'>{esc(fmt(v)) if v is not None else '–'}</td>"

        st = j.status + (f" ({j.reason})" if j.reason else "")
        rows.append(
            f"<tr class='st-{'ok' if j.status in _OK else 'bad'}'><td>{esc(rd(j.request_id))}</td><td>{esc(rd(st))}</td>"
            f"<td>{esc(j.arrival_ts.isoformat(sep=' ') if j.arrival_ts else '')}</td>"
            + num(j.queue_s) + num(j.ttft_s) + num(j.tpot_s) + num(j.e2e_s)
            + num(j.prompt_tokens, _fmt_n) + num(j.output_tokens, _fmt_n) + num(j.preemptions or None, _fmt_n)
            + num(j.http_status, str)
            + f"<td>{esc(rd(j.file))}:{j.first_line}</td></tr>")
    return (
        "<section id='requests'><h2>Requests</h2>"
        f"<p class='muted'>{note} Click a column to sort; type to filter.</p>"
        "<input type='search' id='req-filter' class='filter' placeholder='filter requests (id, status, …)' "
        "aria-label='filter requests'>"
        f"<div class='tablewrap'><table id='req-table' class='sortable'><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div></section>"
    )


def problem_groups(a: Analysis, limit: int = 100) -> list[dict[str, Any]]:
    """WARNING/ERROR/CRITICAL events (and HTTP 4xx/5xx) grouped by template, the summary's way."""
    try:
        from ..summary import grouped_events
    except ImportError:  # pragma: no cover - the summary module is part of the package
        grouped_events = None
    if grouped_events is not None:
        return grouped_events(a.run, ("CRITICAL", "ERROR", "WARNING"), top=limit)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for e in a.run.notable:
        if (e.level or "") in ("WARNING", "ERROR", "CRITICAL"):
            g = groups.setdefault((e.kind, mask_template(e.message)), {
                "kind": e.kind, "template": mask_template(e.message), "level": e.level, "count": 0,
                "first_seen": e.ts.isoformat() if e.ts else None, "last_seen": None, "file": e.file,
                "first_line": e.line})
            g["count"] += 1
            g["last_seen"] = e.ts.isoformat() if e.ts else g["last_seen"]
    return sorted(groups.values(), key=lambda g: -g["count"])[:limit]


def _grouped_problems(a: Analysis, rd: Redactor, limit: int = 100) -> str:
    items = problem_groups(a, limit)
    if not items:
        return ("<section id='problems'><h2>Warnings and errors by template</h2>"
                "<p class='ok'>No WARNING or ERROR lines.</p></section>")
    by_line = {(e.file, e.line): e for e in a.run.notable}
    order = {"CRITICAL": 0, "ERROR": 1, "WARNING": 2}
    items = sorted(items, key=lambda g: (order.get(str(g.get("level")), 3), -g["count"]))
    rows = []
    for g in items:
        lvl = str(g.get("level") or "WARNING").upper()
        e = by_line.get((g.get("file"), g.get("first_line")))
        example = ""
        if e is not None:
            example = (f"<details><summary>example</summary><pre class='evidence'><span class='loc'>"
                       f"{esc(rd(e.file))}:{e.line}</span> {highlight(rd(e.text[:4000]))}</pre></details>")
        first = str(g.get("first_seen") or "").replace("T", " ")
        last = str(g.get("last_seen") or "").replace("T", " ")
        rows.append(f"<tr class='lvl-{esc(lvl.lower())}'><td data-v='{int(g['count'])}'>{int(g['count']):,}</td>"
                    f"<td><span class='lv lv-{esc(lvl.lower())}'>{esc(lvl)}</span></td>"
                    f"<td><code>{esc(rd(str(g.get('template') or '')))}</code>{example}</td>"
                    f"<td>{esc(g.get('kind'))}</td><td>{esc(first)}</td><td>{esc(last)}</td></tr>")
    return ("<section id='problems'><h2>Warnings and errors by template</h2>"
            "<div class='tablewrap'><table class='sortable' id='problem-table'><thead><tr><th data-type='n'>count</th>"
            "<th data-type='s'>level</th><th data-type='s'>template (first example)</th><th data-type='s'>kind</th>"
            "<th data-type='s'>first seen</th><th data-type='s'>last seen</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div></section>")


def _unknown(a: Analysis, rd: Redactor, limit: int = 50) -> str:
    st = a.run.parse_stats
    items = st.to_dict(limit)["unknown_templates"]
    total = len(st.unknown_templates)
    if not items:
        return "<section id='unknown'><h2>Unknown-line templates</h2><p class='ok'>Every line was recognised.</p></section>"
    rows = "".join(
        f"<tr><td data-v='{r['count']}'>{r['count']:,}</td><td>{esc(r['kind'])}</td><td><code>{esc(rd(r['template']))}</code></td>"
        f"<td>{esc(rd(r['first']['file']))}:{r['first']['line']}</td></tr>" for r in items)
    return ("<section id='unknown'><h2>Unknown-line templates</h2>"
            f"<p class='muted'>Lines no pattern recognised, grouped ({total:,} templates; top {len(items)} shown). "
            "New vLLM messages show up here.</p><div class='tablewrap'><table class='sortable'><thead><tr>"
            "<th data-type='n'>count</th><th data-type='s'>kind</th><th data-type='s'>template</th>"
            "<th data-type='s'>first seen</th></tr></thead><tbody>" + rows + "</tbody></table></div></section>")


# --------------------------------------------------------------------------- assembly

def _asset(name: str) -> str:
    return (resources.files("vllmlog.export") / name).read_text(encoding="utf-8")


def json_for_script(obj: Any) -> str:
    """JSON safe inside ``<script type="application/json">`` (no ``<``, ``>``, ``&`` left)."""
    s = dumps_safe(obj, option=orjson.OPT_SERIALIZE_NUMPY).decode()
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_report(
    a: Analysis,
    *,
    redactor: Redactor = DEFAULT_REDACTOR,
    title: str = "vLLM log analysis",
    max_points: int = MAX_POINTS,
    max_request_rows: int = MAX_REQUEST_ROWS,
) -> str:
    """The report as one HTML string (scripts, styles and data inlined)."""
    import plotly.offline

    from .. import __version__

    charts = build_charts(a, redactor, max_points)
    figs = {f["id"]: {"data": f["data"], "layout": f["layout"]}
            for sec in charts.values() for f in sec if not isinstance(f, tuple)}
    policy = []
    policy.append("prompt and output text included (--show-prompts)" if redactor.show_prompts
                  else "prompt and output text redacted")
    if redactor.mask_ips:
        policy.append("IP addresses masked")
    body = "".join([
        _header(a, redactor, title),
        "<nav><a href='#summary'>summary</a><a href='#findings'>findings</a><a href='#timeline'>timeline</a>"
        "<a href='#charts'>charts</a><a href='#latency'>latency</a><a href='#waterfall'>slowest requests</a>"
        "<a href='#requests'>requests</a><a href='#problems'>warnings/errors</a><a href='#unknown'>unknown lines</a></nav>",
        "<main>",
        _findings(a, redactor),
        _red_use(a),
        _timeline(a, redactor),
        "<section id='charts'><h2>Over time</h2>" + _chart_divs(charts["over_time"], none="No charts over time: this log has no engine stats lines, decode steps or requests.") + "</section>",
        "<section id='latency'><h2>Latency distributions</h2><div class='grid3'>"
        + _chart_divs(charts["distributions"], "chart small", none="No request latencies in this log.") + "</div></section>",
        "<section id='waterfall'><h2>Slowest requests</h2>" + _chart_divs(charts["waterfall"], none="No finished requests with timings in this log.") + "</section>",
        _requests(a, redactor, max_request_rows),
        _grouped_problems(a, redactor),
        _unknown(a, redactor),
        "</main>",
        f"<footer>Generated by vllmlog {esc(__version__)} on {esc(datetime.now().isoformat(sep=' ', timespec='seconds'))}"
        f" · {esc('; '.join(policy))} · charts: Plotly (embedded, works offline)</footer>",
    ])
    parts = {
        "TITLE": esc(title),
        "CSS": _asset("assets/report.css"),
        "BODY": body,
        "DATA": json_for_script({"figures": figs}),
        "APP": _asset("assets/report.js"),
        "PLOTLY": plotly.offline.get_plotlyjs(),
    }
    # one pass over the template's markers: inserted text (log-derived or not) is never re-scanned
    return re.sub(r"@@([A-Z]+)@@", lambda m: parts[m.group(1)], _asset("templates/report.html"))


def write_report(a: Analysis, path: str, **kwargs: Any) -> int:
    """Write the report; returns its size in bytes."""
    from ..errors import InputError

    text = render_report(a, **kwargs).encode("utf-8")
    try:
        with open(path, "wb") as fp:
            fp.write(text)
    except OSError as exc:
        raise InputError(f"cannot write report {path}: {exc.strerror or exc}") from exc
    return len(text)
