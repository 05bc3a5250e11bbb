"""HTML report sections of issue 13: the start-up waterfall (what took the time, traced or from the log's own
lines) and client-observed vs server-side TTFT/e2e per request (``--client``).

Plain HTML and CSS bars (the slowest-requests Gantt's classes), so they print and need no script; every
log-derived string is redacted and escaped here, like the rest of the report (``export.html``).
"""

from __future__ import annotations

import html
from typing import Any, Sequence

from ..redact import Redactor
from .charts import _nice_step
from ..startup import Startup, startups
from ..textview import span_text

#: Bar colour per start-up phase.
PHASE_COLORS = {
    "process start": "#8c8c8c", "workers / device": "#17becf", "model load": "#1f77b4", "weights": "#2b5ea8",
    "compile / warm-up": "#d62728", "KV cache": "#9467bd", "engine init": "#e377c2", "API server": "#bcbd22",
    "other": "#c7c7c7",
}
SOURCE_TEXT = {
    "traced": "traced = an OpenTelemetry span (exact)",
    "logged": "logged = a duration vLLM wrote in the log",
    "derived": "derived = from millisecond timestamps",
    "estimated": "estimated = from 1-second timestamps (± 1 s)",
}
#: Start-ups drawn in full (a crash loop's others get a line each).
MAX_DRAWN = 6
MAX_CLIENT_ROWS = 2000


def esc(v: Any) -> str:
    """HTML-escape anything (None → empty)."""
    return "" if v is None else html.escape(str(v), quote=True)


def _sec(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v * 1000:.1f} ms" if abs(v) < 1 else f"{v:.2f} s"


def _bars(rows: Sequence[tuple[str, float, float, str, str, bool, int]], total: float, cid: str, title: str) -> str:
    """Rows of (label, start_s, seconds, phase, tooltip, ok, indent) as Gantt bars on one time axis."""
    scale = max(total, max((s + d for _, s, d, _, _, _, _ in rows), default=0.0), 1e-9)

    def pct(v: float) -> str:
        return f"{100 * v / scale:.3f}%"

    used = []
    for r in rows:
        if r[3] not in used:
            used.append(r[3])
    legend = "".join(f"<span class='lg'><span class='sw' style='background:{PHASE_COLORS.get(p, '#c7c7c7')}'></span>"
                     f"{esc(p)}</span>" for p in used)
    legend += "<span class='lg'><span class='sw sw-bad'></span>still in this phase when the log stopped</span>" \
        if any(not r[5] for r in rows) else ""
    step = _nice_step(scale / 6)
    ticks = [k * step for k in range(int(scale / step + 1e-9) + 1)]
    axis = "".join(f"<span class='tick' style='left:{pct(t)}'>{esc(span_text(t) if t else '0 s')}</span>" for t in ticks)
    body = []
    for label, start, secs, phase, tip, ok, indent in rows:
        pad = f" style='padding-left:{4 + 12 * indent}px'" if indent else ""
        body.append(
            f"<div class='grow{'' if ok else ' bad'}' data-phase='{esc(phase)}'>"
            f"<div class='glabel' title='{esc(label)}'{pad}>{esc(label)}</div>"
            f"<div class='gtrack' title='{esc(tip)}'><span class='seg' style='left:{pct(start)};width:{pct(secs)};"
            f"background:{PHASE_COLORS.get(phase, '#c7c7c7')}' title='{esc(tip)}'></span>"
            f"<span class='gtot' style='left:calc({pct(start + secs)} + 4px)'>{esc(_sec(secs))}</span></div></div>")
    return (f"<div class='chart gantt startup-gantt' id='{esc(cid)}'><div class='chart-title'>{esc(title)}</div>"
            f"<div class='glegend'>{legend}</div>"
            f"<div class='grow gaxis'><div class='glabel'></div><div class='gtrack'>{axis}</div></div>"
            + "".join(body) + "</div>")


