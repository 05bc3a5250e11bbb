"""Rich terminal rendering of an ``Analysis`` (formatting only: the numbers come from ``analyze``).

Fits in one screen and in 100 columns: verdict, server runs, the top findings with evidence and
fix, a compact RED/USE table, and where the HTML report went.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .analyze import Analysis, finding_view
from .fmt import fmt_number, fmt_seconds
from .redact import DEFAULT as DEFAULT_REDACTOR
from .redact import Redactor
from .textview import (elide_middle, fmt_duration, hanging, span_text, latency_cell, plural, preemptions_text, requests_text, resolution_text,
                       strip_envelope, unmeasured_lines, waiting_text)

SEV_STYLE = {"critical": "bold white on red", "error": "bold red", "warning": "bold yellow", "info": "cyan"}
VERDICT_STYLE = {"healthy": "bold white on green", "degraded": "bold black on yellow",
                 "failing": "bold white on red", "down": "bold white on red", "incomplete": "bold black on bright_yellow",
                 "unknown": "bold white on grey42"}
KEY_ARGS = ("max_num_seqs", "max_model_len", "gpu_memory_utilization", "max_num_batched_tokens",
            "tensor_parallel_size", "num_gpu_blocks_override", "enable_prefix_caching", "swap_space")


_s = fmt_seconds  # 12.34s, 340ms
_n = fmt_number  # 1,234 · 1,234.5 · 45% (pct)


def text_width(console: Console) -> int | None:
    """Columns to wrap prose to: the console's width, or None (never hard-wrap) for a soft-wrapping
    console — the CLI's console for piped output, so ``grep`` sees whole lines."""
    return None if console.soft_wrap else max(40, console.width)


def _line(text: str, style: str = "", width: int | None = 98) -> Text:
    t = Text(text.replace("\n", " ⏎ "), style=style, no_wrap=True, overflow="ellipsis")
    if width is not None:
        t.truncate(width, overflow="ellipsis")
    return t


def _oneline(v: Any) -> str:
    if isinstance(v, list):
        return " · ".join(str(x) for x in v)
    return " ".join(str(v or "").split())


def para(label: str, text: str, width: int | None, style: str = "", indent: str = "  ",
         max_lines: int | None = None, cont: str | None = None) -> Text:
    """``label`` + the whole ``text`` with a hanging indent (``cont``, default two more spaces; wrapped to
    ``width``; one line when ``width`` is None); ``max_lines`` elides the middle, never the end."""
    lines = hanging(text, width, first=indent + label, indent=indent + "  " if cont is None else cont,
                    max_lines=max_lines)
    out = Text("\n".join(lines), style=style)
    if label:
        out.stylize("bold", len(indent), len(indent) + len(label))
    return out


def short_evidence(e: dict[str, Any], rd: Redactor) -> str:
    """``file.log:123  LEVEL message`` without the process tag, timestamp and source prefix."""
    text = strip_envelope(rd(str(e.get("text") or "")).split("\n", 1)[0])
    loc = f"{os.path.basename(str(e['file']))}:{e['line']}" if e.get("file") and e.get("line") else ""
    return f"{rd(loc)}  {text}".strip()


def evidence_text(e: dict[str, Any], rd: Redactor, width: int | None, max_lines: int = 2, indent: str = "  ") -> Text:
    """One evidence line: location and text with a hanging indent, at most ``max_lines`` lines — the
    middle elided, so the numbers at the end of a vLLM line stay (``… Waiting: 9 reqs, KV cache usage:
    100.0%``). Unwrapped (whole, up to 2,000 characters) when ``width`` is None."""
    text = short_evidence(e, rd)
    if width is None:
        return Text(indent + "│ " + elide_middle(text, 2000), style="grey62")
    lines = hanging(text, width, first=indent + "│ ", indent=indent + "│     ", max_lines=max_lines)
    return Text("\n".join(lines), style="grey62")


def fix_text(fix: str, width: int | None, label: str = "fix: ", indent: str = "  ") -> Text:
    """The whole remediation, never cut, with a hanging indent."""
    return para(label, fix, width, "green", indent=indent)


