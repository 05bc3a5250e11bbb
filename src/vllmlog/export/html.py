"""The self-contained HTML report of an ``Analysis``: one file, works offline, safe to share.

Layout: header (time range, server runs, verdict) → findings with evidence → RED/USE summary →
incident timeline (repeats collapsed) → charts over time on one shared time axis with every
incident window shaded (KV-cache usage, running / waiting / swapped, throughput, request rate and
errors) → latency distributions with percentile markers → Gantt of the slowest requests →
requests table (sortable, filterable) → warnings/errors by template → unknown-line templates.

Safety: every log-derived string is redacted (``Redactor``) and then HTML-escaped here; chart data
travels as JSON inside ``<script type="application/json">`` with ``<``, ``>`` and ``&`` escaped,
so nothing from a log can close the script element or become markup; the page's Content Security
Policy lets only its own two inline scripts run (by hash) and fetch nothing. Charts are drawn by
uPlot (``assets/uPlot.iife.min.js``, from the npm package ``uplot``; see ``assets/vendor.json``),
inlined once: a small log's report is about 0.1 MB. Chart data is built by ``export.charts``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
from collections import Counter
from datetime import datetime, timezone
from importlib import resources
from typing import Any

import orjson

from ..analyze import Analysis, finding_view, server_view
from ..collapse import collapse_repeats
from ..fmt import fmt_number
from ..numbers import basis_of
from ..parsing.fields import dumps_safe
from ..parsing.templates import template as mask_template
from ..redact import DEFAULT as DEFAULT_REDACTOR
from ..redact import Redactor
from ..textview import (basis_text, evicted_text, fmt_duration, latency_cell, plural, preemptions_text, rate_text, ratio_text,
                        resolution_text, span_text, unmeasured_lines, waiting_text)
from .charts import MAX_POINTS, OK_STATUSES, _nice_step, build_charts, incident_windows, time_range
from ..capacity.htmlview import capacity_section
from .html_startup import client_section, startup_section

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


def _jdur(j: Any, metric: str, v: float | None) -> str:
    """A journey's duration at the resolution it was measured at: ``< 1 s``, never ``0.0 ms``."""
    res = j.ts_resolution_s if basis_of(j.sources.get(metric, "derived")) == "estimated" else None
    return fmt_duration(v, res, sep=" ")


def _fmt_n(v: Any, pct: bool = False) -> str:
    """1,234 · 1,234.5 · 45.2 % (pct)."""
    return fmt_number(v, pct, pct_digits=1, sep=" ")


def _header(a: Analysis, rd: Redactor, title: str) -> str:
    run = a.run
    v = a.verdict
    tr = "–"
    if run.start_ts and run.end_ts:
        dur = (run.end_ts - run.start_ts).total_seconds()
        sub_second = bool(run.start_ts.microsecond or run.end_ts.microsecond)  # the terminal's wording
        span = fmt_duration(dur, 0.001 if sub_second else 1.0) if dur < 1 else span_text(dur)
        tr = f"{run.start_ts.isoformat(sep=' ')} → {run.end_ts.isoformat(sep=' ')} ({span})"
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
            f"<tr><td title='{esc(rd(d['file']))}'>{esc(rd(os.path.basename(d['file'])))}#{d['index']}</td>"
            f"<td>{esc(d['version'] or '?')}</td>"
            f"<td>{esc(rd(d['model'] or '?'))}</td><td>{esc(d['generation'] or '')}</td>"
            f"<td>{esc((d['start_ts'] or '')[:19].replace('T', ' '))}</td><td>{esc(state)}</td>"
            f"<td class='args'>{esc(kv)}</td><td>{d['first_line']}–{d['last_line']}</td></tr>")
    servers = ("<table class='servers'><thead><tr><th>run</th><th>vLLM</th><th>model</th><th>log style</th>"
               "<th>started</th><th>state</th><th>key args / config</th><th>lines</th></tr></thead><tbody>"
               + "".join(rows) + "</tbody></table>") if rows else "<p class='muted'>No vLLM server start found.</p>"
    files = ", ".join(esc(rd(f)) for f in run.files)
    cov = a.coverage
    incomplete = "" if cov.complete else (
        "<div class='incomplete' id='coverage'><b>INCOMPLETE</b> — what was read is not enough for a verdict on the "
        "whole service:<ul>" + "".join(f"<li>{esc(rd(r))}</li>" for r in cov.reasons) + "</ul></div>")
    if a.findings is not None and not a.findings and not cov.complete:
        fsum = "no problems found in what was read"
    return (
        f"<header><div class='titlebar'><h1>{esc(title)}</h1>"
        f"<span class='verdict verdict-{v}' id='verdict'>{esc(a.verdict_label)}</span></div>{incomplete}"
        f"<p class='meta'><b>Time range</b> {esc(tr)} · <b>Files</b> {files} · "
        f"<b>Lines</b> {run.parse_stats.lines:,} · <b>Findings</b> {esc(fsum)}</p>"
        f"<h2 class='small'>Server runs</h2>{servers}</header>"
    )