def _one(s: Startup, k: int, rd: Redactor) -> str:
    w = s.waterfall
    t0 = s.start
    if s.source == "traced" and w is not None:
        rows = [(st.name, st.start_s, st.duration_s, st.phase,
                 f"{st.name}: {st.duration_s:.3f} s (own time {st.self_s:.3f} s) · {st.phase} · {st.process or ''}",
                 True, st.depth) for st in w.steps]
        rows += [(f"{p.name} (from the log)", (p.start - t0).total_seconds() if p.start and t0 else 0.0, p.seconds,
                  p.name, f"{p.name}: {p.seconds:.2f} s, {p.source} — {rd(p.detail)}", False, 0)
                 for p in s.phases if not p.complete and p.source != "traced"]
        title = (f"Loading spans of trace {w.trace_id[:16]}… nested by time (seconds after "
                 f"{t0.isoformat(sep=' ', timespec='milliseconds') if t0 else '?'})")
    else:
        rows = [(p.name, (p.start - t0).total_seconds() if p.start and t0 else 0.0, p.seconds, p.name,
                 f"{p.name}: {p.seconds:.2f} s, {p.source} — {rd(p.detail)}", p.complete, 0) for p in s.phases]
        title = f"Phases from the log's lines, end to end (seconds after {t0.isoformat(sep=' ') if t0 else '?'})"
    bars = _bars(rows, s.total_s, f"startup-{k}", title)
    by = s.by_phase()
    table = []
    for p in s.phases:
        where = f"{rd(p.file).rsplit('/', 1)[-1]}:{p.line}" if p.line else ""
        table.append(
            f"<tr class='ph-{'ok' if p.complete else 'bad'}'><td>{esc(p.name)}</td><td data-v='{p.seconds}'>"
            f"{esc(_sec(p.seconds))}</td><td data-v='{p.seconds / s.total_s if s.total_s else 0}'>"
            f"{100 * p.seconds / s.total_s if s.total_s else 0:.0f} %</td><td>{esc(p.source)}</td>"
            f"<td class='args'>{esc(rd(p.detail))}</td><td title='{esc(rd(p.file))}'>{esc(where)}</td></tr>")
    sl, op = s.slowest(), s.stopped_in()
    verdict = ""
    if op is not None:
        verdict = (f"<p class='bad startup-stuck'>Did not finish: still in <b>{esc(op.name)}</b> "
                   f"({esc(_sec(op.seconds))}) when the log stopped.</p>")
    elif sl is not None:
        verdict = (f"<p class='startup-slowest'>What took the time: <b>{esc(sl.name)}</b> "
                   f"({esc(_sec(by.get(sl.name, sl.seconds)))} of {esc(_sec(s.total_s))}).</p>")
    src = "traced: the server's loading spans" if s.source == "traced" else "the log's own lines (no loading spans)"
    where = f"server run {s.server + 1}" if s.server >= 0 else "a traced start-up with no log line"
    compare = ""
    if s.source == "traced" and s.logged:
        lb: dict[str, float] = {}
        for p in s.logged:
            lb[p.name] = lb.get(p.name, 0.0) + p.seconds
        compare = ("<p class='muted'>The log's own account of the same start-up: "
                   + esc(", ".join(f"{n} {_sec(v)}" for n, v in sorted(lb.items(), key=lambda kv: -kv[1])[:5]))
                   + ".</p>")
    return (f"<div class='startup' id='startup-run-{k}' data-source='{esc(s.source)}'>"
            f"<h3>{esc(where)} · {esc(rd(s.file))} · {esc(_sec(s.total_s))}</h3>"
            f"<p class='muted'>Source: {esc(src)}. {esc(s.headline())}</p>{verdict}{bars}"
            "<table class='sortable startup-phases'><thead><tr>"
            "<th data-type='s'>phase</th><th data-type='n'>time</th><th data-type='n'>share</th>"
            "<th data-type='s'>source</th><th data-type='s'>measured from</th><th data-type='s'>line</th></tr></thead>"
            f"<tbody>{''.join(table)}</tbody></table>{compare}</div>")