def finding_block(f: dict[str, Any], rd: Redactor, width: int | None, evidence_lines: int = 2) -> list[Text]:
    """A finding as printed: severity, title and code; the message; evidence; the whole fix."""
    out = []
    t = Text()
    t.append(f"{f['severity'].upper():9}", style=SEV_STYLE.get(f["severity"], ""))
    t.append(rd(str(f["title"])), style="bold")
    if f["code"]:
        t.append(f"  [{f['code']}]", style="dim")
    if width is not None:
        t.truncate(width, overflow="ellipsis")
    out.append(t)
    if f["message"]:
        out.append(para("", rd(_oneline(f["message"])), width))
    for e in f["evidence"][:evidence_lines]:
        out.append(evidence_text(e, rd, width))
    if f["fix"]:
        out.append(fix_text(rd(_oneline(f["fix"])), width))
    return out


def server_text(s: Any, rd: Redactor, with_file: bool) -> str:
    """``server 0 (a.log): vLLM 0.32.0 · /models/tiny · v1 · ready · max_num_seqs=4 …`` (unknowns left out)."""
    args = {**{k: s.config[k] for k in ("num_gpu_blocks", "kv_cache_tokens") if k in s.config},
            **{k: s.args[k] for k in KEY_ARGS if k in s.args}}
    parts = [f"vLLM {s.version}" if s.version else "vLLM version not logged"]
    if s.model:
        parts.append(rd(s.model))
    if s.generation:
        parts.append(s.generation)
    parts.append("ready" if s.ready else "never ready")
    head = f"server {s.index}" + (f" ({rd(os.path.basename(s.file))})" if with_file else "")
    return (f"{head}: " + " · ".join(parts)
            + (" · " + " ".join(f"{k}={rd(str(x))}" for k, x in args.items()) if args else ""))