def _red_use(a: Analysis, rd: Redactor) -> str:
    """RED / USE from ``analyze``'s shared numbers, in the words the terminal uses (``textview``)."""
    s = a.red_use
    r = s["requests"]
    d = s["durations"]
    u = s["use"]
    n = a.numbers or {}
    fin = r.get("finished", r["total"])
    outcomes = ", ".join(f"{v:,} {k}" for k, v in (r.get("by_status") or {}).items() if v) or "–"
    red = [("requests", plural(r["total"], "request")), ("rate", rate_text(r)), ("outcomes", outcomes),
           ("errors (of finished)", ratio_text(r.get("failed", 0), fin)),
           ("aborts (of finished)", ratio_text(r.get("aborted", 0), fin)),
           ("unfinished", f"{r['unfinished']:,}" + (f" ({evicted_text(r)})" if r.get("evicted") else "")),
           ("HTTP errors", f"{r['http']['errors']:,} of {r['http']['total']:,}")]
    rows = [(m, lbl, d.get(m) or {}) for m, lbl in (("queue_s", "queue"), ("ttft_s", "TTFT"), ("tpot_s", "TPOT"),
                                                    ("e2e_s", "e2e"))]
    tta = s.get("time_to_abort_s") or {}
    if tta.get("count"):
        rows.append(("time_to_abort_s", "time to abort", tta))
    est = [x for _, _, x in rows if x.get("basis") == "estimated"]
    lat = "".join(
        f"<tr><th>{esc(lbl)}{' ≈' if x.get('basis') == 'estimated' else ''}</th><td>{x.get('count', 0):,}</td>"
        + "".join(f"<td>{esc(latency_cell(x, q))}</td>" for q in ("p50", "p90", "p99", "max")) + "</tr>"
        for _, lbl, x in rows if x.get("count"))
    basis = " · ".join(f"{lbl}: {basis_text(x)}" for _, lbl, x in rows if x.get("count"))
    approx = ""
    if est:
        res = max((x.get("resolution_s") or 0) for x in est)
        approx = (f" ≈ estimated from log timestamps{' to ' + esc(resolution_text(res)) if res else ''}"
                  " (no measured value).")
    unmeasured = "".join(f"<p class='unmeasured'><b>{esc(lbl)}:</b> {prose(rd(txt))}</p>"
                         for lbl, txt in unmeasured_lines(n.get("unmeasured") or [], ("latency", "requests")))
    if lat:
        durations = ("<table class='lat'><thead><tr><th></th><th>n</th><th>p50</th><th>p90</th><th>p99</th><th>max</th>"
                     f"</tr></thead><tbody>{lat}</tbody></table><p class='basis muted'>from — {esc(basis)}.{approx}</p>")
    else:
        durations = "" if unmeasured else "<p class='muted'>No request latencies in this log.</p>"
    use = []
    for k, lbl, pct in (("running", "running", False), ("waiting", "waiting", False), ("swapped", "swapped", False),
                        ("kv_cache_usage", "KV-cache usage", True), ("batch_size", "decode batch size", False),
                        ("prompt_throughput", "prompt tok/s", False), ("generation_throughput", "generation tok/s", False)):
        m = u.get(k) or {}
        if m.get("count"):
            use.append((lbl, f"mean {_fmt_n(m['mean'], pct)} · max {_fmt_n(m['max'], pct)}"))
    extra = ""
    if n.get("preemptions") is not None:
        vers = [sv.version for sv in a.run.servers if sv.version and sv.generation == "v1"]
        extra = f"<p class='muted'>{esc(preemptions_text(n['preemptions'], vers))} · {esc(waiting_text(n))}</p>"

    def kv(rows: list[tuple[str, str]]) -> str:
        return "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)

    return (
        "<section id='summary'><h2>Summary (RED / USE)</h2><div class='grid3'>"
        f"<div><h3>Rate &amp; errors</h3><table class='kv'>{kv(red)}</table></div>"
        f"<div><h3>Durations (successful requests)</h3>{durations}{unmeasured}</div>"
        f"<div><h3>Utilisation &amp; saturation</h3><table class='kv'>{kv(use) or '<tr><td>no engine stats</td></tr>'}</table>"
        f"{extra}</div></div></section>"
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


def _incidents(a: Analysis, rd: Redactor) -> str:
    """The diagnosis's incidents as ``diagnose`` prints them (what clients felt, the cause with its confidence,
    the chain, the evidence, the whole fix), then the verdict's checks; empty when the analysis has none."""
    incidents = getattr(a, "incidents", None)
    info = getattr(a, "verdict_info", None)
    if incidents is None:
        return ""
    out = []
    for i in incidents:
        sev = esc(i.get("severity") or "info")
        cause = i.get("cause") or {}
        when = ""
        if i.get("onset"):
            when = esc(str(i["onset"]).replace("T", " "))
            if i.get("end") and i["end"] != i["onset"]:
                when += " → " + esc(str(i["end"]).replace("T", " "))
        meta = [f"<b>{esc(i.get('category') or '')}</b>", f"impact {esc(i.get('impact') or '')}",
                f"{esc(i.get('confidence') or '')} confidence", f"trend {esc(i.get('trend') or '')}"]
        if i.get("repeats"):
            meta.append(f"repeated in {int(i['repeats'])} later start(s)")
        chain = " → ".join(esc(str(c)) for c in i.get("chain") or [])
        fixes = i.get("fixes") or []
        finds = ", ".join(f"<a href='#finding-code-{esc(c)}'>{esc(c)}</a>" for c in i.get("findings") or [])
        out.append(
            f"<article class='finding incident sev-{sev}' id='incident-{esc(i.get('id') or '')}'>"
            f"<h3><span class='sev'>{sev}</span> {esc(i.get('id') or '')} · {esc(rd(str(i.get('headline') or '')))}</h3>"
            f"<p class='when'>{' · '.join(meta)}" + (f" · {when}" if when else "") + "</p>"
            + (f"<p><b>Cause</b> {esc(cause.get('code') or '')} — {esc(rd(str(cause.get('title') or '')))}"
               f"{(': ' + prose(rd(str(cause['root_cause'])))) if cause.get('root_cause') else ''}</p>" if cause
               else "<p><b>Cause</b> not established from this log.</p>")
            + (f"<p class='chain'><b>Chain</b> {chain}</p>" if chain else "")
            + _evidence_html(i.get("evidence") or [], rd)
            + ("<div class='fix'><b>Fix</b><ul>" + "".join(f"<li>{prose(rd(str(x)))}</li>" for x in fixes) + "</ul></div>"
               if fixes else "")
            + (f"<p class='muted'>Findings: {finds}</p>" if finds else "")
            + "</article>")
    checks = ""
    if info and info.get("checks"):
        rows = "".join(f"<tr class='check-{esc(c.get('status'))}'><td>{esc(c.get('check'))}</td><td>{esc(c.get('status'))}"
                       f"</td><td>{esc(rd(str(c.get('detail') or '')))}</td></tr>" for c in info["checks"])
        checks = ("<h3 class='small'>Checks</h3><table class='checks'><thead><tr><th>check</th><th>status</th>"
                  "<th>detail</th></tr></thead><tbody>" + rows + "</tbody></table>")
    reason = (f"<p class='verdict-reason'><b>{esc(a.verdict_label)}</b> — {esc(rd(str(info.get('reason') or '')))}</p>"
              if info else "")
    body = "".join(out) or "<p class='ok'>No incident: nothing clients would feel.</p>"
    return "<section id='incidents'><h2>Incidents</h2>" + reason + body + checks + "</section>"


def _findings(a: Analysis, rd: Redactor) -> str:
    if a.findings is None:
        why = a.unavailable.get("diagnosis", "")
        return (f"<section id='findings'><h2>Findings</h2><p class='unavailable'>Diagnosis unavailable: "
                f"{esc(why)}. The verdict is unknown.</p></section>")
    if not a.findings:
        return "<section id='findings'><h2>Findings</h2><p class='ok'>No problems found.</p></section>"
    out = []
    seen_codes: set[str] = set()
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
            + (f"<a id='finding-code-{esc(f['code'])}'></a>" if f["code"] not in seen_codes else "") +
            f"<h3><span class='sev'>{f['severity']}</span> {esc(rd(f['title']))} "
            f"<span class='code'>{esc(f['code'])} {esc(f['rule'])}</span></h3>"
            + (f"<p class='when'>{when}</p>" if when else "")
            + (f"<p>{prose(rd(str(f['message'])))}</p>" if f["message"] else "")
            + _evidence_html(f["evidence"], rd)
            + (f"<div class='cause'><b>Root cause</b><p>{prose(rd(str(f['root_cause'])))}</p></div>" if f["root_cause"] else "")
            + (f"<div class='fix'><b>Fix</b>{fix_html}</div>" if fix_html else "")
            + "</article>")
        seen_codes.add(f["code"])
    return "<section id='findings'><h2>Findings</h2>" + "".join(out) + "</section>"


