"""The fleet HTML report: one self-contained page (the same uPlot build, CSS and script as ``analyze``'s report).

Verdict and fleet-wide incidents first, then fleet RED/USE, a replica × time heat-map for errors, KV-cache usage
and the queue (from the replicas' grids), the fleet's charts over time (uPlot, fleet-wide incidents shaded),
the replica table worst first with a link to each replica's own report, outliers and router imbalance.
Every log-derived string is escaped (``export.html.esc``); the page loads nothing from the network.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Any, Sequence

from ..export.html import _vendor, esc, page
from ..fmt import fmt_number, fmt_seconds
from . import grid as gridmod

#: At most this many columns in a heat-map (buckets are merged to fit).
HEAT_COLUMNS = 96
#: At most this many replicas in a heat-map (worst first; the table lists every one).
HEAT_ROWS = 200

_CSS = """
.heat { border-collapse: separate; border-spacing: 1px; width: auto; font-size: 11px; }
.heat td { padding: 0; width: 9px; height: 13px; border: 0; }
.heat th { padding: 0 8px 0 0; border: 0; font-weight: 400; white-space: nowrap; text-align: right; background: none;
  position: static; max-width: 260px; overflow: hidden; text-overflow: ellipsis; }
.heat td.na { background: repeating-linear-gradient(45deg, #f2f4f7, #f2f4f7 2px, #fff 2px, #fff 4px); }
.heatwrap { overflow-x: auto; margin: 6px 0 16px; }
.legend { font-size: 12px; color: var(--muted); margin: 2px 0 4px; }
.flag { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 8px; background: var(--soft);
  border: 1px solid var(--line); margin-right: 4px; }
.st-error, .st-down { color: var(--crit); font-weight: 700; } .st-failing { color: var(--err); font-weight: 700; }
.st-degraded { color: var(--warn); font-weight: 700; } .st-healthy { color: var(--ok); }
.st-incomplete, .st-unknown { color: var(--muted); font-weight: 700; }
.verdict-down { background: var(--crit); } .verdict-incomplete { background: var(--muted); }
"""


def _iso(t: float | None) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if t is not None else "?"


def _pct(v: Any) -> str:
    return fmt_number(v, pct=True, pct_digits=1)


def _dur(d: dict[str, Any] | None, k: str) -> str:
    if not d or d.get(k) is None:
        return "–"
    v = d[k]
    if d.get("basis") == "estimated" and v < (d.get("resolution_s") or 1.0):
        return "&lt; 1 s"
    return esc(fmt_seconds(v))


# --------------------------------------------------------------------------- heat-map

def _coarse(g: dict[str, Any], lo: int, n: int, k: int) -> list[dict[str, Any]]:
    """The grid's buckets ``lo … lo + n·k`` (fleet bucket indices) merged ``k`` at a time."""
    out = []
    base = int(g["t0"] // g["step"]) if g.get("n") else 0
    for c in range(n):
        cell: dict[str, Any] = {}
        for b in range(lo + c * k, lo + (c + 1) * k):
            i = b - base
            if not g.get("n") or not 0 <= i < g["n"]:
                continue
            for f in gridmod.COUNTS + gridmod.SUMS:
                cell[f] = cell.get(f, 0) + ((g[f][i] if f in g else 0) or 0)
            for f in gridmod.MAXES:
                v = g[f][i] if f in g else None
                if v is not None and (cell.get(f) is None or v > cell[f]):
                    cell[f] = v
        out.append(cell)
    return out


def _color(kind: str, cell: dict[str, Any], scale: float) -> tuple[str | None, str]:
    """Background colour and tooltip of one heat-map cell (None: not observed)."""
    if kind == "errors":
        ended = sum(cell.get(f, 0) for f in ("success", "failed", "aborted"))
        bad = cell.get("failed", 0) + cell.get("aborted", 0)
        if not ended:
            return (None, "no request ended") if not cell.get("kv_n") and not cell.get("arrivals") else \
                ("#eef6ee", "no request ended")
        r = bad / ended
        return (f"rgba(198,40,40,{0.12 + 0.88 * r:.2f})" if bad else "#dff0df",
                f"{bad} of {ended} ended requests failed or aborted ({100 * r:.0f}%)")
    if kind == "kv":
        v = cell.get("kv_max")
        if v is None:
            return None, "no stats line"
        return f"rgba(31,95,168,{0.08 + 0.92 * min(1.0, v):.2f})", f"KV-cache usage max {100 * v:.1f}%"
    v = cell.get("waiting_max")
    if v is None:
        return None, "no stats line"
    return (f"rgba(178,106,0,{0.12 + 0.88 * min(1.0, v / scale):.2f})" if v else "#f6f7f9",
            f"Waiting max {v:g}")


def heatmaps(doc: dict[str, Any], replicas: Sequence[dict[str, Any]], links: dict[str, str]) -> str:
    """Three replica × time tables: failed/aborted share of ended requests, KV-cache usage max, Waiting max."""
    merged = doc["grid"]
    if not merged.get("n"):
        return "<p class='muted'>No timestamps in these logs: no heat-map.</p>"
    step = merged["step"]
    lo = int(merged["t0"] // step)
    k = max(1, -(-merged["n"] // HEAT_COLUMNS))
    n = -(-merged["n"] // k)
    by_name = {r["replica"]: r for r in replicas}
    order = [r["replica"] for r in doc["replicas"] if r["replica"] in by_name and not by_name[r["replica"]].get("error")]
    order = order[:HEAT_ROWS]
    cells = {name: _coarse(by_name[name]["grid"], lo, n, k) for name in order}
    wmax = max([c.get("waiting_max") or 0 for cs in cells.values() for c in cs] + [1])
    out = [f"<p class='legend'>Columns: {esc(fmt_seconds(step * k))} each, {esc(_iso(lo * step))} → "
           f"{esc(_iso((lo + n * k) * step))} UTC (the logs' clock); rows: replicas worst first; hatched: not observed."
           + (f" Showing the {HEAT_ROWS} worst of {len(doc['replicas'])} replicas." if len(doc["replicas"]) > HEAT_ROWS
              else "") + "</p>"]
    for kind, title in (("errors", "Failed or aborted requests (share of those that ended)"),
                        ("kv", "KV-cache usage (max per column)"),
                        ("queue", f"Waiting requests (max per column; darkest = {wmax:g})")):
        rows = []
        for name in order:
            tds = []
            for c in cells[name]:
                color, tip = _color(kind, c, wmax)
                if color is None:
                    tds.append(f"<td class='na' title='{esc(tip)}'></td>")
                else:
                    tds.append(f"<td style='background:{color}' title='{esc(tip)}'></td>")
            label = esc(name)
            if name in links:
                label = f"<a href='{esc(links[name])}'>{label}</a>"
            rows.append(f"<tr><th title='{esc(name)}'>{label}</th>{''.join(tds)}</tr>")
        out.append(f"<h3>{esc(title)}</h3><div class='heatwrap'><table class='heat'><tbody>{''.join(rows)}"
                   "</tbody></table></div>")
    return "".join(out)


# --------------------------------------------------------------------------- charts (report.js specs)

def charts(doc: dict[str, Any]) -> dict[str, Any]:
    """Chart specs in the shape ``export/assets/report.js`` draws (time charts over the fleet's grid)."""
    g = doc["grid"]
    if not g.get("n"):
        return {}
    step = g["step"]
    xs = [g["t0"] + i * step + step / 2 for i in range(g["n"])]
    req = [{"label": "requests/s (arrivals)", "color": "#1f5fa8", "scale": "y", "x": xs, "bars": True,
            "y": [round(g["arrivals"][i] / step, 4) for i in range(g["n"])]},
           {"label": "failed or aborted /s", "color": "#c62828", "scale": "y", "x": xs, "bars": True,
            "y": [round((g["failed"][i] + g["aborted"][i]) / step, 4) for i in range(g["n"])]}]
    kv = [{"label": "KV-cache usage, worst replica", "color": "#7a0916", "scale": "y", "x": xs, "step": True,
           "y": [None if v is None else round(100 * v, 2) for v in g["kv_max"]]},
          {"label": "KV-cache usage, fleet mean", "color": "#1f5fa8", "scale": "y", "x": xs, "step": True,
           "y": [None if not g["kv_n"][i] else round(100 * g["kv_sum"][i] / g["kv_n"][i], 2) for i in range(g["n"])]}]
    q = [{"label": "Waiting, worst replica", "color": "#b26a00", "scale": "y", "x": xs, "step": True, "y": g["waiting_max"]},
         {"label": "Running, busiest replica", "color": "#2e7d32", "scale": "y", "x": xs, "step": True,
          "y": g["running_max"]}]
    note = f"per {fmt_seconds(step)} grid bucket"
    return {
        "fleet-requests": {"id": "fleet-requests", "kind": "time", "title": f"Fleet request rate and errors ({note})",
                           "height": 220, "series": req, "scales": {"y": {"label": "per second", "min": 0}}, "note": ""},
        "fleet-kv": {"id": "fleet-kv", "kind": "time", "title": "KV-cache usage", "height": 200, "series": kv,
                     "scales": {"y": {"label": "%", "min": 0, "max": 100}}, "note": ""},
        "fleet-queue": {"id": "fleet-queue", "kind": "time", "title": "Waiting and Running", "height": 200, "series": q,
                        "scales": {"y": {"label": "requests", "min": 0, "integer": True}}, "note": ""},
    }


def _windows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for f in doc["incidents"]:
        t0 = datetime.fromisoformat(f["onset"]).replace(tzinfo=timezone.utc).timestamp() if f.get("onset") else None
        if t0 is None:
            continue
        t1 = datetime.fromisoformat(f["end"]).replace(tzinfo=timezone.utc).timestamp() if f.get("end") else t0
        out.append({"start": t0, "end": max(t0, t1), "onset": t0, "label": f"{f['id']} {f['headline']}",
                    "severity": f["severity"]})
    return out


# --------------------------------------------------------------------------- sections

def _header(doc: dict[str, Any], title: str) -> str:
    v = doc["verdict"]
    tr = doc["time_range"]
    cov = doc["coverage"]
    inc = ""
    if not cov["complete"]:
        inc = ("<p class='unavailable'>INCOMPLETE: not read in full: "
               + esc(", ".join(cov["incomplete_replicas"][:20])) + "</p>")
        for u in cov["unreadable"][:20]:
            inc += f"<p class='unavailable'>unreadable {esc(u['replica'])}: {esc(u['error'])}</p>"
    return (f"<header><h1>{esc(title)}</h1>"
            f"<p><span class='verdict verdict-{esc(v['status'])}'>{esc(v['label'])}</span> {esc(v['headline'])}</p>"
            f"<p class='meta'><b>{doc['replicas_read']:,}</b> of <b>{doc['replicas_total']:,}</b> replicas read · "
            f"<b>{doc['lines']:,}</b> lines · {esc(tr['start'] or '?')} → {esc(tr['end'] or '?')}</p>{inc}</header>")


def _incidents(doc: dict[str, Any]) -> str:
    fs = doc["incidents"]
    if not fs:
        return ("<section id='incidents'><h2>Fleet-wide incidents</h2><p class='muted'>None: no symptom appeared on "
                "many replicas at once; each replica's incidents are its own (see the table).</p></section>")
    out = ["<section id='incidents'><h2>Fleet-wide incidents</h2>"]
    for f in fs:
        hyp = "".join(f"<li>{esc(h)}</li>" for h in f["upstream_hypothesis"])
        ev = "".join(f"<li>{esc(e)}</li>" for e in f["evidence"])
        mem = "".join(f"<tr><td>{esc(m['replica'])}</td><td>{esc(m['onset'])}</td><td>{esc(m.get('cause') or '')}</td>"
                      f"<td>{esc(m['headline'])}</td></tr>" for m in f["replicas"])
        out.append(f"<div class='finding sev-{esc(f['severity'])}'><p><span class='sev'>{esc(f['severity'])}</span> "
                   f"<b>{esc(f['id'])}</b> {esc(f['headline'])} <span class='code'>confidence {esc(f['confidence'])}</span></p>"
                   f"<p class='when'>from {esc(f['onset'])} to {esc(f.get('end') or '?')}</p>"
                   f"<p>Likely upstream:</p><ul>{hyp}</ul><ul class='muted'>{ev}</ul>"
                   "<div class='tablewrap'><table><thead><tr><th>replica</th><th>onset</th><th>local cause</th>"
                   f"<th>what it saw</th></tr></thead><tbody>{mem}</tbody></table></div></div>")
    out.append("</section>")
    return "".join(out)


def _red_use(doc: dict[str, Any]) -> str:
    r = doc["red"]["requests"]
    lat = doc["red"].get("latency") or {}
    use = doc["use"]
    http = doc["red"]["http"]
    kv = [("requests", f"{r['total']:,}"), ("arrival rate", f"{fmt_number(r['rate_per_s'])} /s"),
          ("failed (of finished)", f"{r['failed']:,} ({_pct(r['error_rate'])})"),
          ("aborted (of finished)", f"{r['aborted']:,} ({_pct(r['abort_rate'])})"),
          ("HTTP 4xx / 5xx", f"{http['4xx']:,} / {http['5xx']:,}"),
          ("KV-cache usage max", _pct(use["kv_cache_usage"]["max"])),
          ("replicas with KV ≥ 90 %", str(use["kv_cache_usage"]["replicas_above_0.9"])),
          ("Waiting max / replicas that queued", f"{fmt_number(use['waiting']['max'])} / {use['waiting']['replicas_queueing']}"),
          ("generation tokens/s (Σ replicas)", fmt_number(use["generation_tokens_per_s"]["sum"])),
          ("preemptions", f"{use['preemptions']:,}")]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in kv)
    lrows = ""
    for m, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "e2e"), ("queue_s", "queue")):
        d = lat.get(m) or {}
        lrows += (f"<tr><th>{label}</th><td>{d.get('count', 0):,}</td><td>{_dur(d, 'p50')}</td><td>{_dur(d, 'p90')}</td>"
                  f"<td>{_dur(d, 'p99')}</td><td>{esc(d.get('basis') or '–')}</td></tr>")
    return ("<section id='summary'><h2>Fleet RED / USE</h2><div class='grid2'><table class='kv'><tbody>" + rows
            + "</tbody></table><table class='lat'><thead><tr><th></th><th>n</th><th>p50</th><th>p90</th><th>p99</th>"
            "<th>basis</th></tr></thead><tbody>" + lrows + "</tbody></table></div><p class='muted'>" + esc(_lat_note(lat))
            + " Rates are over finished requests.</p></section>")


def _lat_note(lat: dict[str, Any]) -> str:
    """Where the percentiles came from: exact (the rows) or a sketch (with its error)."""
    d = next((v for v in lat.values() if v and v.get("from")), None)
    if d is not None and d.get("from") == "sketch":
        return (f"Percentiles are a sketch: DDSketch merged over the replicas, within ±{d['relative_accuracy']:.0%} of "
                "the exact value (count, min, max exact).")
    return ("Percentiles are exact over every replica's successful requests (per-request rows, Polars, "
            "numpy-linear).")


def _table(doc: dict[str, Any], links: dict[str, str]) -> str:
    head = ("<tr><th data-type='s'>replica</th><th data-type='s'>verdict</th><th data-type='n'>requests</th>"
            "<th data-type='n'>errors</th><th data-type='n'>aborts</th><th data-type='n'>TTFT p99 s</th>"
            "<th data-type='n'>KV max</th><th data-type='n'>Waiting max</th><th data-type='n'>restarts</th>"
            "<th data-type='s'>flags</th><th data-type='s'>worst incident</th></tr>")
    body = []
    for r in doc["replicas"]:
        name = esc(r["replica"])
        if r["replica"] in links:
            name = f"<a href='{esc(links[r['replica']])}'>{name}</a>"
        flags = "".join(f"<span class='flag'>{esc(f)}</span>" for f in r.get("flags") or [])
        if r.get("load"):
            flags += f"<span class='flag'>load {esc(r['load'])}</span>"
        wi = r.get("worst_incident")
        what = esc(wi["headline"]) if wi else esc(r.get("reason") or "")
        ttft = r.get("ttft_p99_s")
        body.append(f"<tr><td>{name}</td><td class='st-{esc(r['status'])}'>{esc(r.get('label') or r['status'])}</td>"
                    f"<td>{fmt_number(r.get('requests'))}</td><td>{_pct(r.get('error_rate'))}</td>"
                    f"<td>{_pct(r.get('abort_rate'))}</td><td>{'' if ttft is None else f'{ttft:.3f}'}</td>"
                    f"<td>{_pct(r.get('kv_max'))}</td><td>{fmt_number(r.get('waiting_max'))}</td>"
                    f"<td>{fmt_number(r.get('restarts'))}</td><td>{flags}</td><td>{what}</td></tr>")
    return ("<section id='replicas'><h2>Replicas, worst first</h2><div class='tablewrap'><table class='sortable'><thead>"
            + head + "</thead><tbody>" + "".join(body) + "</tbody></table></div></section>")


def _peers(doc: dict[str, Any]) -> str:
    out = ["<section id='peers'><h2>Outliers and router imbalance</h2>"]
    if doc["outliers"]:
        rows = "".join(f"<tr><td>{esc(o['replica'])}</td><td>{esc(o['what'])}</td><td>{esc(_fmtm(o['metric'], o['value']))}"
                       f"</td><td>{esc(_fmtm(o['metric'], o['peer_median']))}</td><td>{o['score']}</td></tr>"
                       for o in doc["outliers"])
        out.append("<table><thead><tr><th>replica</th><th>metric</th><th>value</th><th>peers' median</th>"
                   f"<th>robust score</th></tr></thead><tbody>{rows}</tbody></table>")
    else:
        out.append("<p class='muted'>No replica is far worse than its peers.</p>")
    imb = doc["imbalance"]
    if imb.get("skewed"):
        out.append(f"<p><b>Router skew</b>: max/median {imb['max_over_median']:.2f}, min/median "
                   f"{imb['min_over_median']:.2f}, CV {imb['cv']:.2f}. Hot: {esc(', '.join(imb['hot']) or '–')}; "
                   f"cold: {esc(', '.join(imb['cold']) or '–')}.</p>")
    else:
        out.append(f"<p class='muted'>Load balanced ({esc(imb.get('basis') or '')}).</p>")
    out.append("</section>")
    return "".join(out)


def _fmtm(metric: str, v: Any) -> str:
    if metric.endswith("_rate") or metric.startswith("kv"):
        return _pct(v)
    return fmt_seconds(v)


def _chart_divs(specs: dict[str, Any]) -> str:
    if not specs:
        return "<p class='muted'>No timestamps: no charts.</p>"
    return "".join(f"<div class='chart plot' id='{esc(k)}' data-chart='{esc(k)}'><div class='chart-title'>"
                   f"{esc(f['title'])}</div><div class='plot-area' style='min-height:{int(f['height']) + 30}px'></div></div>"
                   for k, f in specs.items())


def render_fleet_report(doc: dict[str, Any], replicas: Sequence[dict[str, Any]], *, links: dict[str, str] | None = None,
                        title: str = "vLLM fleet analysis") -> str:
    """The fleet report as one HTML string. ``links``: replica → relative URL of its own report."""
    from .. import __version__

    links = links or {}
    specs = charts(doc)
    g = doc["grid"]
    trange = ({"min": g["t0"], "max": g["t0"] + g["n"] * g["step"]} if g.get("n") else None)
    body = "".join([
        _header(doc, title),
        "<nav><a href='#incidents'>fleet-wide incidents</a><a href='#summary'>RED/USE</a><a href='#heat'>heat-map</a>"
        "<a href='#charts'>over time</a><a href='#replicas'>replicas</a><a href='#peers'>outliers</a></nav><main>",
        _incidents(doc),
        _red_use(doc),
        "<section id='heat'><h2>Replicas over time</h2>" + heatmaps(doc, replicas, links) + "</section>",
        "<section id='charts'><h2>The fleet over time</h2>" + _chart_divs(specs) + "</section>",
        _table(doc, links),
        _peers(doc),
        f"</main><footer>Generated by vllmlog {esc(__version__)} · prompt and output text redacted unless "
        f"--show-prompts · charts: uPlot {esc(_vendor()['version'])} (MIT, embedded, works offline)</footer>",
    ])
    return page(title, body, {"charts": specs, "windows": _windows(doc), "time": trange}, _CSS)


def write_fleet_report(doc: dict[str, Any], replicas: Sequence[dict[str, Any]], path: str,
                       reports_dir: str | None = None, **kw: Any) -> int:
    """Write the report to ``path`` (links to the replicas' reports in ``reports_dir``, relative); its size."""
    from ..errors import InputError

    links = {}
    if reports_dir:
        base = os.path.dirname(os.path.abspath(path))
        for r in replicas:
            if r.get("report"):
                links[r["replica"]] = os.path.relpath(os.path.join(reports_dir, r["report"]), base).replace(os.sep, "/")
    text = render_fleet_report(doc, replicas, links=links, **kw).encode("utf-8")
    try:
        with open(path, "wb") as f:
            f.write(text)
    except OSError as exc:
        raise InputError(f"cannot write report {path}: {exc.strerror or exc}") from exc
    return len(text)