def startup_section(a: Any, rd: Redactor) -> str:
    """The start-up waterfall of every server start: what took the time, and from which source."""
    try:
        starts = startups(a.run)
    except Exception as exc:  # noqa: BLE001 - one section must not cost the whole report
        return (f"<section id='startup'><h2>Start-up</h2><p class='unavailable'>Start-up waterfall unavailable: "
                f"{esc(type(exc).__name__)}: {esc(exc)}</p></section>")
    if not starts:
        return ("<section id='startup'><h2>Start-up</h2><p class='muted'>No start-up in this log (it begins while "
                "the server was already serving).</p></section>")
    legend = "; ".join(SOURCE_TEXT.values())
    drawn = [_one(s, k, rd) for k, s in enumerate(starts[:MAX_DRAWN])]
    rest = ""
    if len(starts) > MAX_DRAWN:
        rest = ("<p class='muted'>" + esc(f"{len(starts) - MAX_DRAWN} more start-ups:") + "</p><ul class='startup-more'>"
                + "".join(f"<li>{esc(s.start.isoformat(sep=' ') if s.start else '')} · {esc(s.headline())}</li>"
                          for s in starts[MAX_DRAWN:MAX_DRAWN + 200]) + "</ul>")
    return (f"<section id='startup'><h2>Start-up</h2><p class='muted'>Sources — {esc(legend)}.</p>"
            + "".join(drawn) + rest + "</section>")


def client_section(a: Any, rd: Redactor, max_rows: int = MAX_CLIENT_ROWS) -> str:
    """Client-observed vs server-side TTFT and e2e per request (``--client``); nothing without a client file."""
    c = getattr(a.run, "client", None)
    if not c:
        return ""
    ov = c.get("overhead") or {}

    def dist(m: str) -> str:
        d = ov.get(m) or {}
        if not d.get("count"):
            return "no request compared"
        return (f"median {_sec(d.get('p50'))}, p95 {_sec(d.get('p95'))}, max {_sec(d.get('max'))} "
                f"over {d['count']} requests")

    nc = c.get("not_compared") or {}
    rows = c.get("requests") or []
    shown = rows[:max_rows]
    body = []
    for r in shown:
        def cell(v: Any) -> str:
            return f"<td data-v='{'' if v is None else v}'>{esc(_sec(v))}</td>"

        body.append(
            f"<tr class='cl-{'ok' if r.get('status') == 'success' else 'bad'}'><td>{esc(rd(r.get('request_id')))}</td>"
            f"<td>{esc(r.get('status'))}</td>"
            + cell(r.get("client_ttft_s")) + cell(r.get("server_ttft_s"))
            + f"<td>{esc(r.get('server_ttft_s_source') or '')}</td>" + cell(r.get("overhead_ttft_s"))
            + cell(r.get("client_e2e_s")) + cell(r.get("server_e2e_s"))
            + f"<td>{esc(r.get('server_e2e_s_source') or '')}</td>" + cell(r.get("overhead_e2e_s")) + "</tr>")
    more = (f"<p class='muted'>Showing {len(shown):,} of {len(rows):,} matched requests; all of them: "
            "<code>vllmlog analyze --json --client …</code> (<code>client.requests</code>).</p>") if len(rows) > len(shown) else ""
    unmatched = c.get("unmatched") or []
    return (
        "<section id='client'><h2>Client vs server</h2>"
        f"<p>{esc(c.get('tool') or 'client')} results: {esc(c.get('records'))} requests, {esc(c.get('matched'))} "
        f"matched to the server's ({esc(c.get('matched_by'))}){'; unmatched: ' + esc(len(unmatched)) if unmatched else ''}.</p>"
        f"<ul class='client-overhead'><li>TTFT overhead (client − server): {esc(dist('ttft_s'))}</li>"
        f"<li>e2e overhead (client − server): {esc(dist('e2e_s'))}</li></ul>"
        f"<p class='muted'>{esc(c.get('note') or '')}. The server's number says where it came from (traced = its "
        f"OpenTelemetry span); estimated server numbers are not compared ({esc(nc.get('server_estimated', 0))} "
        f"values), nor are the client's failed requests ({esc(nc.get('client_failed', 0))}).</p>"
        "<div class='tablewrap'><table id='client-table' class='sortable'><thead><tr>"
        "<th data-type='s'>request</th><th data-type='s'>status</th><th data-type='n'>client TTFT</th>"
        "<th data-type='n'>server TTFT</th><th data-type='s'>source</th><th data-type='n'>TTFT overhead</th>"
        "<th data-type='n'>client e2e</th><th data-type='n'>server e2e</th><th data-type='s'>source</th>"
        "<th data-type='n'>e2e overhead</th></tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>{more}</section>"
    )