_OWN_COUNT = re.compile(r" ×\d+ \(until [^)]*\)$")


def _timeline(a: Analysis, rd: Redactor, limit: int = 400) -> str:
    if a.timeline is None:
        return (f"<section id='timeline'><h2>Incident timeline</h2><p class='unavailable'>Timeline unavailable: "
                f"{esc(a.unavailable.get('timeline', ''))}</p></section>")
    if not a.timeline:
        return "<section id='timeline'><h2>Incident timeline</h2><p class='muted'>Nothing notable happened.</p></section>"
    entries = collapse_repeats(a.timeline)
    rows = []
    for e in entries[:limit]:
        ts = e.get("ts") or e.get("time") or e.get("start") or ""
        sev = severity_or_level(e)
        what = str(e.get("title") or e.get("text") or e.get("message") or e.get("summary") or e.get("kind") or "")
        kind = e.get("kind") or e.get("type") or ""
        loc = f"{os.path.basename(str(e.get('file')))}:{e.get('line')}" if e.get("file") and e.get("line") else ""
        rep = ""
        if e.get("repeats", 1) > 1:
            what = _OWN_COUNT.sub("", what)  # the folded count replaces the timeline's own burst count
            until = str(e.get("last_ts") or "").replace("T", " ")[11:19]
            rep = f" <span class='rep'>×{int(e['count']):,}</span>" + (f" <span class='muted'>(until {esc(until)})</span>" if until else "")
        rows.append(f"<tr class='sev-{esc(sev)}'><td class='ts'>{esc(str(ts).replace('T', ' '))}</td>"
                    f"<td><span class='sev'>{esc(sev)}</span></td><td>{esc(kind)}</td>"
                    f"<td>{highlight(rd(what))}{rep}</td><td class='loc'>{esc(rd(loc))}</td></tr>")
    folded = len(a.timeline) - len(entries)
    notes = []
    if folded:
        notes.append(f"{folded:,} repeated entries folded into the rows they repeat (×N).")
    if len(entries) > limit:
        notes.append(f"{len(entries) - limit:,} more rows in the JSON output (<code>vllmlog analyze --json</code>).")
    more = f"<p class='muted'>{' '.join(notes)}</p>" if notes else ""
    return ("<section id='timeline'><h2>Incident timeline</h2><div class='tablewrap timeline-wrap'>"
            "<table class='timeline'><thead><tr><th>time</th>"
            "<th>severity</th><th>kind</th><th>what happened</th><th>where</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></div>" + more + "</section>")


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
            note = f"<p class='chart-note muted'>{esc(f['note'])}</p>" if f.get("note") else ""
            out.append(f"<div class='{cls} plot' id='{f['id']}' data-chart='{f['id']}'>"
                       f"<div class='chart-title'>{esc(f['title'])}</div>"
                       f"<div class='plot-area' style='min-height:{int(f['height']) + 30}px'></div>{note}</div>")
    return "".join(out)