def render_analysis(
    a: Analysis,
    console: Console,
    *,
    redactor: Redactor = DEFAULT_REDACTOR,
    top: int = 5,
    evidence_lines: int = 2,
    report_path: str | None = None,
    report_bytes: int | None = None,
) -> None:
    """Print the analysis: verdict, servers, top findings, RED/USE, report location."""
    rd = redactor
    run = a.run
    width = text_width(console)
    v = a.verdict
    head = Text()
    head.append(f" {a.verdict_label} ", style=VERDICT_STYLE.get(v, "bold"))
    open_inc = [i for i in a.incidents or [] if i["severity"] != "info"]
    counts = Counter(f["severity"] for f in a.findings or [])
    if a.findings is None:
        head.append("  diagnosis unavailable", style="yellow")
    elif a.incidents is not None:
        head.append("  " + (plural(len(open_inc), "incident") if open_inc else "no incident")
                    + (f" · {plural(len(a.findings), 'finding')}" if a.findings else ""))
    elif not a.findings:
        head.append("  no problems found" + ("" if a.coverage.complete else " in what was read"),
                    style="green" if a.coverage.complete else "yellow")
    else:
        head.append("  " + ", ".join(f"{counts[s]} {s}" for s in ("critical", "error", "warning", "info") if counts.get(s)))
    console.print(head)
    if a.verdict_info and a.verdict_info.get("reason") and not open_inc and a.coverage.complete:
        console.print(para("", rd(str(a.verdict_info["reason"])), width, "dim", indent=""))
    cov = a.coverage
    if not cov.complete:
        console.print(para("", cov.headline(), width, "bold yellow", indent="", cont="  "))
        for g in cov.gaps[1:4]:
            console.print(para("", g.message, width, "yellow", indent="  "))
    where = []
    if run.start_ts and run.end_ts:
        dur = (run.end_ts - run.start_ts).total_seconds()
        sub_second = bool(run.start_ts.microsecond or run.end_ts.microsecond)
        where.append(f"{run.start_ts:%Y-%m-%d %H:%M:%S} → {run.end_ts:%Y-%m-%d %H:%M:%S} "
                     f"({fmt_duration(dur, 0.001 if sub_second else 1.0) if dur < 1 else span_text(dur)})")
    where.append(f"{run.parse_stats.lines:,} lines")
    names = [os.path.basename(f) for f in (run.files or [i.path for i in run.parse_stats.inputs])]
    where.append(", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else ""))
    console.print(para("", " · ".join(where), width, "dim", indent=""))
    multi = len(run.files) > 1
    for s in run.servers[:4]:
        console.print(para("", server_text(s, rd, multi), width, "dim" if s.ready else "yellow", indent="",
                           max_lines=2))
    if len(run.servers) > 4:
        console.print(Text(f"… {len(run.servers) - 4} more server runs", style="dim"))

    if a.findings is None:
        console.print(Text(f"diagnosis unavailable: {a.unavailable.get('diagnosis', '')}", style="yellow"))
    if a.incidents is not None:
        _incidents(a, console, rd, width, top, evidence_lines)
    for f in ([] if a.incidents is not None else a.views()[:top]):
        console.print()
        for t in finding_block(f, rd, width, evidence_lines):
            console.print(t)
    rest = [] if a.incidents is not None else a.views()[top:]
    if rest:
        console.print()
        for f in rest[:6]:
            console.print(_line(f"{f['severity'].upper():9}{rd(str(f['title']))}  [{f['code']}]", "dim", width))
        more = len(rest) - 6
        n = len(a.findings or [])
        console.print(Text(f"{'… ' + str(more) + ' more; ' if more > 0 else ''}details, evidence and fixes of "
                           f"{'the finding' if n == 1 else f'all {n} findings'}: the report or --json", style="dim"))
    console.print()
    ru = a.red_use
    if not ru["requests"]["total"] and not any((ru["use"].get(k) or {}).get("count") for k in ("running", "kv_cache_usage")):
        console.print(Text("no requests and no engine stats in this log", style="dim"))
    else:
        for t in numbers_block(a, width):
            console.print(t)
    if report_path:
        size = f" ({report_bytes / 1e6:.1f} MB)" if report_bytes else ""
        console.print(Text.assemble(("report: ", "bold"), (report_path, "underline"), (size, "dim"),
                                    ("  — open it in a browser", "dim")))


def incident_block(inc: dict[str, Any], cause: dict[str, Any] | None, rd: Redactor, width: int | None,
                   evidence_lines: int = 3) -> list[Text]:
    """An incident as printed: severity and what clients felt; the cause (finding, confidence); the evidence
    (cause's lines first); the whole fix; what followed."""
    out = []
    t = Text()
    t.append(f"{inc['severity'].upper():9}", style=SEV_STYLE.get(inc["severity"], ""))
    t.append(f"[{inc['id']} · {inc['impact'].replace('_', ' ')} · {inc['category']}]", style="dim")
    out.append(t)
    head = inc["headline"].split(" Cause: ")[0]
    out.append(para("", rd(_oneline(head)), width, "bold"))
    if cause is not None:
        out.append(para("cause: ", rd(_oneline(f"{cause['title']} [{cause['code']}] ({inc['confidence']} confidence) — "
                                             f"{cause['message']}")), width))
    elif inc.get("confidence") == "low":
        out.append(para("cause: ", "no explainer matched — named by the symptom (low confidence)", width, "yellow"))
    for e in (inc.get("evidence") or [])[:evidence_lines]:
        out.append(evidence_text(e, rd, width))
    fixes = inc.get("fixes") or []
    if fixes:
        out.append(fix_text(rd("; ".join(fixes)) + ".", width))
    chain = [c for c in inc.get("chain") or [] if c != inc["impact"]]
    others = [c for c in inc.get("findings") or [] if cause is None or c != cause["code"]]
    if len(chain) > 1 or others:
        out.append(para("then: ", " → ".join(chain) + (f" (also {', '.join(others)})" if others else ""), width, "dim"))
    return out


def _incidents(a: Analysis, console: Console, rd: Redactor, width: int | None, top: int, evidence_lines: int) -> None:
    by_code = {}
    for f in a.findings or []:
        if f.get("incident") and f["incident"] not in by_code:
            by_code[f["incident"]] = finding_view(f) | {"code": f.get("code")}
    shown = [i for i in a.incidents or [] if i["severity"] != "info"]
    for inc in shown[:top]:
        console.print()
        cause = by_code.get(inc["id"]) if inc.get("cause") else None
        for t in incident_block(inc, cause, rd, width, evidence_lines + 1):
            console.print(t)
    if len(shown) > top:
        console.print(Text(f"… {len(shown) - top} more incident(s): the report or --json", style="dim"))
    notes = [f for f in a.findings or [] if not f.get("incident")]
    if notes:
        console.print()
        names = ", ".join(f"{f.get('code')} {rd(str(f.get('title') or ''))}" for f in notes[:4])
        console.print(para("notes: ", f"{plural(len(notes), 'finding')} outside any incident (saturation, normal-level "
                           f"events): {names}" + (" …" if len(notes) > 4 else ""), width, "dim", indent=""))


def numbers_block(a: Analysis, width: int | None) -> list[Any]:
    """The shared numbers as the terminal shows them: requests, latency (or why it is missing and how
    to get it), engine use, preemptions, Waiting > 0."""
    n = a.numbers if a.numbers is not None else None
    out: list[Any] = []
    r = a.red_use["requests"]
    if n is not None:
        out.append(para("", requests_text(n["requests"]), width, indent=""))
    out.append(red_use_table(a, width))
    if n is not None:
        for label, text in unmeasured_lines(n["unmeasured"], ("latency", "requests")):
            out.append(para(label + ": ", text, width, "yellow", indent=""))
        vers = [s.version for s in a.run.servers if s.version and s.generation == "v1"]
        out.append(para("", preemptions_text(n["preemptions"], vers) + " · " + waiting_text(n), width, "dim", indent=""))
    elif r["total"]:
        out.append(Text(f"{plural(r['total'], 'request')}", style="dim"))
    return out


def red_use_table(a: Analysis, width: int | None = None) -> Table:
    """Compact RED (rate, errors, durations) / USE (running, waiting, KV) table; without latency columns
    when the log has no latency for any successful request (the note below says why, not a table of dashes)."""
    s = a.red_use
    r, d, u = s["requests"], s["durations"], s["use"]
    lat = [(lbl, d[m]) for m, lbl in (("queue_s", "queue"), ("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "e2e"))]
    with_lat = any(ld.get("count") for _l, ld in lat)
    t = Table(show_edge=False, box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    cols = [("requests", "left"), ("", "right")]
    if with_lat:
        cols += [("latency", "left"), ("p50", "right"), ("p90", "right"), ("p99", "right")]
    cols += [("engine", "left"), ("mean", "right"), ("max", "right")]
    for col, just in cols:
        t.add_column(col, justify=just, no_wrap=True)
    fin = r.get("finished", r["total"])
    red = [("total", _n(r["total"])), ("rate/s", f"{r['rate_per_s']:.2f}" if r["rate_per_s"] else "–"),
           ("failed/aborted", f"{r['failed_or_aborted']:,}/{fin:,}"),
           ("HTTP errors", f"{r['http']['errors']:,}/{r['http']['total']:,}")]
    use = []
    for k, lbl, pct in (("running", "running", False), ("waiting", "waiting", False),
                        ("kv_cache_usage", "KV cache", True), ("generation_throughput", "gen tok/s", False)):
        m = u.get(k) or {}
        use.append((lbl, _n(m.get("mean"), pct) if m.get("count") else "–", _n(m.get("max"), pct) if m.get("count") else "–"))
    approx = False
    for i in range(4):
        ld = lat[i][1]
        cells = []
        if with_lat:
            mark = ""
            if ld.get("basis") == "estimated":
                mark, approx = "≈", True
            cells = [lat[i][0] + mark, latency_cell(ld, "p50"), latency_cell(ld, "p90"), latency_cell(ld, "p99")]
        t.add_row(red[i][0], red[i][1], *cells, *use[i])
    if approx:
        res = [ld.get("resolution_s") for _l, ld in lat if ld.get("basis") == "estimated" and ld.get("resolution_s")]
        note = "≈ estimated" + (f" from timestamps to {resolution_text(max(res))}" if res else "") + \
               " (successful requests; the log has no measured value)"
        return Group(t, para("", note, width, "dim", indent=""))  # type: ignore[return-value]
    return t