def _windows_list(windows: list[dict[str, Any]], rd: Redactor) -> str:
    """The numbered list of the windows the time charts shade (numbers match the onset markers)."""
    if not windows:
        return "<p class='muted windows-none'>No incident windows: nothing is shaded.</p>"
    items = []
    for i, w in enumerate(windows, 1):
        t0 = datetime.fromtimestamp(w["start"], timezone.utc).strftime("%H:%M:%S")
        t1 = datetime.fromtimestamp(w["end"], timezone.utc).strftime("%H:%M:%S")
        span = t0 if t0 == t1 else f"{t0}–{t1}"
        items.append(f"<li class='sev-{esc(w['severity'])}'><span class='wnum'>{i}</span> "
                     f"<span class='ts'>{esc(span)}</span> {esc(rd(w['label']))}</li>")
    return ("<div class='windows'><b>Shaded windows</b> (onset marked by the numbered line; drag on a chart to zoom "
            "every chart, double-click to reset)<ol>" + "".join(items) + "</ol></div>")


_OK = OK_STATUSES


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
        def num(v: Any, fmt: Any) -> str:
            return f"<td data-v='{'' if v is None else v}'>{esc(fmt(v)) if v is not None else '–'}</td>"

        def dur(m: str) -> str:
            v = getattr(j, m)
            return f"<td data-v='{'' if v is None else v}'>{esc(_jdur(j, m, v))}</td>"

        st = j.status + (f" ({j.reason})" if j.reason else "")
        rows.append(
            f"<tr class='st-{'ok' if j.status in _OK else 'bad'}'><td>{esc(rd(j.request_id))}</td><td>{esc(rd(st))}</td>"
            f"<td>{esc(j.arrival_ts.isoformat(sep=' ') if j.arrival_ts else '')}</td>"
            + dur("queue_s") + dur("ttft_s") + dur("tpot_s") + dur("e2e_s")
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


_GANTT = (("queue", "queue (waiting to be scheduled)", "#ff7f0e"), ("prefill", "prefill (to first token)", "#9467bd"),
          ("decode", "decode", "#2ca02c"), ("total", "end-to-end (no breakdown in the log)", "#9aa0a6"))


_METRIC = {"queue": "queue_s", "prefill": "prefill_s", "decode": "decode_s", "total": "e2e_s"}


def _gantt(a: Analysis, rd: Redactor, rows: int = WATERFALL_ROWS) -> str:
    """The slowest requests as horizontal bars (queue → prefill → decode) with a legend and a time
    axis; plain HTML and CSS, so it prints and needs no script."""
    def total(j: Any) -> float:
        return float(j.e2e_s) if j.e2e_s is not None else (j.finish_ts - j.arrival_ts).total_seconds()

    js = [j for j in a.run.journeys if j.arrival_ts is not None and (j.e2e_s is not None or j.finish_ts is not None)]
    if not js:
        return "<p class='muted chart-none'>No finished requests with timings in this log.</p>"
    slow = sorted(js, key=total, reverse=True)[:rows]
    t0 = min(j.arrival_ts for j in slow)
    spans = []
    for j in slow:
        start = (j.arrival_ts - t0).total_seconds()
        tot = max(0.0, total(j))
        q, p, d = j.queue_s, j.prefill_s, j.decode_s
        if q is None and p is None and j.ttft_s is not None:
            p = float(j.ttft_s)  # no breakdown: time to first token as one segment
        if q is None and p is None and d is None:
            parts = [("total", tot)]
        else:
            q, p = float(q or 0.0), float(p or 0.0)
            parts = [("queue", q), ("prefill", p), ("decode", float(d) if d is not None else max(0.0, tot - q - p))]
        spans.append((j, start, tot, parts))
    end = max(s + max(t, sum(x for _, x in parts)) for _, s, t, parts in spans) or 1.0
    step = _nice_step(end / 6)
    ticks = []
    k = 0
    while k * step <= end * 1.0001:
        ticks.append(k * step)
        k += 1
    scale = max(end, ticks[-1])

    def pct(v: float) -> str:
        return f"{100 * v / scale:.3f}%"

    colors = {k: c for k, _, c in _GANTT}
    used = {k for _, _, _, parts in spans for k, v in parts if v > 0 or k == "total"}
    legend = "".join(f"<span class='lg'><span class='sw' style='background:{c}'></span>{esc(lbl)}</span>"
                     for k, lbl, c in _GANTT if k in used)
    legend += "<span class='lg'><span class='sw sw-bad'></span>request not successful (status after the id)</span>"
    axis = "".join(f"<span class='tick' style='left:{pct(t)}'>{esc(span_text(t) if t else '0 s')}</span>" for t in ticks)
    body = []
    for j, start, tot, parts in spans:
        off = start
        segs = []
        for kind, v in parts:
            if v <= 0 and kind != "total":  # a zero end-to-end (below the resolution) still gets its tick
                continue
            segs.append(f"<span class='seg' style='left:{pct(off)};width:{pct(v)};background:{colors[kind]}' "
                        f"title='{esc(kind)} {esc(_jdur(j, _METRIC[kind], v))}'></span>")
            off += v
        ok = j.status in _OK
        rid = esc(rd(j.request_id))
        status = "" if ok else f" <span class='gstatus'>{esc(rd(j.status))}</span>"
        body.append(f"<div class='grow{'' if ok else ' bad'}'><div class='glabel' title='{rid}'>{rid}{status}</div>"
                    f"<div class='gtrack' title='{rid}: {esc(_jdur(j, 'e2e_s', tot))} in all'>{''.join(segs)}"
                    f"<span class='gtot' style='left:calc({pct(max(start + tot, off))} + 4px)'>{esc(_jdur(j, 'e2e_s', tot))}"
                    "</span></div></div>")
    return (f"<div class='chart gantt' id='chart-waterfall'><div class='chart-title'>Slowest {len(spans)} requests: "
            f"queue / prefill / decode (seconds after {esc(t0.isoformat(sep=' '))})</div>"
            f"<div class='glegend'>{legend}</div>"
            f"<div class='grow gaxis'><div class='glabel'></div><div class='gtrack'>{axis}</div></div>"
            + "".join(body) + "</div>")


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
    s = dumps_safe(obj).decode()
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _csp_hash(script: str) -> str:
    """The CSP source for one inline script: its exact text between ``<script>`` and ``</script>``."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode() + "'"


def render_report(
    a: Analysis,
    *,
    redactor: Redactor = DEFAULT_REDACTOR,
    title: str = "vLLM log analysis",
    max_points: int = MAX_POINTS,
    max_request_rows: int = MAX_REQUEST_ROWS,
) -> str:
    """The report as one HTML string (scripts, styles and data inlined)."""
    return "".join(report_parts(a, redactor=redactor, title=title, max_points=max_points,
                                max_request_rows=max_request_rows))


def report_parts(
    a: Analysis,
    *,
    redactor: Redactor = DEFAULT_REDACTOR,
    title: str = "vLLM log analysis",
    max_points: int = MAX_POINTS,
    max_request_rows: int = MAX_REQUEST_ROWS,
) -> list[str]:
    """The report as the pieces ``render_report`` joins, in order (``write_report`` writes them one by one: a
    large log's report is not held as one string, then as its copy in the template, then as bytes)."""
    from .. import __version__

    charts = build_charts(a, max_points)
    specs = {f["id"]: f for sec in charts.values() for f in sec if not isinstance(f, tuple)}
    windows = incident_windows(a)
    policy = []
    policy.append("prompt and output text included (--show-prompts)" if redactor.show_prompts
                  else "prompt and output text redacted")
    if redactor.mask_ips:
        policy.append("IP addresses masked")
    over_none = "No charts over time: this log has no engine stats lines, decode steps or requests."
    has_time = not all(isinstance(f, tuple) for f in charts["over_time"])
    body = [
        _header(a, redactor, title),
        "<nav><a href='#summary'>summary</a><a href='#incidents'>incidents</a><a href='#findings'>findings</a><a href='#timeline'>timeline</a>"
        "<a href='#startup'>start-up</a><a href='#charts'>charts</a><a href='#latency'>latency</a><a href='#waterfall'>slowest requests</a>"
        + ("<a href='#client'>client vs server</a>" if a.run.client else "") +
        "<a href='#capacity'>capacity</a><a href='#requests'>requests</a><a href='#problems'>warnings/errors</a><a href='#unknown'>unknown lines</a></nav>",
        "<main>",
        _incidents(a, redactor),
        _findings(a, redactor),
        _red_use(a, redactor),
        _timeline(a, redactor),
        startup_section(a, redactor),
        "<section id='charts'><h2>Over time</h2>"
        + (_windows_list(windows, redactor) if has_time else "")
        + _chart_divs(charts["over_time"], none=over_none)
        + ("<p class='muted chart-note'>One time axis for every chart (the log's own clock). A line stops where "
           "data is missing: no stats line for more than 1.5 intervals (an idle server logs none, or the log is cut) "
           "or a server restart.</p>" if has_time else "")
        + "</section>",
        "<section id='latency'><h2>Latency distributions</h2><div class='grid3'>"
        + _chart_divs(charts["distributions"], "chart small", none="No request latencies in this log.") + "</div></section>",
        "<section id='waterfall'><h2>Slowest requests</h2>" + _gantt(a, redactor) + "</section>",
        client_section(a, redactor),
        capacity_section(a.run, a.numbers),
        _requests(a, redactor, max_request_rows),
        _grouped_problems(a, redactor),
        _unknown(a, redactor),
        "</main>",
        f"<footer>Generated by vllmlog {esc(__version__)} on {esc(datetime.now().isoformat(sep=' ', timespec='seconds'))}"
        f" · {esc('; '.join(policy))} · charts: uPlot {esc(_vendor()['version'])} (MIT, embedded, works offline)</footer>",
    ]
    return page_parts(title, body, {"charts": specs, "windows": windows, "time": time_range(a)})


def page(title: str, body: str, data: dict[str, Any], css: str = "") -> str:
    """A self-contained report page: the template with the embedded uPlot, the report script (both allowed by
    their hash in the CSP), the styles (+ ``css``), ``body`` (escaped HTML) and ``data`` for the script."""
    return "".join(page_parts(title, [body], data, css))


def page_parts(title: str, body: list[str], data: dict[str, Any], css: str = "") -> list[str]:
    """``page`` as pieces in order, ``body`` given as pieces too."""
    lib = "/*! uPlot " + _vendor()["version"] + " (npm package uplot) — " + _asset("assets/uPlot.LICENSE").replace(
        "*/", "* /").strip() + " */\n" + _asset("assets/uPlot.iife.min.js")
    app = _asset("assets/report.js")
    parts = {
        "TITLE": esc(title),
        "CSP": "default-src 'none'; script-src " + _csp_hash("\n" + lib + "\n") + " " + _csp_hash("\n" + app + "\n")
               + "; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'",
        "CSS": _asset("assets/uPlot.min.css") + "\n" + _asset("assets/report.css") + css,
        "DATA": json_for_script(data),
        "LIB": lib,
        "APP": app,
    }
    # one pass over the template's markers: inserted text (log-derived or not) is never re-scanned
    out: list[str] = []
    for i, piece in enumerate(re.split(r"@@([A-Z]+)@@", _asset("templates/report.html"))):
        if i % 2 == 0:
            out.append(piece)  # the template's own text
        elif piece == "BODY":
            out += body
        else:
            out.append(parts[piece])
    return out


def _vendor() -> dict[str, Any]:
    """The vendored chart library's record (name, version, licence, file hashes)."""
    return orjson.loads(_asset("assets/vendor.json"))["uplot"]


def write_report(a: Analysis, path: str, **kwargs: Any) -> int:
    """Write the report; returns its size in bytes."""
    from ..errors import InputError

    pieces = report_parts(a, **kwargs)
    n = 0
    try:
        with open(path, "wb") as fp:
            while pieces:  # each piece encoded and let go once written
                n += fp.write(pieces.pop(0).encode("utf-8"))
    except OSError as exc:
        raise InputError(f"cannot write report {path}: {exc.strerror or exc}") from exc
    return n
